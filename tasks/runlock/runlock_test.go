package runlock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

func holder(id, cmd string) Holder {
	return Holder{ID: id, User: "ops", Host: "ws", PID: 42, Command: cmd, Since: time.Date(2026, 12, 3, 17, 5, 1, 0, time.UTC)}
}

func fakeLeases() Leases {
	c := fake.NewClientset().CoordinationV1().Leases(LeaseNamespace)
	return func(context.Context) (coordclient.LeaseInterface, error) { return c, nil }
}

func TestFileLock(t *testing.T) {
	dir := t.TempDir()
	a, prev, err := LockFile(dir, holder("a", "certs rotate"))
	if err != nil || prev != nil {
		t.Fatalf("first lock: %v, prev %v", err, prev)
	}
	_, _, err = LockFile(dir, holder("b", "upgrade"))
	var held *HeldError
	if !errors.As(err, &held) || held.Holder.ID != "a" || !errors.Is(err, ErrHeld) {
		t.Fatalf("second lock: %v", err)
	}
	if want := "`certs rotate` by ops@ws (pid 42) since 2026-12-03 17:05:01 UTC holds this state directory's lock"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q lacks %q", err, want)
	}
	if st, _ := os.Stat(filepath.Join(dir, FileName)); st.Mode().Perm() != 0o600 {
		t.Errorf("lock file mode %v", st.Mode())
	}
	a.Release()
	b, prev, err := LockFile(dir, holder("b", "upgrade"))
	if err != nil || prev != nil {
		t.Fatalf("after a release: %v, prev %v (a released lock names no holder)", err, prev)
	}
	// A run killed holding it: the descriptor closes without the file being emptied.
	b.Leave()
	c, prev, err := LockFile(dir, holder("c", "up"))
	if err != nil || prev == nil || prev.ID != "b" {
		t.Fatalf("after a killed run: %v, prev %v; want the killed run's holder", err, prev)
	}
	c.Release()
}

func TestLease(t *testing.T) {
	ctx := context.Background()
	leases := fakeLeases()
	now := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a, taken, err := Acquire(ctx, leases, holder("a", "certs rotate"), Options{Now: clock})
	if err != nil || taken != nil {
		t.Fatalf("a free lock: %v, taken %v", err, taken)
	}
	// Another run, 10 s later: refused, naming a.
	now = now.Add(10 * time.Second)
	_, _, err = Acquire(ctx, leases, holder("b", "upgrade"), Options{Now: clock})
	var held *HeldError
	if !errors.As(err, &held) || held.Holder.Command != "certs rotate" || held.Where != "the cluster" {
		t.Fatalf("held lock: %v", err)
	}
	if !held.Expires.Equal(now.Add(20 * time.Second)) {
		t.Errorf("expires %v, want 30 s after its renewal", held.Expires)
	}
	// a renews; b is still refused 25 s after a's start; b takes it over 31 s after a's renewal.
	if err := a.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	now = now.Add(15 * time.Second)
	if _, _, err := Acquire(ctx, leases, holder("b", "upgrade"), Options{Now: clock}); !errors.Is(err, ErrHeld) {
		t.Fatalf("a renewed lock: %v", err)
	}
	now = now.Add(16 * time.Second)
	b, taken, err := Acquire(ctx, leases, holder("b", "upgrade"), Options{Now: clock})
	if err != nil || taken == nil || taken.ID != "a" {
		t.Fatalf("an expired lock: %v, taken %v", err, taken)
	}
	if err := a.Renew(ctx); !errors.Is(err, ErrLost) {
		t.Errorf("a's renewal after b took it: %v, want ErrLost", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Errorf("a's release leaves b's Lease: %v", err)
	}
	st, err := current(t, leases)
	if err != nil || st == nil || st.Holder.ID != "b" {
		t.Fatalf("current: %v %v", st, err)
	}
	// A dead holder named by the file lock, and --force-unlock, take it at once.
	if _, taken, err := Acquire(ctx, leases, holder("c", "up"), Options{Now: clock, Dead: "b"}); err != nil || taken.ID != "b" {
		t.Fatalf("dead holder: %v %v", err, taken)
	}
	d, taken, err := Acquire(ctx, leases, holder("d", "reset"), Options{Now: clock, Force: true})
	if err != nil || taken.ID != "c" {
		t.Fatalf("forced: %v %v", err, taken)
	}
	_ = b
	if err := d.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := current(t, leases); err != nil || st != nil {
		t.Errorf("after release: %v %v", st, err)
	}
}

func TestReadHostileLease(t *testing.T) {
	ctx := context.Background()
	leases := fakeLeases()
	h := holder("x", "up\x1b[2J"+strings.Repeat("y", 300))
	if _, _, err := Acquire(ctx, leases, h, Options{}); err != nil {
		t.Fatal(err)
	}
	st, err := current(t, leases)
	if err != nil || st == nil {
		t.Fatal(err)
	}
	if c := st.Holder.Command; strings.ContainsRune(c, 0x1b) || len([]rune(c)) > 101 {
		t.Errorf("command not cleaned: %q", c)
	}
}

func current(t *testing.T, leases Leases) (*State, error) {
	c, err := leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return Current(context.Background(), c)
}
