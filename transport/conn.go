package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// Conn is one SSH connection to a host, shared by its commands and its SFTP session.
type Conn struct {
	target         Target
	client         *ssh.Client
	via            []*ssh.Client // bastion connections, closed after the host's
	become         bool
	becomePassword string
	log            *slog.Logger

	mu        sync.Mutex
	sftp      *sftp.Client
	closed    chan struct{}
	closeOnce sync.Once
	// dead is closed once the SSH connection has ended, by Close or not; lost is why, when it was not Close.
	dead    chan struct{}
	lostMu  sync.Mutex
	lost    error
	written atomic.Int64 // file content bytes written by Put

	// bulkDial, for a connection through the keeper, dials the host directly for large transfers: they
	// are not relayed (keeperdial.go, sftpconn.go). bulk is that connection once made (the bastions', then
	// the host's), bulkSFTP the SFTP client on it. keptTimeout bounds the wait for the host's answer to a
	// keepalive on the kept connection.
	bulkDial    func(context.Context) ([]*ssh.Client, error)
	bulk        []*ssh.Client
	bulkSFTP    *sftp.Client
	keptTimeout time.Duration

	recordFile string // Options.RecordFile
	recMu      sync.Mutex
	rec        map[string]recordEntry // the host's record, once read
}

// newConn is the Conn of client; why, when not nil, says why the connection ended better than its end
// does (the keeper's word on the host's connection).
func newConn(t Target, client *ssh.Client, via []*ssh.Client, log *slog.Logger, why func() error) *Conn {
	become := t.User != "root"
	if t.Become != nil {
		become = *t.Become && t.User != "root"
	}
	c := &Conn{target: t, client: client, via: via, become: become, log: log.With("host", t.Name), closed: make(chan struct{}), dead: make(chan struct{})}
	go func() {
		err := client.Wait()
		if why != nil && why() != nil {
			err = why()
		} else if err == nil || errors.Is(err, io.EOF) {
			err = errors.New("the host closed it")
		}
		c.markLost(err)
		close(c.dead)
	}()
	return c
}

// markLost records why the connection ended, unless Close ended it.
func (c *Conn) markLost(cause error) {
	c.lostMu.Lock()
	defer c.lostMu.Unlock()
	select {
	case <-c.closed:
		return
	default:
	}
	if c.lost == nil {
		c.lost = cause
	}
}

// Lost is a *LostError when the connection was lost (the host or the network ended it), nil while it is up
// or after Close: a wait on the host's progress elsewhere (its Node, through the API) can end at once.
func (c *Conn) Lost() error {
	c.lostMu.Lock()
	defer c.lostMu.Unlock()
	if c.lost == nil {
		return nil
	}
	return &LostError{Host: c.target.Name, Address: c.target.addr(), Cause: c.lost}
}

// lostWait bounds how long a failed operation waits to learn whether its connection has ended: the SSH
// connection's channels fail a moment before it reports its end.
const lostWait = 250 * time.Millisecond

// connErr makes err a *LostError when the operation failed because the connection was lost. A command
// that ran and exited, an answer of the host's sftp-server (a missing file, a refusal), a cancelled context
// and a host that was never reached are what they are.
func (c *Conn) connErr(ctx context.Context, err error) error {
	var le *LostError
	var de *DialError
	var ce *CommandError
	var se *sftp.StatusError
	if errors.As(err, &de) && errors.As(c.Lost(), &le) {
		// A session that could not be opened on a connection already lost (keepalives unanswered while it
		// was idle): the host is unreachable, as it is when the loss comes in the middle of an operation.
		le.Err = err
		return le
	}
	if err == nil || ctx.Err() != nil || errors.As(err, &le) || errors.As(err, &de) || errors.As(err, &se) ||
		errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
		errors.As(err, &ce) && (ce.ExitCode >= 0 || ce.Signal != "") {
		return err
	}
	select {
	case <-c.dead:
	case <-c.closed:
	case <-time.After(lostWait):
	}
	if errors.As(c.Lost(), &le) {
		le.Err = err
		return le
	}
	return err
}

