package transport

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// The connection keeper: a process of clusterctl's own on the workstation that keeps each host's SSH
// connection open for a while after a command ends, so that the next command opens its sessions on it
// instead of logging in again (what OpenSSH's ControlPersist does, and Ansible turns on by default). A
// login costs a host far more than a session on an open connection: the key exchange, PAM's session with
// systemd-logind, root's user manager started again after ten seconds without one.
//
// A command reaches it on a Unix socket in a directory only its user can enter. It sends what it would
// dial (the target and the dialer's options, as JSON); the keeper dials it, or finds the connection it
// keeps for exactly that, and answers; then the two speak SSH on the same socket, the keeper passing every
// channel (sessions, SFTP, forwarded TCP) and keepalive to the host's connection and back. Host keys are
// verified by the keeper's dial, the same code and files as a command's own. The keeper exits after
// Idle without a client, when its socket is removed or replaced, and when Watch (the state directory) is
// gone.

// keeperVersion is the version of the protocol between a command and its keeper; it is part of the
// socket's name (KeeperSocket), so that a command never talks to a keeper that speaks another.
const keeperVersion = 2

// keeperMaxReached bounds the hosts a command that started the keeper tells it of.
const keeperMaxReached = 10000

// keeperLost is the global request by which the keeper tells a command why the host's connection ended,
// just before it closes theirs.
const keeperLost = "lost@clusterctl"

// keeperMaxMessage bounds the request and the answer exchanged before SSH starts.
const keeperMaxMessage = 1 << 20

// keeperSessions is how many sessions the keeper opens on one connection to a host before it opens
// another: OpenSSH's MaxSessions, 10 by default, applies to the connection, which commands now share.
const keeperSessions = 10

// KeeperOptions configure ServeKeeper.
type KeeperOptions struct {
	Socket string        // the Unix socket it listens on
	Idle   time.Duration // it exits after this long without a client (a request may set another)
	Watch  string        // a path whose removal ends it ("": none)
	Log    *slog.Logger
}

// keeper is a running ServeKeeper.
type keeper struct {
	o       KeeperOptions
	ctx     context.Context
	signer  ssh.Signer
	pubWire []byte

	mu       sync.Mutex
	dialers  map[string]*Dialer   // by their options
	kept     map[string]*keptConn // by target and options
	clients  int
	lastSeen time.Time
	idle     time.Duration
}

// keptConn is what the keeper holds for one target: its connections (another is opened when the others
// carry keeperSessions sessions each), dialled once at a time.
type keptConn struct {
	dialing chan struct{} // closed when a dial ends; nil when none runs
	conns   []*keptOne
}

type keptOne struct {
	c    *Conn
	open int // channels open on it
	max  int // sessions the host allows on it (keeperSessions, less when it refused one)
}

// ServeKeeper runs the keeper on o.Socket until it has had no client for o.Idle, the socket or o.Watch is
// removed, or ctx ends.
func ServeKeeper(ctx context.Context, o KeeperOptions) error {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return err
	}
	ln, err := net.Listen("unix", o.Socket)
	if err != nil {
		return err
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false) // a keeper started after this one may own the path by then
	defer ln.Close()
	if err := os.Chmod(o.Socket, 0o600); err != nil {
		return err
	}
	sockInfo, err := os.Lstat(o.Socket)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	k := &keeper{o: o, ctx: ctx, signer: signer, pubWire: signer.PublicKey().Marshal(), dialers: map[string]*Dialer{},
		kept: map[string]*keptConn{}, lastSeen: time.Now(), idle: o.Idle}
	defer k.closeAll()
	go k.watch(ctx, cancel, sockInfo)
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	o.Log.Info("keeping connections", "socket", o.Socket, "idle", o.Idle)
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				if os.SameFile(sockInfo, statOrNil(o.Socket)) {
					os.Remove(o.Socket)
				}
				return nil
			}
			return err
		}
		go k.serve(nc)
	}
}

func statOrNil(path string) os.FileInfo {
	fi, _ := os.Lstat(path)
	return fi
}

