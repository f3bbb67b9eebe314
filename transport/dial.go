package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kevinburke/ssh_config"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// Target is everything needed to reach one host.
type Target struct {
	// Name is the host's name in the inventory, used in every message about it.
	Name    string
	Address string
	Port    int // 0: from ~/.ssh/config, else 22
	User    string
	// IdentityFiles are private keys to offer; an OpenSSH certificate KEY-cert.pub beside a key is used with it.
	IdentityFiles []string
	// HostKeys pin the host's keys by SHA256 fingerprint (one per key type it has, or fewer); with pins,
	// known_hosts is not consulted for this host.
	HostKeys []string
	// Become runs commands and SFTP as root through sudo; nil: for any login user but root.
	Become *bool
	// Bastions is the chain of jump hosts, the first dialled first.
	Bastions []Hop
}

// Hop is one jump host.
type Hop struct {
	Address       string
	Port          int
	User          string
	IdentityFiles []string
	HostKeys      []string
}

// Options are shared by every connection of a Dialer.
type Options struct {
	// ClusterKnownHosts is the cluster's own known_hosts (in the state directory); keys accepted with
	// AcceptNew are written there. KnownHosts are further files to check (default ~/.ssh/known_hosts).
	ClusterKnownHosts string
	KnownHosts        []string
	// AcceptNew trusts and records the key of a host never seen before (never a changed one).
	AcceptNew bool
	// RecordTrusted records in ClusterKnownHosts the key of each host that KnownHosts trusts (state pull:
	// the new state directory then verifies the hosts on its own, on a workstation without those files).
	RecordTrusted bool
	// Agent offers the keys of the ssh-agent at AgentSocket (default $SSH_AUTH_SOCK).
	Agent       bool
	AgentSocket string
	// SSHConfig is the OpenSSH client configuration to honour where the target is silent (HostName, User,
	// Port, IdentityFile, ProxyJump); "" reads ~/.ssh/config, "none" reads nothing.
	SSHConfig string

	ConnectTimeout time.Duration // TCP connect plus SSH handshake, per hop (default 10s)
	Keepalive      time.Duration // interval of keepalive requests (default 15s; 0 keeps the default, <0 disables)
	Retries        int           // further attempts for errors a retry can fix (default 3)
	RetryDelay     time.Duration // first backoff, doubled each time (default 500ms)

	// Passphrase returns the passphrase of an encrypted key; Password a login password; BecomePassword the
	// sudo password. Each is asked at most once per Dialer. nil: not available.
	Passphrase     func(keyFile string) ([]byte, error)
	Password       func(user, host string) (string, error)
	BecomePassword func() (string, error)

	Log *slog.Logger

	// RecordFile is where Put keeps its record of large files on each host (default RecordFile).
	RecordFile string

	// Keeper, when set, reaches hosts through the connection keeper (keeper.go), starting it when none
	// answers; a host it cannot serve is dialled directly.
	Keeper *KeeperClient

	// authFinal makes an authentication failure final (the keeper's dial for a command that can ask for
	// a password itself); noBecome leaves sudo's password to the command (the keeper's dial).
	authFinal, noBecome bool
}

// Dialer opens connections; it caches keys and passwords so that each is loaded or asked for once.
type Dialer struct {
	opts Options
	keys *hostKeys
	cfg  *ssh_config.Config

	mu       sync.Mutex
	signers  map[string][]ssh.Signer
	agent    []ssh.Signer
	agentErr error
	agentSet bool
	password map[string]string
	becomePw *string
	// pinnedType is, for an address with pinned keys, the key type that matched a pin last: asked first.
	pinnedType map[string]int
}

