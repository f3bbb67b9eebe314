package transport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// KeeperClient is how a command reaches the connection keeper of its state directory (keeper.go).
type KeeperClient struct {
	Socket  string        // where it listens (KeeperSocket)
	Persist time.Duration // how long it stays after the last command ends
	Start   func() error  // starts it, a process of its own, on Socket

	// Log, when set, hears about a keeper that could not be started for the next command.
	Log *slog.Logger

	mu      sync.Mutex
	off     error           // why the keeper cannot be used: every dial is direct
	hold    net.Conn        // held open to the keeper this command started, until the command ends (Close)
	holding chan struct{}   // closed when the start for the next command has ended
	reached []keeperRequest // the hosts this command reached itself, told to that keeper (remember)
}

// errKeeperStarting is a command's when no keeper was running: it dials its hosts itself, as fast as with
// no keeper at all, and starts one in the background for the commands that follow.
var errKeeperStarting = errors.New("no connection keeper was running: one is started for the next command")

// KeeperSocket is where the keeper of stateDir listens: in $XDG_RUNTIME_DIR/clusterctl, else in
// $TMPDIR/clusterctl-UID, a directory only this user may enter (made so, or refused); its name is a digest
// of the state directory, the executable (path, size, time: a new build has a keeper of its own) and the
// protocol's version.
func KeeperSocket(stateDir, exe string) (string, error) {
	dir := filepath.Join(os.TempDir(), "clusterctl-"+strconv.Itoa(os.Getuid()))
	if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" && filepath.IsAbs(rt) {
		dir = filepath.Join(rt, "clusterctl")
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s is not a directory of this user's alone (mode 0700)", dir)
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return "", err
	}
	// The network namespace too (Linux): a command run elsewhere reaches hosts from there.
	netns, _ := os.Readlink("/proc/self/ns/net")
	id := fmt.Sprintf("v%d\x00%s\x00%s\x00%s", keeperVersion, abs, exe, netns)
	if xi, err := os.Stat(exe); err == nil {
		id += fmt.Sprintf("\x00%d\x00%d", xi.Size(), xi.ModTime().UnixNano())
	}
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(dir, hex.EncodeToString(sum[:8])+".sock"), nil
}

// connect opens a connection to the keeper. When none answers, the command dials its hosts itself (a
// keeper that starts now would only add its start and a second handshake to this command's logins) and
// starts one in the background, held until the command ends: the next command finds it.
func (kc *KeeperClient) connect() (net.Conn, error) {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if kc.off != nil {
		return nil, kc.off
	}
	nc, err := net.Dial("unix", kc.Socket)
	if err == nil || kc.Start == nil {
		return nc, err
	}
	kc.off = errKeeperStarting
	kc.holding = make(chan struct{})
	go kc.startForNext()
	return nil, kc.off
}

// startForNext starts the keeper and holds it until Close, so that its --ssh-persist counts from the end
// of this command, however long it runs.
func (kc *KeeperClient) startForNext() {
	defer close(kc.holding)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := kc.start(ctx)
	if err == nil {
		if err = writeMessage(nc, keeperRequest{Hold: true, Persist: kc.Persist}); err != nil {
			nc.Close()
		}
	}
	if err != nil {
		// Nothing is lost but the next command's logins: said at debug level, as each direct dial is.
		if kc.Log != nil {
			kc.Log.Debug("no connection keeper for the next command: each logs in itself", "err", err)
		}
		return
	}
	kc.mu.Lock()
	defer kc.mu.Unlock()
	kc.hold = nc
	for _, req := range kc.reached {
		if writeMessage(nc, req) != nil {
			return
		}
	}
}

// remember tells the keeper this command is starting of a host it reached itself: once the command ends,
// the keeper logs in to it for the next command, which then finds the connection made (ControlMaster's
// first command leaves its connection behind the same way).
func (kc *KeeperClient) remember(req keeperRequest) {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if !errors.Is(kc.off, errKeeperStarting) {
		return
	}
	kc.reached = append(kc.reached, req)
	if kc.hold != nil {
		_ = writeMessage(kc.hold, req)
	}
}

// Close lets the keeper this command started count its idle time from now (a command's end does the same).
func (kc *KeeperClient) Close() {
	if kc == nil {
		return
	}
	kc.mu.Lock()
	h := kc.holding
	kc.mu.Unlock()
	if h != nil {
		<-h
	}
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if kc.hold != nil {
		kc.hold.Close()
		kc.hold = nil
	}
}