// watch ends the keeper when it has been idle too long, or its socket or watched path is gone.
func (k *keeper) watch(ctx context.Context, stop func(), sock os.FileInfo) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		k.mu.Lock()
		idle := k.clients == 0 && time.Since(k.lastSeen) >= k.idle
		k.mu.Unlock()
		switch fi := statOrNil(k.o.Socket); {
		case idle:
			k.o.Log.Info("exiting: no command for a while", "idle", k.idle)
		case fi == nil || !os.SameFile(fi, sock):
			k.o.Log.Info("exiting: the socket was removed or replaced")
		case k.o.Watch != "" && statOrNil(k.o.Watch) == nil:
			k.o.Log.Info("exiting: the state directory is gone", "path", k.o.Watch)
			// No command of that directory comes again: nothing of this keeper is left.
			os.Remove(k.o.Socket + ".lock")
			os.Remove(KeeperLog(k.o.Socket))
		default:
			continue
		}
		stop()
		return
	}
}

func (k *keeper) closeAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, kc := range k.kept {
		for _, one := range kc.conns {
			one.c.Close()
		}
	}
}

// serve answers one command: its request, then SSH until either end closes.
func (k *keeper) serve(nc net.Conn) {
	defer nc.Close()
	if !peerIsUs(nc) {
		k.o.Log.Warn("refused a client of another user")
		return
	}
	k.mu.Lock()
	k.clients++
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.clients--
		k.lastSeen = time.Now()
		k.mu.Unlock()
	}()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	var req keeperRequest
	if err := readMessage(nc, &req); err != nil {
		k.o.Log.Warn("a bad request", "err", err)
		return
	}
	_ = nc.SetDeadline(time.Time{})
	if req.Persist > 0 {
		k.mu.Lock()
		k.idle = req.Persist
		k.mu.Unlock()
	}
	if req.Hold {
		k.hold(nc)
		return
	}
	key := keyOf(req)
	// The client may give up while the host is dialled: the dial goes on, for the next one.
	gone := make(chan struct{})
	go func() {
		var b [1]byte
		_, _ = nc.Read(b[:]) // nothing comes before the answer; this returns when the client closes
		close(gone)
	}()
	one, err := k.get(key, req, gone)
	if err != nil {
		_ = writeMessage(nc, keeperAnswer{Err: keeperErrOf(err)})
		return
	}
	// The reader above must be done before SSH starts on the connection: a deadline in the past ends it.
	_ = nc.SetReadDeadline(time.Unix(1, 0))
	<-gone
	_ = nc.SetReadDeadline(time.Time{})
	if err := writeMessage(nc, keeperAnswer{HostKey: k.pubWire}); err != nil {
		return
	}
	k.relay(nc, key, req, one)
}

// hold serves the command that started the keeper until it ends: it tells the hosts it reached itself,
// and once it has ended they are dialled, for the next command to find their connections made.
func (k *keeper) hold(nc net.Conn) {
	reached := map[string]keeperRequest{}
	for len(reached) < keeperMaxReached {
		var r keeperRequest
		if err := readMessage(nc, &r); err != nil {
			break // the command ended
		}
		if r.Target.Name != "" && !r.Hold {
			reached[keyOf(r)] = r
		}
	}
	for key, r := range reached {
		go func() {
			if _, err := k.get(key, r, nil); err != nil {
				k.o.Log.Info("no connection made ahead of the next command", "host", r.Target.Name, "err", err)
			}
		}()
	}
}

// relay speaks SSH with the command on nc, passing its channels and keepalives to the host's connection,
// until either end closes; one's end closes the command's, with the reason.
func (k *keeper) relay(nc net.Conn, key string, req keeperRequest, one *keptOne) {
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(k.signer)
	sconn, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		k.o.Log.Warn("SSH with a command failed", "err", err)
		return
	}
	defer sconn.Close()
	go func() {
		select {
		case <-one.c.dead:
			cause := "the host closed it"
			var le *LostError
			if errors.As(one.c.Lost(), &le) && le.Cause != nil {
				cause = le.Cause.Error()
			}
			_, _, _ = sconn.SendRequest(keeperLost, false, []byte(cause))
			sconn.Close()
		case <-k.ctx.Done():
			sconn.Close()
		}
	}()
	go func() {
		for r := range reqs {
			if r.Type == "keepalive@openssh.com" {
				// Answered by the host: a command's keepalives see the host, not the keeper.
				ok, payload, err := one.c.client.SendRequest(r.Type, r.WantReply, r.Payload)
				if r.WantReply {
					_ = r.Reply(ok && err == nil, payload)
				}
				continue
			}
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
		}
	}()
	var wg sync.WaitGroup
	for ch := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.pass(key, req, ch)
		}()
	}
	wg.Wait()
}