// NewDialer validates the options and loads the known_hosts files.
func NewDialer(opts Options) (*Dialer, error) {
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	if opts.Keepalive == 0 {
		opts.Keepalive = 15 * time.Second
	}
	if opts.Retries == 0 {
		opts.Retries = 3
	}
	if opts.RetryDelay == 0 {
		opts.RetryDelay = 500 * time.Millisecond
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.KnownHosts == nil {
		opts.KnownHosts = []string{"~/.ssh/known_hosts"}
	}
	keys, err := newHostKeys(opts.ClusterKnownHosts, opts.KnownHosts, opts.AcceptNew)
	if keys != nil {
		keys.recordTrusted = opts.RecordTrusted
	}
	if err != nil {
		return nil, err
	}
	d := &Dialer{opts: opts, keys: keys, signers: map[string][]ssh.Signer{}, password: map[string]string{},
		pinnedType: map[string]int{}}
	if opts.SSHConfig != "none" {
		path := opts.SSHConfig
		if path == "" {
			path = expandHome("~/.ssh/config")
		}
		if f, err := os.Open(path); err == nil {
			cfg, perr := ssh_config.Decode(f)
			f.Close()
			if perr != nil {
				return nil, fmt.Errorf("%s: %w", path, perr)
			}
			d.cfg = cfg
		} else if opts.SSHConfig != "" {
			return nil, err
		}
	}
	return d, nil
}

// Dial connects to the target, through its bastions, retrying errors that a retry can fix.
func (d *Dialer) Dial(ctx context.Context, t Target) (*Conn, error) {
	t = d.fromSSHConfig(t)
	if d.opts.Keeper != nil {
		return d.dialThroughKeeper(ctx, t)
	}
	return retry(ctx, d, t, func() (*Conn, error) { return d.dialOnce(ctx, t) })
}

// retry runs once until it succeeds, or fails with an error a retry cannot fix, or has been retried
// Options.Retries times, with a backoff doubled each time from Options.RetryDelay.
func retry[T any](ctx context.Context, d *Dialer, t Target, once func() (T, error)) (T, error) {
	var zero T
	delay := d.opts.RetryDelay
	start := time.Now()
	for attempt := 0; ; attempt++ {
		c, err := once()
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return zero, &DialError{Host: t.Name, Address: t.addr(), Err: ctx.Err()}
		}
		if attempt >= d.opts.Retries || !Retryable(err) || d.opts.authFinal && errors.Is(err, ErrAuth) {
			var de *DialError
			if attempt > 0 && errors.As(err, &de) {
				de.Tries, de.Took = attempt+1, time.Since(start)
			}
			return zero, err
		}
		d.opts.Log.Debug("dial failed, retrying", "host", t.Name, "attempt", attempt+1, "err", err)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return zero, &DialError{Host: t.Name, Address: t.addr(), Err: ctx.Err()}
		}
		delay *= 2
	}
}

func (t Target) addr() string { return net.JoinHostPort(t.Address, strconv.Itoa(portOr22(t.Port))) }

func portOr22(p int) int {
	if p == 0 {
		return 22
	}
	return p
}

func (d *Dialer) dialOnce(ctx context.Context, t Target) (*Conn, error) {
	clients, err := d.chain(ctx, t)
	if err != nil {
		return nil, err
	}
	return d.finish(ctx, t, clients[len(clients)-1], clients[:len(clients)-1], nil)
}

// chain connects to t through its bastions: the bastions' connections, then the host's, last.
func (d *Dialer) chain(ctx context.Context, t Target) ([]*ssh.Client, error) {
	hops := append(append([]Hop{}, t.Bastions...), Hop{Address: t.Address, Port: t.Port, User: t.User,
		IdentityFiles: t.IdentityFiles, HostKeys: t.HostKeys})
	var clients []*ssh.Client
	closeAll := func() {
		for i := len(clients) - 1; i >= 0; i-- {
			clients[i].Close()
		}
	}
	for i, hop := range hops {
		addr := net.JoinHostPort(hop.Address, strconv.Itoa(portOr22(hop.Port)))
		name := t.Name
		if i < len(hops)-1 {
			name = fmt.Sprintf("%s (bastion %s)", t.Name, hop.Address)
		}
		client, err := d.connect(ctx, clients, name, addr, hop)
		if err != nil {
			closeAll()
			var hk *HostKeyError
			if errors.As(err, &hk) {
				return nil, hk
			}
			return nil, &DialError{Host: name, Address: addr, Err: err}
		}
		clients = append(clients, client)
	}
	return clients, nil
}

