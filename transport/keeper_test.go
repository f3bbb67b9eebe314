package transport_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/transport"
	"github.com/clusterctl/clusterctl/transport/transporttest"
)

// testKeeper starts keepers in this process on a socket of the test's, as a command starts its own.
type testKeeper struct {
	sock    string
	idle    time.Duration
	ctx     context.Context
	started atomic.Int32
	done    chan error // what each keeper's ServeKeeper returned
}

// keeperIn is a testKeeper; running starts its keeper now, as a command before the test's would have.
func keeperIn(t *testing.T, idle time.Duration, running bool) *testKeeper {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	k := &testKeeper{sock: filepath.Join(t.TempDir(), "k.sock"), idle: idle, ctx: ctx, done: make(chan error, 8)}
	if running {
		_ = k.start()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if nc, err := net.Dial("unix", k.sock); err == nil {
				nc.Close()
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("the keeper does not answer: %v", err)
			}
		}
	}
	return k
}

func (k *testKeeper) start() error {
	k.started.Add(1)
	go func() { k.done <- transport.ServeKeeper(k.ctx, transport.KeeperOptions{Socket: k.sock, Idle: k.idle}) }()
	return nil
}

// client is one command's way to the keeper; the command's end is the test's.
func (k *testKeeper) client(t *testing.T) *transport.KeeperClient {
	kc := &transport.KeeperClient{Socket: k.sock, Persist: k.idle, Start: k.start}
	t.Cleanup(kc.Close)
	return kc
}