// keyOf names what a request dials: the same target with the same options shares a connection.
func keyOf(req keeperRequest) string {
	b, _ := json.Marshal(struct {
		T Target
		O keeperDialOptions
	}{req.Target, req.Options})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// get returns a live connection for key, dialling one when there is none; the client's end (gone) stops
// its wait, not the dial.
func (k *keeper) get(key string, req keeperRequest, gone <-chan struct{}) (*keptOne, error) {
	for {
		k.mu.Lock()
		kc := k.kept[key]
		if kc == nil {
			kc = &keptConn{}
			k.kept[key] = kc
		}
		kc.prune()
		if len(kc.conns) > 0 {
			one := kc.conns[0]
			k.mu.Unlock()
			// A connection kept while the host rebooted, or went away, is found out now (a reset at once, or
			// no answer within the connect timeout), and a new one dialled, as a command's own dial would.
			if alive(one.c, req.Options.ConnectTimeout) {
				return one, nil
			}
			k.o.Log.Info("a kept connection no longer answers", "host", req.Target.Name)
			k.drop(key, one)
			continue
		}
		if kc.dialing != nil {
			wait := kc.dialing
			k.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-gone:
				return nil, errors.New("the command went away")
			}
		}
		kc.dialing = make(chan struct{})
		k.mu.Unlock()
		one, err := k.connect(key, req, 0)
		k.mu.Lock()
		close(kc.dialing)
		kc.dialing = nil
		k.mu.Unlock()
		return one, err
	}
}

// connect dials one more connection for key with open channels already counted on it, and keeps it.
func (k *keeper) connect(key string, req keeperRequest, open int) (*keptOne, error) {
	k.mu.Lock()
	d, err := k.dialer(req.Options)
	k.mu.Unlock()
	var c *Conn
	if err == nil {
		c, err = d.Dial(k.ctx, req.Target)
	}
	if err != nil {
		k.o.Log.Info("dial failed", "host", req.Target.Name, "err", err)
		return nil, err
	}
	one := &keptOne{c: c, open: open, max: keeperSessions}
	k.mu.Lock()
	kc := k.kept[key]
	if kc == nil {
		kc = &keptConn{}
		k.kept[key] = kc
	}
	kc.conns = append(kc.conns, one)
	n := len(kc.conns)
	k.mu.Unlock()
	k.o.Log.Info("connected", "host", req.Target.Name, "address", req.Target.addr(), "connections", n)
	return one, nil
}

// alive says whether c's host answers a keepalive within timeout.
func alive(c *Conn, timeout time.Duration) bool {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return c.ping(timeout) == nil
}

// drop closes one and forgets it.
func (k *keeper) drop(key string, one *keptOne) {
	one.c.Close()
	k.mu.Lock()
	defer k.mu.Unlock()
	if kc := k.kept[key]; kc != nil {
		kc.conns = slices.DeleteFunc(kc.conns, func(o *keptOne) bool { return o == one })
	}
}

// prune drops the connections that have ended. Called with the keeper's lock held.
func (kc *keptConn) prune() {
	live := kc.conns[:0]
	for _, one := range kc.conns {
		select {
		case <-one.c.dead:
			one.c.Close()
		default:
			live = append(live, one)
		}
	}
	kc.conns = live
}

// dialer is the Dialer for a set of options, made once. Called with the keeper's lock held.
func (k *keeper) dialer(o keeperDialOptions) (*Dialer, error) {
	b, _ := json.Marshal(o)
	if d, ok := k.dialers[string(b)]; ok {
		return d, nil
	}
	d, err := NewDialer(Options{ClusterKnownHosts: o.ClusterKnownHosts, KnownHosts: o.KnownHosts, AcceptNew: o.AcceptNew,
		RecordTrusted: o.RecordTrusted, Agent: o.Agent, AgentSocket: o.AgentSocket, SSHConfig: "none",
		ConnectTimeout: o.ConnectTimeout, Keepalive: o.Keepalive, Retries: o.Retries, RetryDelay: o.RetryDelay,
		authFinal: o.AuthFinal, noBecome: true, Log: k.o.Log})
	if err != nil {
		return nil, err
	}
	k.dialers[string(b)] = d
	return d, nil
}