// finish makes the Conn of a connection made (directly, or through the keeper: why then says why it
// ended): sudo prepared, keepalives started.
func (d *Dialer) finish(ctx context.Context, t Target, client *ssh.Client, via []*ssh.Client, why func() error) (*Conn, error) {
	if t.User == "" {
		t.User = "root"
	}
	c := newConn(t, client, via, d.opts.Log, why)
	c.recordFile = d.opts.RecordFile
	if c.recordFile == "" {
		c.recordFile = RecordFile
	}
	if c.become && !d.opts.noBecome {
		if err := d.prepareBecome(ctx, c); err != nil {
			c.Close()
			return nil, err
		}
	}
	if d.opts.Keepalive > 0 {
		go c.keepalive(d.opts.Keepalive)
	}
	return c, nil
}

// connect opens an SSH connection to one hop. A hop with pinned keys is asked for one key type at a time
// (ED25519, ECDSA, RSA; the type that matched last time first) until the key it offers matches a pin: a
// fingerprint does not say its key type, and a host offers only one key per handshake.
func (d *Dialer) connect(ctx context.Context, via []*ssh.Client, name, addr string, hop Hop) (*ssh.Client, error) {
	if len(hop.HostKeys) == 0 {
		return d.handshake(ctx, via, addr, d.clientConfig(name, hop, d.keys.algorithms(addr)))
	}
	d.mu.Lock()
	first := d.pinnedType[addr]
	d.mu.Unlock()
	var offered []string
	for i := range pinTypes {
		t := (first + i) % len(pinTypes)
		c, err := d.handshake(ctx, via, addr, d.clientConfig(name, hop, pinTypes[t].algorithms))
		var hk *HostKeyError
		switch {
		case err == nil:
			d.mu.Lock()
			d.pinnedType[addr] = t
			d.mu.Unlock()
			return c, nil
		case errors.As(err, &hk):
			offered = append(offered, hk.Offered)
		case strings.Contains(err.Error(), "no common algorithm for host key"):
			// The host has no key of this type.
		default:
			return nil, err
		}
	}
	if len(offered) == 0 {
		offered = []string{"no key of type ED25519, ECDSA or RSA"}
	}
	e := &HostKeyError{Host: name, Address: addr, Offered: strings.Join(offered, ", "),
		Hint: "if the host was reinstalled on purpose, update its ssh.hostKey in the inventory (ssh-keyscan HOST | ssh-keygen -lf - lists its keys)"}
	for _, p := range hop.HostKeys {
		e.Expected = append(e.Expected, p+" (pinned in the inventory)")
	}
	return nil, e
}

// pinTypes are the key types asked of a host with pinned keys, one handshake each, in this order.
var pinTypes = []struct{ algorithms []string }{
	{[]string{ssh.KeyAlgoED25519}},
	{[]string{ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521}},
	{[]string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256}},
}

// handshake opens the TCP connection (directly, or through the previous hop) and runs the SSH handshake,
// both bounded by the connect timeout and the context.
func (d *Dialer) handshake(ctx context.Context, via []*ssh.Client, addr string, cfg *ssh.ClientConfig) (*ssh.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, d.opts.ConnectTimeout)
	defer cancel()
	var conn net.Conn
	var err error
	if len(via) == 0 {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = via[len(via)-1].DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	type result struct {
		c     ssh.Conn
		chans <-chan ssh.NewChannel
		reqs  <-chan *ssh.Request
		err   error
	}
	done := make(chan result, 1)
	go func() {
		c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
		done <- result{c, chans, reqs, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			conn.Close()
			if strings.Contains(r.err.Error(), "unable to authenticate") {
				return nil, fmt.Errorf("%w as %s: %w", ErrAuth, cfg.User, r.err)
			}
			return nil, r.err
		}
		return ssh.NewClient(r.c, r.chans, r.reqs), nil
	case <-ctx.Done():
		conn.Close()
		<-done
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("SSH handshake timed out after %s: %w", d.opts.ConnectTimeout, os.ErrDeadlineExceeded)
		}
		return nil, ctx.Err()
	}
}