// Name is the host's name in the inventory.
func (c *Conn) Name() string { return c.target.Name }

// Target is what the connection was made to, after ~/.ssh/config was applied.
func (c *Conn) Target() Target { return c.target }

// Close ends the connection, then its SFTP client and the bastions' connections. The connection goes
// first: on a dead link, closing the SFTP session first would wait on writes blocked in the TCP send
// buffer until the kernel gives up on the peer (about 15 minutes), keepalives notwithstanding.
func (c *Conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.closed)
		err = c.client.Close()
		c.mu.Lock()
		if c.sftp != nil {
			c.sftp.Close()
		}
		if c.bulkSFTP != nil {
			c.bulkSFTP.Close()
		}
		for i := len(c.bulk) - 1; i >= 0; i-- {
			c.bulk[i].Close()
		}
		c.mu.Unlock()
		for i := len(c.via) - 1; i >= 0; i-- {
			c.via[i].Close()
		}
	})
	return err
}

// Result is what a command printed and how it ended.
type Result struct {
	Stdout   []byte
	Stderr   []byte
	ExitCode int
	Duration time.Duration
	// FirstStdout is when the first of Stdout arrived (zero: nothing did): what a command prints first
	// happened on the host between the call and then.
	FirstStdout time.Time
}

// Run runs a shell command on the host, as root when the connection becomes root (sudo), with stdin when
// given. A command that exits non-zero returns a *CommandError with its stderr. Cancelling ctx signals the
// remote command (TERM) and closes its session.
func (c *Conn) Run(ctx context.Context, command string, stdin []byte) (res Result, err error) {
	start := time.Now()
	defer func() {
		err = c.connErr(ctx, err)
		c.logRan(ctx, command, stdin, start, res, err)
	}()
	if !c.become {
		return c.runRaw(ctx, command, stdin)
	}
	if c.becomePassword == "" {
		return c.run(ctx, command, stdin, nil, func(marked string) string {
			return "sudo -n -- sh -c " + ShellQuote(marked)
		})
	}
	g := newSudoGate(c.becomePassword)
	return c.run(ctx, command, stdin, g, func(marked string) string {
		return g.wrap(marked)
	})
}

// sudoGate lets sudo read the password only when it asks for it, and the command read its stdin only once it
// runs: sudo prompts with a random marker on stderr (the password is written then, once), and the command
// announces itself with another marker before anything else (its stdin follows). Where sudo does not prompt
// (cached credentials, a NOPASSWD rule) the password is never sent. A second prompt means the password was
// refused: stdin is closed so that sudo fails at once. Both markers are taken out of stderr.
type sudoGate struct {
	password      string
	prompt, ready []byte
	in            io.WriteCloser
	onReady       func(in io.WriteCloser)
	out           io.Writer
	pending       []byte
	passed, asked bool
	readyCh       chan struct{}
}

func newSudoGate(password string) *sudoGate {
	return &sudoGate{password: password, prompt: []byte("[clusterctl-sudo-" + runMarker() + "]"),
		ready: []byte("[clusterctl-run-" + runMarker() + "]"), readyCh: make(chan struct{})}
}

// wrap is the command line that runs command through sudo behind the gate.
func (g *sudoGate) wrap(command string) string {
	return "sudo -S -p " + ShellQuote(string(g.prompt)) + " -- sh -c " +
		ShellQuote("printf %s "+ShellQuote(string(g.ready))+" >&2; "+command)
}

