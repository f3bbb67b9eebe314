package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/test/lab"
	"github.com/clusterctl/clusterctl/transport"
)

// faultDir is where the fault tests write on the hosts.
const faultDir = "/var/lib/clusterctl-fault"

// TestFaultsDuringPush injects faults into uploads to real hosts: a full disk, sshd killed, the host's link
// cut. Each fails naming the host and what went wrong, leaves the target as it was (no partial file, no
// temporary file once the push is re-run) and a re-run after the fault is gone finishes the job.
func TestFaultsDuringPush(t *testing.T) {
	l := lab.Start(t, lab.Options{Hosts: 2, Base: true})
	ctx := context.Background()
	big := bigSource(t, 256<<20)

	t.Run("disk full", func(t *testing.T) {
		dir := faultDir + "/full"
		l.Run(t, "cp1", "mkdir -p "+dir+" && mount -t tmpfs -o size=8m tmpfs "+dir+" && head -c 6M /dev/zero >"+dir+"/filler")
		t.Cleanup(func() { _, _ = l.SSH("", "cp1", "umount "+dir) })
		e := env(t, l, nil)
		c := connect(t, e, "cp1")
		small := transport.File{Path: dir + "/small", Data: []byte("v1\n")}
		if _, err := c.Put(ctx, []transport.File{small}); err != nil {
			t.Fatal(err)
		}
		four := transport.File{Path: dir + "/four", Data: []byte(strings.Repeat("4", 4<<20))}
		small.Data = []byte("v2\n")
		_, err := c.Put(ctx, []transport.File{small, four})
		t.Logf("push onto a full disk: %v", err)
		if !errors.Is(err, transport.ErrNoSpace) || !strings.HasPrefix(err.Error(), "cp1: ") || !strings.Contains(err.Error(), four.Path) {
			t.Fatalf("push onto a full disk: %v, want ErrNoSpace naming cp1 and %s", err, four.Path)
		}
		// Nothing half-written: the small file is one version or the other, whole; no trace of the big one.
		if out := l.Run(t, "cp1", "cd "+dir+" && ls -A && cat small"); out != "filler\nsmall\nv1\n" && out != "filler\nsmall\nv2\n" {
			t.Errorf("after the failed push: %q", out)
		}
		l.Run(t, "cp1", "rm "+dir+"/filler")
		if _, err := c.Put(ctx, []transport.File{small, four}); err != nil {
			t.Fatalf("the push again, with room: %v", err)
		}
		if out := l.Run(t, "cp1", "cd "+dir+" && ls -A && cat small && wc -c <four"); out != "four\nsmall\nv2\n4194304\n" {
			t.Errorf("after the push with room: %q", out)
		}
	})

	t.Run("sshd killed", func(t *testing.T) {
		err := pushWhile(t, l, envWith(t, l, nil, transport.Options{}), "w1", big, func() {
			// Every sshd, the listener and the connections' (systemd starts the listener again).
			_, _ = l.SSH("", "w1", "pkill -KILL -x sshd")
		})
		t.Logf("push while sshd is killed: %v", err)
		assertLost(t, err, "w1")
		waitSSH(t, l, "w1")
		assertNothingPartial(t, l, "w1", big)
		repush(t, l, envWith(t, l, nil, transport.Options{}), "w1", big)
	})

	t.Run("link cut", func(t *testing.T) {
		const keepalive = 3 * time.Second
		start := time.Now()
		err := pushWhile(t, l, envWith(t, l, nil, transport.Options{Keepalive: keepalive}), "cp1", big, func() {
			start = time.Now()
			l.Link(t, "cp1", false)
		})
		t.Logf("push while the link is cut: failed %s after the cut (keepalive every %s): %v", time.Since(start).Round(100*time.Millisecond), keepalive, err)
		assertLost(t, err, "cp1")
		if !strings.Contains(err.Error(), "no answer to keepalives") {
			t.Errorf("the cause is not the unanswered keepalives: %v", err)
		}
		l.Link(t, "cp1", true)
		waitSSH(t, l, "cp1")
		assertNothingPartial(t, l, "cp1", big)
		repush(t, l, envWith(t, l, nil, transport.Options{}), "cp1", big)
	})
}

// connect connects e to one host.
func connect(t *testing.T, e *playbooks.Env, host string) *transport.Conn {
	t.Helper()
	i := slices.IndexFunc(e.Hosts, func(h *inventory.Host) bool { return h.Name == host })
	if _, err := playbooks.Connect(context.Background(), e, e.Hosts[i:i+1], 0); err != nil {
		t.Fatal(err)
	}
	return e.Conn(host)
}

// bigSource is a local file of size bytes to push, streamed, as a large artifact is.
func bigSource(t *testing.T, size int64) transport.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	chunk := []byte(strings.Repeat("clusterctl fault test\n", 1<<14))
	for n := int64(0); n < size; n += int64(len(chunk)) {
		if _, err := io.MultiWriter(f, h).Write(chunk[:min(int64(len(chunk)), size-n)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return transport.File{Path: faultDir + "/big", Source: p, Size: size, SHA256: hex.EncodeToString(h.Sum(nil))}
}

// pushWhile pushes f to host and, once its temporary file holds a few MiB, injects the fault; it returns
// what the push returned, within a minute.
func pushWhile(t *testing.T, l *lab.Lab, e *playbooks.Env, host string, f transport.File, fault func()) error {
	t.Helper()
	c := connect(t, e, host)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Put(ctx, []transport.File{f})
		done <- err
	}()
	for i := 0; ; i++ {
		out, _ := l.SSH("", host, "find "+faultDir+" -name '.big.clusterctl-tmp-*' -size +4M | wc -l")
		if strings.TrimSpace(out) == "1" {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the push ended before the fault: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	fault()
	err := <-done
	if ctx.Err() != nil {
		t.Fatalf("the push did not end within a minute of the fault: %v", err)
	}
	return err
}

func assertLost(t *testing.T, err error, host string) {
	t.Helper()
	var lost *transport.LostError
	if !errors.As(err, &lost) || lost.Host != host || !strings.HasPrefix(err.Error(), host+": unreachable: ") {
		t.Fatalf("got %v, want %s unreachable (a *transport.LostError)", err, host)
	}
}

// waitSSH waits until the host answers SSH again.
func waitSSH(t *testing.T, l *lab.Lab, host string) {
	t.Helper()
	var err error
	for range 100 {
		if _, err = l.SSH("", host, "true"); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s does not answer SSH: %v", host, err)
}

// assertNothingPartial checks that the interrupted push left no target file (its temporary file may stay
// until the next push of it).
func assertNothingPartial(t *testing.T, l *lab.Lab, host string, f transport.File) {
	t.Helper()
	if out := l.Run(t, host, "test -e "+f.Path+" && echo present || echo absent"); out != "absent\n" {
		t.Errorf("%s: %s after the interrupted push: %s", host, f.Path, out)
	}
}

// repush pushes f again over a new connection: it is written whole and no temporary file is left.
func repush(t *testing.T, l *lab.Lab, e *playbooks.Env, host string, f transport.File) {
	t.Helper()
	if _, err := connect(t, e, host).Put(context.Background(), []transport.File{f}); err != nil {
		t.Fatalf("the push again: %v", err)
	}
	out := l.Run(t, host, "sha256sum <"+f.Path+" | cut -d' ' -f1; ls -A "+faultDir)
	if !strings.HasPrefix(out, f.SHA256+"\n") || strings.Contains(out, "clusterctl-tmp") {
		t.Errorf("%s after the push again (digest, then the directory): %q, want digest %s and no temporary file", host, out, f.SHA256)
	}
}