// keptDial is a command's dial through a keeper of keeperIn's (its Dialer's keepalives off).
func keptDial(t *testing.T, target transport.Target, opts transport.Options, k *testKeeper) *transport.Conn {
	t.Helper()
	opts.Keepalive, opts.Keeper = -1, k.client(t)
	c, err := dial(t, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// With no keeper running, a command logs in itself and starts one, which logs in to the same host once the
// command has ended; the commands after it share that login for their commands and small files, and each
// has its large files over a login of its own. Every command, stream, exit status and file is as a direct
// connection has them.
func TestKeeperKeepsTheConnectionBetweenCommands(t *testing.T) {
	defer transport.SetBulkMin(64)()
	srv, target, opts := setup(t, transporttest.Options{})
	k := keeperIn(t, time.Minute, false)
	for i := range 3 {
		o := opts
		o.Keeper = k.client(t)
		c, err := dial(t, target, o)
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		res, err := c.Run(context.Background(), "echo out; echo err >&2; cat", []byte("in\n"))
		if err != nil || string(res.Stdout) != "out\nin\n" || string(res.Stderr) != "err\n" {
			t.Errorf("command %d: stdout %q stderr %q err %v", i, res.Stdout, res.Stderr, err)
		}
		// Logins so far: the first command's own; the keeper's, made when it ended; each later one's files.
		if n := srv.Connections(); n != i+1 {
			t.Errorf("command %d: %d logins when it ran its first command, want %d", i, n, i+1)
		}
		_, err = c.Run(context.Background(), "echo oops >&2; exit 3", nil)
		var ce *transport.CommandError
		if !errors.As(err, &ce) || ce.ExitCode != 3 || strings.TrimSpace(ce.Stderr) != "oops" {
			t.Errorf("command %d: a failed command: %v", i, err)
		}
		before := srv.Connections()
		for _, data := range []string{"x", strings.Repeat("large ", 11)} {
			p := filepath.Join(t.TempDir(), "f")
			if _, err := c.Put(context.Background(), []transport.File{{Path: p, Data: []byte(data), Mode: 0o640, UID: os.Getuid(), GID: os.Getgid()}}); err != nil {
				t.Errorf("command %d: Put of %d bytes: %v", i, len(data), err)
			} else if b, _ := os.ReadFile(p); string(b) != data {
				t.Errorf("command %d: the file of %d bytes holds %q", i, len(data), b)
			}
			if data == "x" && srv.Connections() != before {
				t.Errorf("command %d: a small file logged in again (%d logins, %d before)", i, srv.Connections(), before)
			}
		}
		c.Close()
		o.Keeper.Close() // the command ends
		if i == 0 {
			// The keeper logs in to the host the first command reached, for the next command.
			for deadline := time.Now().Add(5 * time.Second); srv.Connections() < 2 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if n := srv.Connections(); n != 2 {
				t.Fatalf("%d logins after the first command ended, want 2: its own, and the keeper's for the next", n)
			}
		}
	}
	if n := srv.Connections(); n != 4 {
		t.Errorf("the host was logged into %d times, want 4: by the first command, once kept for the other two, and once for each one's large file", n)
	}
	if n := k.started.Load(); n != 1 {
		t.Errorf("the keeper was started %d times, want once", n)
	}
}

// A host key the known_hosts does not hold is refused through the keeper as it is directly: the same
// error, not retried, and the command does not dial it itself.
func TestKeeperRefusesAChangedHostKey(t *testing.T) {
	srv, target, opts := setup(t, transporttest.Options{})
	srv.WriteKnownHosts(t, opts.ClusterKnownHosts, transporttest.NewKey(t).PublicKey())
	opts.Keeper = keeperIn(t, time.Minute, true).client(t)
	_, err := dial(t, target, opts)
	var hk *transport.HostKeyError
	if !errors.As(err, &hk) || hk.Host != "h1" || !strings.Contains(err.Error(), "HOST KEY MISMATCH") {
		t.Fatalf("got %v, want a host key mismatch", err)
	}
	if n := srv.Connections(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// The host's connection ends (it rebooted): the command's ends with the reason; the next command gets a
// new connection, not the dead one.
func TestKeeperAfterTheHostsConnectionEnds(t *testing.T) {
	srv, target, opts := setup(t, transporttest.Options{})
	k := keeperIn(t, time.Minute, true)
	c := keptDial(t, target, opts, k)
	srv.DropConnections()
	deadline := time.Now().Add(5 * time.Second)
	for c.Lost() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var lost *transport.LostError
	if !errors.As(c.Lost(), &lost) || lost.Host != "h1" {
		t.Fatalf("the command's connection after the host's ended: %v, want a *LostError", c.Lost())
	}
	c2 := keptDial(t, target, opts, k)
	if res, err := c2.Run(context.Background(), "echo again", nil); err != nil || string(res.Stdout) != "again\n" {
		t.Errorf("the next command: %q %v", res.Stdout, err)
	}
	if n := srv.Connections(); n != 2 {
		t.Errorf("%d connections, want 2 (the first, and one after it ended)", n)
	}
}

// The host's link is cut after the command reached it through the keeper and before its first file: the
// SFTP session a small file takes on the kept connection gets no answer, nor can the direct connection a
// large file takes be made; the host, which no longer answers a keepalive on the kept connection either,
// is reported lost (unreachable), as it is when the cut comes in the middle of a transfer.
func TestKeeperHostCutBeforeItsFiles(t *testing.T) {
	defer transport.SetBulkMin(64)()
	for _, size := range []int{1, 64} {
		t.Run(fmt.Sprintf("%d bytes", size), func(t *testing.T) {
			srv, target, opts := setup(t, transporttest.Options{})
			k := keeperIn(t, time.Minute, true)
			opts.ConnectTimeout, opts.Retries = 300*time.Millisecond, 1
			c := keptDial(t, target, opts, k)
			srv.Cut()
			_, err := c.Put(context.Background(), []transport.File{{Path: filepath.Join(t.TempDir(), "f"), Data: make([]byte, size), Mode: 0o600, UID: os.Getuid(), GID: os.Getgid()}})
			var lost *transport.LostError
			if !errors.As(err, &lost) || lost.Host != "h1" || !strings.Contains(err.Error(), "h1: unreachable") {
				t.Fatalf("Put after the host's link was cut: %v, want h1 unreachable (a *LostError)", err)
			}
			if c.Lost() == nil {
				t.Errorf("the connection is not recorded lost")
			}
		})
	}
}

// A connection kept while the host dropped it unseen (no keepalives) is found dead when the next command
// asks for it, and replaced.
func TestKeeperReplacesADeadConnection(t *testing.T) {
	srv, target, opts := setup(t, transporttest.Options{})
	k := keeperIn(t, time.Minute, true)
	keptDial(t, target, opts, k).Close()
	srv.DropConnections()
	if _, err := keptDial(t, target, opts, k).Run(context.Background(), "true", nil); err != nil {
		t.Errorf("a command after the host dropped the kept connection: %v", err)
	}
}

// The keeper a command started stays while that command runs, however long, and exits once it has had no
// command for its idle time after that, removing its socket.
func TestKeeperExitsWhenIdle(t *testing.T) {
	_, target, opts := setup(t, transporttest.Options{})
	k := keeperIn(t, time.Second, false)
	opts.Keeper = k.client(t)
	c, err := dial(t, target, opts) // no keeper: this command starts one
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case err := <-k.done:
		t.Fatalf("the keeper exited while the command that started it ran: %v", err)
	case <-time.After(2500 * time.Millisecond):
	}
	opts.Keeper.Close() // the command ends
	select {
	case err := <-k.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the keeper did not exit after 1 s without a command")
	}
	if _, err := os.Lstat(k.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("its socket is left: %v", err)
	}
}

// A keeper that cannot be started leaves the command to dial the host itself.
func TestNoKeeperDialsDirectly(t *testing.T) {
	srv, target, opts := setup(t, transporttest.Options{})
	opts.Keeper = &transport.KeeperClient{Socket: filepath.Join(t.TempDir(), "k.sock"), Persist: time.Minute,
		Start: func() error { return errors.New("no keeper here") }}
	c, err := dial(t, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(context.Background(), "true", nil); err != nil || srv.Connections() != 1 {
		t.Errorf("direct: %v, %d connections", err, srv.Connections())
	}
}

// The keeper's socket is in a directory of this user's alone, or nowhere.
func TestKeeperSocketDirectory(t *testing.T) {
	rt := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", rt)
	sock, err := transport.KeeperSocket("/state/a", "/bin/clusterctl")
	if err != nil || filepath.Dir(sock) != filepath.Join(rt, "clusterctl") {
		t.Fatalf("got %q %v", sock, err)
	}
	if fi, _ := os.Stat(filepath.Dir(sock)); fi.Mode().Perm() != 0o700 {
		t.Errorf("its directory has mode %v", fi.Mode().Perm())
	}
	other, _ := transport.KeeperSocket("/state/b", "/bin/clusterctl")
	if other == sock {
		t.Error("two state directories share a keeper")
	}
	if err := os.Chmod(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := transport.KeeperSocket("/state/a", "/bin/clusterctl"); err == nil || !strings.Contains(err.Error(), "0700") {
		t.Errorf("a directory others may enter: %v", err)
	}
}

// The keeper exits when the state directory it serves is removed (a throwaway cluster's, a test's).
func TestKeeperExitsWithItsStateDirectory(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "k.sock")
	done := make(chan error, 1)
	go func() {
		done <- transport.ServeKeeper(context.Background(), transport.KeeperOptions{Socket: sock, Idle: time.Hour, Watch: state})
	}()
	time.Sleep(100 * time.Millisecond)
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the keeper did not exit once its state directory was gone")
	}
}
