// Package transporttest is an in-process SSH server for the edge cases of the transport package that a real
// sshd cannot be made to produce on demand: a connection dropped mid-upload, a handshake that never
// finishes, a changed host key. Commands run on this machine with sh; SFTP serves this machine's files.
package transporttest

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// Options shape the server's behaviour.
type Options struct {
	// HostKey is the server's key; a fresh ed25519 key when nil.
	HostKey ssh.Signer
	// OtherHostKeys are further keys of other types, as a real host has (RSA, ECDSA and ED25519).
	OtherHostKeys []ssh.Signer
	// AuthorizedKeys are the client keys accepted; nil accepts none (every login fails).
	AuthorizedKeys []ssh.PublicKey
	// Password, when set, is accepted for any user.
	Password string
	// Stall makes the server accept TCP connections and never answer (handshake timeouts).
	Stall bool
	// DropSFTPAfter closes the whole connection once an SFTP session has received that many bytes: the
	// sftp subsystem's, or the stdin of a command (sftp-server run by the client, where the machine has one).
	DropSFTPAfter int64
}

// Server is a running in-process SSH server.
type Server struct {
	Addr    string
	HostKey ssh.Signer

	opts     Options
	ln       net.Listener
	conns    atomic.Int64 // TCP connections accepted
	signals  chan string
	wg       sync.WaitGroup
	mu       sync.Mutex
	netConns []net.Conn
	cut      chan struct{} // closed by Cut
	cutOnce  sync.Once
}

// NewServer starts a server on 127.0.0.1 and stops it when the test ends.
func NewServer(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.HostKey == nil {
		opts.HostKey = NewKey(t)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), HostKey: opts.HostKey, opts: opts, ln: ln, signals: make(chan string, 16), cut: make(chan struct{})}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.Close)
	return s
}

// NewKey makes an ed25519 signer.
// NewKeyOf makes a host key of another type: "ecdsa" (P-256) or "rsa" (2048 bits).
func NewKeyOf(t testing.TB, keyType string) ssh.Signer {
	t.Helper()
	var priv any
	var err error
	switch keyType {
	case "ecdsa":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "rsa":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		return NewKey(t)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func NewKey(t testing.TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Connections is how many TCP connections the server has accepted.
func (s *Server) Connections() int { return int(s.conns.Load()) }

// Signals delivers the signals clients sent to running commands.
func (s *Server) Signals() <-chan string { return s.signals }

// DropConnections drops every connection and keeps listening: a host that rebooted.
func (s *Server) DropConnections() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.netConns {
		c.Close()
	}
	s.netConns = nil
}

// Cut makes the server a host whose link was cut: what it is sent on its connections goes unanswered,
// nothing more is written to them, and new connections are accepted and never answered (the timeouts of a
// dial to a host that is gone). Close ends it.
func (s *Server) Cut() { s.cutOnce.Do(func() { close(s.cut) }) }

// Close stops the server and drops every connection.
func (s *Server) Close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.netConns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) serve() {
	defer s.wg.Done()
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			for _, k := range s.opts.AuthorizedKeys {
				if string(k.Marshal()) == string(key.Marshal()) {
					return &ssh.Permissions{}, nil
				}
			}
			return nil, errors.New("key not authorized")
		},
	}
	if s.opts.Password != "" {
		cfg.PasswordCallback = func(_ ssh.ConnMetadata, pw []byte) (*ssh.Permissions, error) {
			if string(pw) == s.opts.Password {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("wrong password")
		}
	}
	cfg.AddHostKey(s.opts.HostKey)
	for _, k := range s.opts.OtherHostKeys {
		cfg.AddHostKey(k)
	}
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		nc = &cuttable{Conn: nc, cut: s.cut, closed: make(chan struct{})}
		s.conns.Add(1)
		s.mu.Lock()
		s.netConns = append(s.netConns, nc)
		s.mu.Unlock()
		select {
		case <-s.cut:
			continue // a link cut: never answered; closed by Close
		default:
		}
		if s.opts.Stall {
			continue // never answer; closed by Close
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(nc, cfg)
		}()
	}
}