// Write takes the session's stderr.
func (g *sudoGate) Write(p []byte) (int, error) {
	if g.passed {
		return g.out.Write(p)
	}
	g.pending = append(g.pending, p...)
	for {
		if i := bytes.Index(g.pending, g.prompt); i >= 0 {
			g.pending = append(g.pending[:i], g.pending[i+len(g.prompt):]...)
			if !g.asked {
				g.asked = true
				_, _ = io.WriteString(g.in, g.password+"\n")
			} else {
				g.in.Close()
			}
			continue
		}
		if i := bytes.Index(g.pending, g.ready); i >= 0 {
			rest := g.pending[i+len(g.ready):]
			g.pending = g.pending[:i]
			g.passed = true
			close(g.readyCh)
			if g.onReady != nil {
				g.onReady(g.in)
			}
			if _, err := g.out.Write(g.pending); err != nil {
				return len(p), err
			}
			g.pending = nil
			_, err := g.out.Write(rest)
			return len(p), err
		}
		return len(p), nil
	}
}

// flush writes what sudo printed when the command never started (its refusal).
func (g *sudoGate) flush() {
	if !g.passed {
		_, _ = g.out.Write(g.pending)
		g.pending = nil
	}
}

// runRaw runs a command as the login user.
func (c *Conn) runRaw(ctx context.Context, command string, stdin []byte) (Result, error) {
	return c.run(ctx, command, stdin, nil, func(marked string) string { return marked })
}

// run runs command as wrap makes it. The command carries a marker in its environment (set again inside
// sudo, which clears the environment), so that a cancelled one can be found and ended with all its children
// even where sshd does not deliver signals.
func (c *Conn) run(ctx context.Context, command string, stdin []byte, gate *sudoGate, wrap func(string) string) (Result, error) {
	start := time.Now()
	sess, err := c.client.NewSession()
	if err != nil {
		return Result{}, &DialError{Host: c.target.Name, Address: c.target.addr(), Err: fmt.Errorf("opening a session: %w", err)}
	}
	defer sess.Close()
	// Separate buffers: a buffer shared by stdout and stderr loses output to concurrent writes. Both are
	// bounded: what a host prints is read into memory, and a host is not trusted to print little.
	var stdout, stderr boundedBuffer
	sess.Stdout, sess.Stderr = &stdout, &stderr
	if gate != nil {
		in, err := sess.StdinPipe()
		if err != nil {
			return Result{}, fmt.Errorf("%s: %w", c.target.Name, err)
		}
		gate.in, gate.out, sess.Stderr = in, &stderr, gate
		gate.onReady = func(in io.WriteCloser) {
			go func() {
				_, _ = in.Write(stdin)
				in.Close()
			}()
		}
	} else if stdin != nil {
		sess.Stdin = bytes.NewReader(stdin)
	}
	marker := runMarker()
	export := "export " + runEnv + "=" + marker + "; "
	if err := sess.Start(export + wrap(export+command)); err != nil {
		return Result{}, fmt.Errorf("%s: starting %q: %w", c.target.Name, command, err)
	}
	done := make(chan error, 1)
	go func() { done <- sess.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		c.cancel(sess, marker, done)
		return Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: -1, Duration: time.Since(start)},
			fmt.Errorf("%s: %q: %w", c.target.Name, command, ctx.Err())
	case <-c.closed:
		return Result{ExitCode: -1}, &DialError{Host: c.target.Name, Address: c.target.addr(), Err: errors.New("connection closed")}
	}
	if gate != nil {
		gate.flush()
	}
	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Duration: time.Since(start), FirstStdout: stdout.first}
	if stdout.over || stderr.over {
		return res, fmt.Errorf("%s: %q: %w", c.target.Name, command, ErrOutputTooLarge)
	}
	if err == nil {
		return res, nil
	}
	ce := &CommandError{Host: c.target.Name, Command: command, ExitCode: -1, Stderr: stderr.String()}
	var exit *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case errors.As(err, &exit):
		ce.ExitCode, ce.Signal = exit.ExitStatus(), exit.Signal()
	case errors.As(err, &missing):
	case errors.Is(err, io.EOF):
		return res, &DialError{Host: c.target.Name, Address: c.target.addr(), Err: fmt.Errorf("connection lost while running %q", command)}
	default:
		return res, fmt.Errorf("%s: %q: %w", c.target.Name, command, err)
	}
	res.ExitCode = ce.ExitCode
	return res, ce
}