// clientConfig is the SSH configuration of one handshake with a hop; algorithms are the host key
// algorithms asked for (nil: Go's defaults).
func (d *Dialer) clientConfig(name string, hop Hop, algorithms []string) *ssh.ClientConfig {
	user := hop.User
	if user == "" {
		user = "root"
	}
	cfg := &ssh.ClientConfig{
		User:              user,
		HostKeyCallback:   d.keys.callback(name, hop.HostKeys),
		HostKeyAlgorithms: algorithms,
		Timeout:           d.opts.ConnectTimeout,
	}
	cfg.Auth = append(cfg.Auth, ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
		return d.signersFor(hop.IdentityFiles)
	}))
	if d.opts.Password != nil {
		pw := func() (string, error) { return d.loginPassword(user, hop.Address) }
		cfg.Auth = append(cfg.Auth, ssh.PasswordCallback(pw),
			ssh.KeyboardInteractive(func(_, _ string, questions []string, echos []bool) ([]string, error) {
				answers := make([]string, len(questions))
				for i := range questions {
					if echos[i] {
						continue
					}
					p, err := pw()
					if err != nil {
						return nil, err
					}
					answers[i] = p
				}
				return answers, nil
			}))
	}
	return cfg
}

// signersFor returns the agent's keys and those of the identity files, each file loaded once.
func (d *Dialer) signersFor(files []string) ([]ssh.Signer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []ssh.Signer
	var errs []error
	for _, f := range files {
		s, ok := d.signers[f]
		if !ok {
			var err error
			s, err = loadIdentity(expandHome(f), d.opts.Passphrase)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			d.signers[f] = s
		}
		out = append(out, s...)
	}
	if d.opts.Agent {
		if !d.agentSet {
			d.agentSet = true
			d.agent, d.agentErr = agentSigners(d.opts.AgentSocket)
		}
		out = append(out, d.agent...)
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, err := range errs {
		d.opts.Log.Warn("identity file not used", "err", err)
	}
	return out, nil
}

// loadIdentity reads a private key (asking for its passphrase when encrypted) and, when KEY-cert.pub is
// beside it, the OpenSSH certificate to present with it.
func loadIdentity(path string, passphrase func(string) ([]byte, error)) ([]ssh.Signer, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("identity file: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		if passphrase == nil {
			return nil, fmt.Errorf("identity file %s is encrypted and no passphrase is available (set CLUSTERCTL_SSH_PASSPHRASE, use an agent, or run on a terminal)", path)
		}
		pass, perr := passphrase(path)
		if perr != nil {
			return nil, perr
		}
		signer, err = ssh.ParsePrivateKeyWithPassphrase(pem, pass)
	}
	if err != nil {
		return nil, fmt.Errorf("identity file %s: %w", path, err)
	}
	out := []ssh.Signer{}
	if certData, err := os.ReadFile(path + "-cert.pub"); err == nil {
		pub, _, _, _, err := ssh.ParseAuthorizedKey(certData)
		if err != nil {
			return nil, fmt.Errorf("certificate %s-cert.pub: %w", path, err)
		}
		if cert, ok := pub.(*ssh.Certificate); ok {
			cs, err := ssh.NewCertSigner(cert, signer)
			if err != nil {
				return nil, fmt.Errorf("certificate %s-cert.pub: %w", path, err)
			}
			out = append(out, cs)
		}
	}
	return append(out, signer), nil
}

func agentSigners(sock string) ([]ssh.Signer, error) {
	if sock == "" {
		sock = os.Getenv("SSH_AUTH_SOCK")
	}
	if sock == "" {
		return nil, nil
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("ssh-agent at %s: %w", sock, err)
	}
	// The connection stays open: agent signers use it for every signature.
	return agent.NewClient(conn).Signers()
}