func (s *Server) handle(nc net.Conn, cfg *ssh.ServerConfig) {
	sc, chans, reqs, err := ssh.NewServerConn(nc, cfg)
	if err != nil {
		nc.Close()
		return
	}
	defer sc.Close()
	go func() {
		for r := range reqs {
			if r.WantReply {
				r.Reply(r.Type == "keepalive@openssh.com", nil)
			}
		}
	}()
	for nch := range chans {
		if nch.ChannelType() != "session" {
			nch.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		go s.session(nc, ch, creqs)
	}
}

func (s *Server) session(nc net.Conn, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	var cmd *exec.Cmd
	done := make(chan struct{})
	for req := range reqs {
		switch req.Type {
		case "exec":
			var payload struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
				req.Reply(false, nil)
				continue
			}
			req.Reply(true, nil)
			cmd = exec.Command("sh", "-c", payload.Command)
			cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			// As sshd does, the channel closes when the command exits, whether or not its stdin was read.
			stdin, err := cmd.StdinPipe()
			if err == nil {
				err = cmd.Start()
			}
			if err != nil {
				exitStatus(ch, 127)
				return
			}
			go func() {
				var in io.Reader = ch
				if s.opts.DropSFTPAfter > 0 {
					// sftp-server run as a command (where the machine has one) reads its stdin.
					in = &dropper{ReadWriteCloser: ch, left: s.opts.DropSFTPAfter, conn: nc}
				}
				_, _ = io.Copy(stdin, in)
				stdin.Close()
			}()
			go func() {
				err := cmd.Wait()
				code := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				}
				exitStatus(ch, code)
				ch.Close()
				close(done)
			}()
		case "signal":
			var payload struct{ Signal string }
			_ = ssh.Unmarshal(req.Payload, &payload)
			s.signals <- payload.Signal
			if cmd != nil && cmd.Process != nil {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // gone already: nothing to kill
			}
		case "subsystem":
			var payload struct{ Name string }
			if err := ssh.Unmarshal(req.Payload, &payload); err != nil || payload.Name != "sftp" {
				req.Reply(false, nil)
				continue
			}
			req.Reply(true, nil)
			var rw io.ReadWriteCloser = ch
			if s.opts.DropSFTPAfter > 0 {
				rw = &dropper{ReadWriteCloser: ch, left: s.opts.DropSFTPAfter, conn: nc}
			}
			srv, err := sftp.NewServer(rw)
			if err != nil {
				return
			}
			_ = srv.Serve()
			return
		default:
			if req.WantReply {
				req.Reply(req.Type == "env" || req.Type == "pty-req", nil)
			}
		}
	}
	if cmd != nil {
		<-done
	}
}

func exitStatus(ch ssh.Channel, code int) {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, uint32(code))
	_, _ = ch.SendRequest("exit-status", false, b)
}

// cuttable is a connection that goes silent once its server's link is cut: it reads what it is sent and
// never passes it on, and drops what it would write, until it is closed.
type cuttable struct {
	net.Conn
	cut       <-chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *cuttable) Read(p []byte) (int, error) {
	for {
		select {
		case <-c.cut:
			<-c.closed
			return 0, net.ErrClosed
		default:
		}
		n, err := c.Conn.Read(p)
		select {
		case <-c.cut:
			continue // what came after the cut is lost
		default:
		}
		return n, err
	}
}

func (c *cuttable) Write(p []byte) (int, error) {
	select {
	case <-c.cut:
		return len(p), nil
	default:
	}
	return c.Conn.Write(p)
}

func (c *cuttable) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// dropper closes the network connection once it has read its budget of bytes.
type dropper struct {
	io.ReadWriteCloser
	left int64
	conn net.Conn
}

func (d *dropper) Read(p []byte) (int, error) {
	if d.left <= 0 {
		d.conn.Close()
		return 0, fmt.Errorf("connection dropped")
	}
	if int64(len(p)) > d.left {
		p = p[:d.left]
	}
	n, err := d.ReadWriteCloser.Read(p)
	d.left -= int64(n)
	return n, err
}

// WriteKnownHosts writes a known_hosts file with the server's key under its address.
func (s *Server) WriteKnownHosts(t testing.TB, path string, key ssh.PublicKey) {
	t.Helper()
	host, port, _ := net.SplitHostPort(s.Addr)
	line := fmt.Sprintf("[%s]:%s %s", host, port, ssh.MarshalAuthorizedKey(key))
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
}