// MaxOutput is the most a command may print on stdout (and on stderr) before it fails: commands return
// facts, certificates and lists, never bulk data (files travel over SFTP).
const MaxOutput = 64 << 20

// ErrOutputTooLarge is the error of a command that printed more than MaxOutput.
var ErrOutputTooLarge = fmt.Errorf("the command printed more than %d MiB", MaxOutput>>20)

// boundedBuffer is a bytes.Buffer that keeps at most MaxOutput bytes; past that it drops what comes (the
// command is not left blocked on a full channel) and the run fails with ErrOutputTooLarge.
// (Not an embedded bytes.Buffer: io.Copy would use its ReadFrom and pass Write by.)
type boundedBuffer struct {
	buf   bytes.Buffer
	over  bool
	first time.Time
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if b.first.IsZero() && len(p) > 0 {
		b.first = time.Now()
	}
	if b.over || b.buf.Len()+len(p) > MaxOutput {
		b.over = true
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *boundedBuffer) Bytes() []byte  { return b.buf.Bytes() }
func (b *boundedBuffer) String() string { return b.buf.String() }

// runEnv names the environment variable that marks the processes of one command.
const runEnv = "CLUSTERCTL_RUN"

func runMarker() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// cancel ends a running command: a TERM signal through the session (sshd delivers it to the process group
// where it supports signals) and, at once, TERM to every process whose environment carries the command's
// marker (sudo and its children included), KILL to those still there a second later.
func (c *Conn) cancel(sess *ssh.Session, marker string, done <-chan error) {
	_ = sess.Signal(ssh.SIGTERM)
	kill := `find() { grep -lz "^` + runEnv + `=` + marker + `$" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3; }
pids=$(find); [ -z "$pids" ] && exit 0
kill -TERM $pids 2>/dev/null
for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.1; pids=$(find); [ -z "$pids" ] && exit 0; done
kill -KILL $pids 2>/dev/null; exit 0`
	if c.become && c.becomePassword == "" {
		kill = "sudo -n -- sh -c " + ShellQuote(kill)
	}
	if ks, err := c.client.NewSession(); err == nil {
		_ = ks.Run(kill)
		ks.Close()
	}
	sess.Close()
	select {
	case <-done: //nolint:errcheck // the command's error is its caller's; here only its end matters
	case <-time.After(5 * time.Second):
		c.log.Warn("a cancelled command did not end", "marker", marker)
	}
}

// lockedBuffer is a bytes.Buffer safe to read while another goroutine writes into it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ShellQuote quotes s for a POSIX shell: the one function every value put into a remote command goes
// through (directly, or through Cmdf and Args).
func ShellQuote(s string) string {
	unsafe := func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && !strings.ContainsRune("-_./=:,@+%", r)
	}
	if s != "" && strings.IndexFunc(s, unsafe) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Cmdf renders a command line from a template, which is code, never data: each string argument becomes
// one shell word, quoted with ShellQuote; integers and booleans are printed as they are. Any other type is
// a programming error.
func Cmdf(format string, args ...any) string {
	q := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			q[i] = ShellQuote(v)
		case int, int64, uint16, uint32, bool:
			q[i] = v
		default:
			panic(fmt.Sprintf("transport.Cmdf: argument %d is a %T", i, a))
		}
	}
	return fmt.Sprintf(format, q...)
}

// Args is words as shell words, each quoted with ShellQuote, separated by spaces.
func Args(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = ShellQuote(w)
	}
	return strings.Join(q, " ")
}

// DialContext opens a TCP connection from the host to addr, through the SSH connection (direct-tcpip), so
// that the workstation reaches what the host reaches (its API server) with no route of its own.
func (c *Conn) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return c.client.DialContext(ctx, network, addr)
}
