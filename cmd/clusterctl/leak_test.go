package main

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/test/e2e"
)

// leakRounds is how many times TestNoLeaks runs its commands.
const leakRounds = 20

// TestNoLeaks runs `up` (a re-run), add-node and remove-node of a worker, leakRounds times in this process on
// one lab cluster, and compares the process's goroutines and open files, and the hosts' SSH sessions,
// after the first round and after the last: what each command opens it closes (make faults).
func TestNoLeaks(t *testing.T) {
	if os.Getenv(e2e.FaultsEnv) == "" {
		t.Skip("make faults runs it (" + e2e.FaultsEnv + "=1)")
	}
	full := e2e.NewCluster(t, 3, 1) // cp1 w1 w2
	small := full.Subset(t, "small", "cp1", "w1")
	in := func(c *e2e.Cluster, args ...string) {
		t.Helper()
		var out, errb bytes.Buffer
		start := time.Now()
		if code := run(context.Background(), append(args, "-i", c.Inventory), &out, &errb); code != 0 {
			t.Fatalf("clusterctl %s: exit %d\n%s", strings.Join(args, " "), code, lastLines(errb.String(), 30))
		}
		t.Logf("clusterctl %s: %s", strings.Join(args, " "), time.Since(start).Round(10*time.Millisecond))
	}
	in(small, "up")
	round := func() {
		t.Helper()
		in(small, "up")
		in(full, "add-node", "w2")
		in(full, "remove-node", "--yes", "w2")
	}
	round()
	g0, f0, s0 := leakCounts(t, full)
	for range leakRounds - 1 {
		round()
	}
	g1, f1, s1 := leakCounts(t, full)
	t.Logf("after round 1 and round %d: goroutines %d, %d; open files %d, %d; SSH sessions on the hosts %s, %s", leakRounds, g0, g1, f0, f1, s0, s1)
	// Growth by one per round is a leak; a few more once (a pool's connection) is not.
	if g1-g0 >= leakRounds-1 {
		t.Errorf("goroutines grew from %d to %d over %d rounds", g0, g1, leakRounds-1)
	}
	if f1-f0 >= leakRounds-1 {
		t.Errorf("open files grew from %d to %d over %d rounds", f0, f1, leakRounds-1)
	}
	if s1 != s0 {
		t.Errorf("SSH sessions on the hosts: %s after round 1, %s after round %d", s0, s1, leakRounds)
	}
}

// leakCounts are this process's goroutines and open files, once what ended has had a moment to go, and
// each host's sshd session processes (the probe's own among them, the same each time).
func leakCounts(t *testing.T, c *e2e.Cluster) (goroutines, files int, sessions string) {
	t.Helper()
	time.Sleep(2 * time.Second)
	runtime.GC()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var per []string
	for _, h := range c.Lab.Hosts {
		out, err := c.Lab.SSH("", h.Name, "pgrep -c -f '^sshd: ' || true")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(out))
		per = append(per, h.Name+"="+strconv.Itoa(n))
	}
	return runtime.NumGoroutine(), len(entries), strings.Join(per, " ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