func (d *Dialer) loginPassword(user, host string) (string, error) {
	key := user + "@" + host
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.password[key]; ok {
		return p, nil
	}
	p, err := d.opts.Password(user, host)
	if err != nil {
		return "", err
	}
	d.password[key] = p
	return p, nil
}

// prepareBecome finds out whether sudo needs a password on this host and, if so, gets it (once per Dialer)
// and checks it.
func (d *Dialer) prepareBecome(ctx context.Context, c *Conn) error {
	if _, err := c.runRaw(ctx, "sudo -n true", nil); err == nil {
		return nil
	}
	if d.opts.BecomePassword == nil {
		return &DialError{Host: c.target.Name, Address: c.target.addr(),
			Err: fmt.Errorf("sudo needs a password for %s and none is available (set CLUSTERCTL_BECOME_PASSWORD or run on a terminal)", c.target.User)}
	}
	d.mu.Lock()
	if d.becomePw == nil {
		p, err := d.opts.BecomePassword()
		if err != nil {
			d.mu.Unlock()
			return err
		}
		d.becomePw = &p
	}
	pw := *d.becomePw
	d.mu.Unlock()
	if _, err := c.runRaw(ctx, "sudo -S -p '' true", []byte(pw+"\n")); err != nil {
		return &DialError{Host: c.target.Name, Address: c.target.addr(), Err: fmt.Errorf("%w: sudo refused the password for %s", ErrAuth, c.target.User)}
	}
	c.becomePassword = pw
	return nil
}

// fromSSHConfig fills what the target leaves empty from ~/.ssh/config, as ssh would for the same host.
func (d *Dialer) fromSSHConfig(t Target) Target {
	if d.cfg == nil {
		return t
	}
	alias := t.Address
	get := func(key string) string {
		v, err := d.cfg.Get(alias, key)
		if err != nil {
			return ""
		}
		return v
	}
	if hn := get("HostName"); hn != "" {
		t.Address = strings.ReplaceAll(hn, "%h", alias)
	}
	if t.User == "" {
		t.User = get("User")
	}
	if t.Port == 0 {
		t.Port = d.configPort(alias, get("Port"))
	}
	if len(t.IdentityFiles) == 0 {
		if files, err := d.cfg.GetAll(alias, "IdentityFile"); err == nil {
			for _, f := range files {
				if f != "" && f != "~/.ssh/identity" { // ssh_config's default, not a user's choice
					t.IdentityFiles = append(t.IdentityFiles, f)
				}
			}
		}
	}
	if len(t.Bastions) == 0 {
		if jump := get("ProxyJump"); jump != "" && jump != "none" {
			for _, j := range strings.Split(jump, ",") {
				t.Bastions = append(t.Bastions, d.hopFromSpec(j))
			}
		}
	}
	return t
}

// configPort is a port the ssh config gives for host: 0 (the default) when it gives none, or one that is
// not a TCP port (ignored, and logged, as ssh would refuse it).
func (d *Dialer) configPort(host, v string) int {
	if v == "" {
		return 0
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > 65535 {
		d.opts.Log.Warn("ssh config: ignoring a port that is not a TCP port", "host", host, "port", v)
		return 0
	}
	return p
}

// hopFromSpec reads a ProxyJump entry, [user@]host[:port], and completes it from the config of that host.
func (d *Dialer) hopFromSpec(spec string) Hop {
	var h Hop
	if u, rest, ok := strings.Cut(spec, "@"); ok {
		h.User, spec = u, rest
	}
	if host, port, err := net.SplitHostPort(spec); err == nil {
		h.Address = host
		h.Port = d.configPort(spec, port)
	} else {
		h.Address = spec
	}
	t := d.fromSSHConfig(Target{Address: h.Address, Port: h.Port, User: h.User, Bastions: []Hop{{}}})
	h.Address, h.Port, h.User, h.IdentityFiles = t.Address, t.Port, t.User, t.IdentityFiles
	return h
}
