package transport_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/transport"
	"github.com/clusterctl/clusterctl/transport/transporttest"
)

// keeperIn starts keepers in this process on a socket of the test's, as a command starts its own, and
// returns the client a command's Dialer takes; started counts the starts.
func keeperIn(t *testing.T, idle time.Duration) (kc *transport.KeeperClient, started *int, done <-chan error) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "k.sock")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 8)
	n := 0
	t.Cleanup(cancel)
	return &transport.KeeperClient{Socket: sock, Persist: idle, Start: func() error {
		n++
		go func() { errc <- transport.ServeKeeper(ctx, transport.KeeperOptions{Socket: sock, Idle: idle}) }()
		return nil
	}}, &n, errc
}

// keptDial is a command's dial through a keeper of keeperIn's (its Dialer's keepalives off).
func keptDial(t *testing.T, target transport.Target, opts transport.Options, kc *transport.KeeperClient) *transport.Conn {
	t.Helper()
	opts.Keepalive, opts.Keeper = -1, kc
	c, err := dial(t, target, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Two commands, one after the other, reach a host through the keeper: one login between them for their
// commands, and every command, stream, exit status and file as a direct connection has them.
func TestKeeperKeepsTheConnectionBetweenCommands(t *testing.T) {
	srv, target, opts := setup(t, transporttest.Options{})
	kc, started, _ := keeperIn(t, time.Minute)
	for i := range 2 {
		o := opts
		o.Keeper = kc
		c, err := dial(t, target, o)
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		res, err := c.Run(context.Background(), "echo out; echo err >&2; cat", []byte("in\n"))
		if err != nil || string(res.Stdout) != "out\nin\n" || string(res.Stderr) != "err\n" {
			t.Errorf("command %d: stdout %q stderr %q err %v", i, res.Stdout, res.Stderr, err)
		}
		_, err = c.Run(context.Background(), "echo oops >&2; exit 3", nil)
		var ce *transport.CommandError
		if !errors.As(err, &ce) || ce.ExitCode != 3 || strings.TrimSpace(ce.Stderr) != "oops" {
			t.Errorf("command %d: a failed command: %v", i, err)
		}
		p := filepath.Join(t.TempDir(), "f")
		if _, err := c.Put(context.Background(), []transport.File{{Path: p, Data: []byte("x"), Mode: 0o640, UID: os.Getuid(), GID: os.Getgid()}}); err != nil {
			t.Errorf("command %d: Put: %v", i, err)
		} else if b, _ := os.ReadFile(p); string(b) != "x" {
			t.Errorf("command %d: the file holds %q", i, b)
		}
		c.Close()
	}
	// One login kept for both commands' commands; each command's files over a connection of its own,
	// dialled directly (files are not relayed).
	if n := srv.Connections(); n != 3 {
		t.Errorf("the host was logged into %d times, want 3: once for both commands, and once for each one's files", n)
	}
	if *started != 1 {
		t.Errorf("the keeper was started %d times, want once", *started)
	}
}

// A host key the known_hosts does not hold is refused through the keeper as it is directly: the same
// error, not retried, and the command does not dial it itself.
func TestKeeperRefusesAChangedHostKey(t *testing.T) {
	srv, target, opts := setup(t, transporttest.Options{})
	srv.WriteKnownHosts(t, opts.ClusterKnownHosts, transporttest.NewKey(t).PublicKey())
	kc, _, _ := keeperIn(t, time.Minute)
	opts.Keeper = kc
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
	kc, _, _ := keeperIn(t, time.Minute)
	c := keptDial(t, target, opts, kc)
	srv.DropConnections()
	deadline := time.Now().Add(5 * time.Second)
	for c.Lost() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var lost *transport.LostError
	if !errors.As(c.Lost(), &lost) || lost.Host != "h1" {
		t.Fatalf("the command's connection after the host's ended: %v, want a *LostError", c.Lost())
	}
	c2 := keptDial(t, target, opts, kc)
	if res, err := c2.Run(context.Background(), "echo again", nil); err != nil || string(res.Stdout) != "again\n" {
		t.Errorf("the next command: %q %v", res.Stdout, err)
	}
	if n := srv.Connections(); n != 2 {
		t.Errorf("%d connections, want 2 (the first, and one after it ended)", n)
	}
}

// A connection kept while the host dropped it unseen (no keepalives) is found dead when the next command
// asks for it, and replaced.
func TestKeeperReplacesADeadConnection(t *testing.T) {
	srv, target, opts := setup(t, transporttest.Options{})
	kc, _, _ := keeperIn(t, time.Minute)
	keptDial(t, target, opts, kc).Close()
	srv.DropConnections()
	if _, err := keptDial(t, target, opts, kc).Run(context.Background(), "true", nil); err != nil {
		t.Errorf("a command after the host dropped the kept connection: %v", err)
	}
}

// The keeper exits once it has had no command for its idle time, and removes its socket.
func TestKeeperExitsWhenIdle(t *testing.T) {
	_, target, opts := setup(t, transporttest.Options{})
	kc, _, done := keeperIn(t, time.Second)
	keptDial(t, target, opts, kc).Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the keeper did not exit after 1 s without a command")
	}
	if _, err := os.Lstat(kc.Socket); !errors.Is(err, os.ErrNotExist) {
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