// pass opens ch's channel on the host and copies between the two until both ends are done: data and
// stderr from the host, data from the command, the requests of each (exec, signals, exit-status).
func (k *keeper) pass(key string, req keeperRequest, ch ssh.NewChannel) {
	one, up, upReqs, err := k.open(key, req, ch)
	if err != nil {
		var oce *ssh.OpenChannelError
		if errors.As(err, &oce) {
			_ = ch.Reject(oce.Reason, oce.Message)
		} else {
			_ = ch.Reject(ssh.ConnectionFailed, err.Error())
		}
		return
	}
	defer func() {
		k.mu.Lock()
		one.open--
		k.mu.Unlock()
	}()
	down, downReqs, err := ch.Accept()
	if err != nil {
		up.Close()
		return
	}
	var data sync.WaitGroup
	data.Add(2)
	go func() {
		defer data.Done()
		_, _ = io.Copy(down, up)
	}()
	go func() {
		defer data.Done()
		_, _ = io.Copy(down.Stderr(), up.Stderr())
	}()
	// The host's end of its output (EOF) is passed on once both streams are: not while one is written.
	eof := make(chan struct{})
	go func() {
		data.Wait()
		_ = down.CloseWrite()
		close(eof)
	}()
	go func() {
		_, _ = io.Copy(up, down)
		_ = up.CloseWrite()
	}()
	go func() {
		// The command's requests (exec, subsystem, signal) go to the host; when it closes its channel, the
		// host's is closed too.
		for r := range downReqs {
			ok, err := up.SendRequest(r.Type, r.WantReply, r.Payload)
			if r.WantReply {
				_ = r.Reply(ok && err == nil, nil)
			}
		}
		up.Close()
	}()
	for r := range upReqs {
		ok, err := down.SendRequest(r.Type, r.WantReply, r.Payload)
		if r.WantReply {
			_ = r.Reply(ok && err == nil, nil)
		}
	}
	// The host closed its channel: what it sent is passed on before the command's is closed.
	<-eof
	down.Close()
}

// open opens the channel on one of key's connections with room for it, another connection when the host
// refuses it on every one (MaxSessions).
func (k *keeper) open(key string, req keeperRequest, ch ssh.NewChannel) (*keptOne, ssh.Channel, <-chan *ssh.Request, error) {
	for range 4 {
		k.mu.Lock()
		kc := k.kept[key]
		var one *keptOne
		if kc != nil {
			kc.prune()
			for _, o := range kc.conns {
				if o.open < o.max {
					one = o
					break
				}
			}
		}
		if one == nil && kc != nil && len(kc.conns) == 0 {
			k.mu.Unlock()
			return nil, nil, nil, &ssh.OpenChannelError{Reason: ssh.ConnectionFailed, Message: "the connection to the host was lost"}
		}
		if one != nil {
			one.open++
		}
		k.mu.Unlock()
		if one == nil {
			var err error
			// The others carry their most sessions: one more connection, its first channel counted.
			if one, err = k.connect(key, req, 1); err != nil {
				return nil, nil, nil, err
			}
		}
		up, upReqs, err := one.c.client.OpenChannel(ch.ChannelType(), ch.ExtraData())
		if err == nil {
			return one, up, upReqs, nil
		}
		k.mu.Lock()
		one.open--
		var oce *ssh.OpenChannelError
		refused := errors.As(err, &oce) && oce.Reason == ssh.Prohibited && ch.ChannelType() == "session" && one.open > 0
		if refused {
			one.max = one.open
		}
		k.mu.Unlock()
		if !refused {
			return nil, nil, nil, err
		}
	}
	return nil, nil, nil, &ssh.OpenChannelError{Reason: ssh.ResourceShortage, Message: "no connection to the host has room for a session"}
}