// start starts the keeper, under a lock that other commands take too, unless one of them has by then.
func (kc *KeeperClient) start(ctx context.Context) (net.Conn, error) {
	lock, err := os.OpenFile(kc.Socket+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	for deadline := time.Now().Add(5 * time.Second); ; {
		err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return nil, fmt.Errorf("locking %s: %w", lock.Name(), err)
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return nil, err
		}
	}
	if nc, err := net.Dial("unix", kc.Socket); err == nil {
		return nc, nil
	}
	// Nothing answers on the socket: a keeper that ended without removing it.
	if err := os.Remove(kc.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := kc.Start(); err != nil {
		return nil, fmt.Errorf("starting the connection keeper: %w", err)
	}
	for deadline := time.Now().Add(3 * time.Second); ; {
		nc, err := net.Dial("unix", kc.Socket)
		if err == nil {
			return nc, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the connection keeper did not answer on %s: %w", kc.Socket, err)
		}
		if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// canAsk says whether this command can ask for a password or passphrase on its terminal: a login the
// keeper's credentials cannot make is then final for the keeper and made by the command itself.
func (d *Dialer) canAsk() bool { return d.opts.Password != nil || d.opts.Passphrase != nil }

// keeperRequest asks the keeper for t as this Dialer would dial it.
func (d *Dialer) keeperRequest(t Target) keeperRequest {
	return keeperRequest{Target: absoluteKeys(t), Options: d.keeperOptions(), Persist: d.opts.Keeper.Persist}
}

// keeperOptions are the options the keeper dials with for this Dialer.
func (d *Dialer) keeperOptions() keeperDialOptions {
	o := keeperDialOptions{ClusterKnownHosts: d.opts.ClusterKnownHosts, AcceptNew: d.opts.AcceptNew,
		RecordTrusted: d.opts.RecordTrusted, Agent: d.opts.Agent, AgentSocket: d.opts.AgentSocket,
		ConnectTimeout: d.opts.ConnectTimeout, Keepalive: d.opts.Keepalive, Retries: d.opts.Retries,
		RetryDelay: d.opts.RetryDelay, AuthFinal: d.canAsk()}
	if o.ClusterKnownHosts != "" {
		o.ClusterKnownHosts, _ = filepath.Abs(expandHome(o.ClusterKnownHosts))
	}
	o.KnownHosts = []string{}
	for _, f := range d.opts.KnownHosts {
		abs, _ := filepath.Abs(expandHome(f))
		o.KnownHosts = append(o.KnownHosts, abs)
	}
	if o.Agent && o.AgentSocket == "" {
		o.AgentSocket = os.Getenv("SSH_AUTH_SOCK")
	}
	return o
}

// absoluteKeys is t with its identity files' paths (and its bastions') absolute, as this command would
// read them: the keeper runs elsewhere.
func absoluteKeys(t Target) Target {
	abs := func(files []string) []string {
		out := make([]string, len(files))
		for i, f := range files {
			out[i], _ = filepath.Abs(expandHome(f))
		}
		return out
	}
	t.IdentityFiles = abs(t.IdentityFiles)
	t.Bastions = append([]Hop(nil), t.Bastions...)
	for i := range t.Bastions {
		t.Bastions[i].IdentityFiles = abs(t.Bastions[i].IdentityFiles)
	}
	return t
}

// dialThroughKeeper reaches t through the keeper, or dials it directly when the keeper cannot serve it;
// a host this command reached itself while the keeper it started comes up is told to that keeper.
func (d *Dialer) dialThroughKeeper(ctx context.Context, t Target) (*Conn, error) {
	if c, err, ok := d.dialKept(ctx, t); ok {
		return c, err
	}
	c, err := retry(ctx, d, t, func() (*Conn, error) { return d.dialOnce(ctx, t) })
	if err == nil {
		d.opts.Keeper.remember(d.keeperRequest(t))
	}
	return c, err
}

// dialKept reaches t through the keeper; ok is false when the keeper cannot serve it (none was running: one
// is started for the next command; it failed; or the login needs a password or passphrase only this command
// can ask for): the caller dials directly.
func (d *Dialer) dialKept(ctx context.Context, t Target) (_ *Conn, _ error, ok bool) {
	kc := d.opts.Keeper
	direct := func(why string, err error) (*Conn, error, bool) {
		d.opts.Log.Debug("dialling directly", "host", t.Name, "why", why, "err", err)
		return nil, nil, false
	}
	nc, err := kc.connect()
	if err != nil {
		return direct("no connection keeper", err)
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	var ans keeperAnswer
	err = writeMessage(nc, d.keeperRequest(t))
	if err == nil {
		err = readMessage(nc, &ans)
	}
	if err != nil || ans.Err != nil {
		nc.Close()
	}
	switch {
	case ctx.Err() != nil:
		return nil, &DialError{Host: t.Name, Address: t.addr(), Err: ctx.Err()}, true
	case err != nil:
		return direct("the connection keeper failed", err)
	case ans.Err != nil && ans.Err.Auth && d.canAsk():
		return direct("the login needs what only this command can ask for", ans.Err.err())
	case ans.Err != nil:
		return nil, ans.Err.err(), true
	}
	pub, err := ssh.ParsePublicKey(ans.HostKey)
	if err != nil {
		nc.Close()
		return direct("the connection keeper's key", err)
	}
	// The keeper is trusted for its socket, in a directory only this user may enter; the key it gave on
	// that socket binds the SSH that follows to it.
	cfg := &ssh.ClientConfig{User: "keeper", HostKeyCallback: ssh.FixedHostKey(pub), Timeout: d.opts.ConnectTimeout,
		Config: ssh.Config{Ciphers: []string{ssh.CipherAES128GCM}}}
	sc, chans, reqs, err := ssh.NewClientConn(nc, "keeper", cfg)
	if err != nil {
		nc.Close()
		if ctx.Err() != nil {
			return nil, &DialError{Host: t.Name, Address: t.addr(), Err: ctx.Err()}, true
		}
		return direct("SSH with the connection keeper", err)
	}
	var why atomic.Pointer[string]
	in := make(chan *ssh.Request)
	go func() {
		defer close(in)
		for r := range reqs {
			if r.Type == keeperLost {
				msg := string(r.Payload)
				why.Store(&msg)
				continue
			}
			in <- r
		}
	}()
	client := ssh.NewClient(sc, chans, in)
	c, err := d.finish(ctx, t, client, nil, func() error {
		if m := why.Load(); m != nil {
			return errors.New(*m)
		}
		return nil
	})
	if c != nil {
		c.keptTimeout = d.opts.ConnectTimeout
		c.bulkDial = func(ctx context.Context) ([]*ssh.Client, error) {
			return c.dialBulk(ctx, d.opts.ConnectTimeout, func(ctx context.Context) ([]*ssh.Client, error) {
				return retry(ctx, d, t, func() ([]*ssh.Client, error) { return d.chain(ctx, t) })
			})
		}
	}
	return c, err, true
}

// sftpClient is the connection large transfers' SFTP session is opened on (sftpFor) when the Conn goes
// through the keeper: a direct one made on first use, since relaying bulkMin bytes or more costs the
// workstation more than a login costs the host. Called with c.mu held. Its end, unless Close ended it, is
// the Conn's.
func (c *Conn) sftpClient(ctx context.Context) (*ssh.Client, error) {
	if c.bulk == nil {
		chain, err := c.bulkDial(ctx)
		if err != nil {
			return nil, err
		}
		c.bulk = chain
		host := chain[len(chain)-1]
		go func() {
			err := host.Wait()
			select {
			case <-c.closed:
				return
			default:
			}
			if err == nil || errors.Is(err, io.EOF) {
				err = errors.New("the host closed it")
			}
			c.markLost(err)
			c.client.Close()
		}()
	}
	return c.bulk[len(c.bulk)-1], nil
}

// dialBulk makes the direct connection for files (dial) on a Conn made through the keeper, and asks the
// host meanwhile, on the kept connection, whether it still answers (a keepalive, relayed to it). A host
// that was reached and no longer answers within timeout was lost, as a connection of the command's own
// would have been in the middle of its transfer: the Conn ends, the dial is given up, and the error is a
// *LostError at once, not after the dial's tries. A refused key or login, or a dial that fails while the
// host answers, is the dial's own error.
func (c *Conn) dialBulk(ctx context.Context, timeout time.Duration, dial func(context.Context) ([]*ssh.Client, error)) ([]*ssh.Client, error) {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type dialed struct {
		chain []*ssh.Client
		err   error
	}
	dialc := make(chan dialed, 1)
	go func() {
		chain, err := dial(dctx)
		dialc <- dialed{chain, err}
	}()
	pingc := make(chan error, 1)
	go func() { pingc <- c.ping(timeout) }()
	var hk *HostKeyError
	select {
	case r := <-dialc:
		if r.err == nil || ctx.Err() != nil || errors.As(r.err, &hk) || errors.Is(r.err, ErrAuth) {
			return r.chain, r.err
		}
		if perr := <-pingc; perr != nil {
			return nil, c.lose(perr, timeout, r.err)
		}
		return nil, r.err
	case perr := <-pingc:
		if perr == nil {
			r := <-dialc
			return r.chain, r.err
		}
		cancel()
		r := <-dialc
		for i := len(r.chain) - 1; i >= 0; i-- {
			r.chain[i].Close()
		}
		return nil, c.lose(perr, timeout, r.err)
	}
}

// lose ends the Conn, its host found gone by a keepalive (perr) while an operation failed with err.
func (c *Conn) lose(perr error, timeout time.Duration, err error) error {
	if errors.Is(perr, errNoAnswer) {
		perr = fmt.Errorf("no answer to a keepalive in %s", timeout)
	}
	c.markLost(perr)
	c.client.Close()
	var le *LostError
	if errors.As(c.Lost(), &le) {
		if !errors.Is(err, context.Canceled) {
			le.Err = err
		}
		return le
	}
	return err
}
