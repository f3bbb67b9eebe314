package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// OtherWorkstation is a copy of the cluster's state directory as another workstation (or CI job) holds it:
// everything but this workstation's lock file. It returns the --state-dir arguments that use it.
func (c *Cluster) OtherWorkstation(t testing.TB) []string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	if out, err := exec.Command("cp", "-a", c.StateDir, dir).CombinedOutput(); err != nil {
		t.Fatalf("copying the state directory: %v\n%s", err, out)
	}
	if err := os.Remove(filepath.Join(dir, "run.lock")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return []string{"--state-dir", dir}
}

// WaitLease waits until the cluster's lock Lease names a holder and returns its holder annotation.
func (c *Cluster) WaitLease(t testing.TB, timeout time.Duration) string {
	t.Helper()
	for end := time.Now().Add(timeout); ; {
		out, err := c.K(t, "", "-n", "kube-system", "get", "lease", "clusterctl-run", "-o", `jsonpath={.metadata.annotations.clusterctl\.dev/holder}`)
		if err == nil && out != "" {
			return out
		}
		if time.Now().After(end) {
			t.Fatalf("no clusterctl-run Lease after %s: %v", timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Background starts a clusterctl command (the inventory added); wait returns its stderr and exit code. The
// test waits for it when it ends (a failed check does not leave it running into the next test).
func (c *Cluster) Background(t testing.TB, args ...string) (wait func() (string, int)) {
	t.Helper()
	cmd := exec.Command(c.Bin, append(args, "-i", c.Inventory)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	code := 0
	wait = func() (string, int) {
		once.Do(func() {
			err := cmd.Wait()
			var ee *exec.ExitError
			switch {
			case errors.As(err, &ee):
				code = ee.ExitCode()
			case err != nil:
				stderr.WriteString(err.Error())
				code = -1
			}
		})
		return stderr.String(), code
	}
	t.Cleanup(func() { wait() })
	return wait
}

// CheckHeld checks, while a run holds the lock, that a second run of the same command from this state
// directory and an up from another workstation's both exit 1 at once, naming the holder.
func CheckHeld(t *testing.T, c *Cluster, other []string, holder string, args ...string) {
	t.Helper()
	c.WaitLease(t, time.Minute)
	for _, run := range []struct {
		args  []string
		where string
	}{
		{args, "holds this state directory's lock"},
		{append([]string{"up"}, other...), "holds the cluster's lock"},
	} {
		start := time.Now()
		_, stderr, code := c.Run(t, run.args...)
		took := time.Since(start)
		if code != 1 || !strings.Contains(stderr, run.where) || !strings.Contains(stderr, "`"+holder+"` by ") {
			t.Errorf("clusterctl %s while `%s` runs: exit %d, want 1 naming it (%q)\n%s", strings.Join(run.args, " "), holder, code, run.where, tail(stderr, 10))
		}
		t.Logf("clusterctl %s refused in %s: %s", strings.Join(run.args, " "), took.Round(time.Millisecond), strings.TrimSpace(tail(stderr, 1)))
	}
	// status takes no lock, and names the run that holds it.
	lines, _ := c.Status(t)
	if !slices.ContainsFunc(lines, func(l statusLine) bool { return l.Type == "lock" && l.Holder.Command == holder }) {
		t.Errorf("status while `%s` runs names no lock held by it", holder)
	}
}

// statusLine is one line of `clusterctl status -o json`.
type statusLine struct {
	Type  string
	Name  string
	Ready bool
	// Status is the report's ("ok", "failed") on its last line, an etcd member's status object on its.
	Status   json.RawMessage
	Healthy  bool
	Problems []string
	Holder   struct{ Command string }
	Drift    map[string]int // the report's: what up would change, by host
}

// Status runs `clusterctl status -o json` and returns its lines and exit code; every line must be a JSON
// object with a type, the last the report's.
func (c *Cluster) Status(t testing.TB, args ...string) ([]statusLine, int) {
	t.Helper()
	start := time.Now()
	stdout, stderr, code := c.Run(t, append([]string{"status", "-o", "json"}, args...)...)
	took := time.Since(start)
	var lines []statusLine
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var sl statusLine
		if err := json.Unmarshal([]byte(l), &sl); err != nil || sl.Type == "" {
			t.Fatalf("status: not a typed JSON line (%v): %s\n%s", err, l, tail(stderr, 10))
		}
		lines = append(lines, sl)
	}
	if last := lines[len(lines)-1]; last.Type != "cluster_status" {
		t.Fatalf("status: the last line is %q, not the report's", last.Type)
	}
	t.Logf("status: exit %d in %s", code, took.Round(time.Millisecond))
	return lines, code
}

// CheckStatus checks that status reports every Node Ready and the cluster healthy (exit 0).
func CheckStatus(t *testing.T, c *Cluster, nodes ...string) {
	lines, code := c.Status(t)
	last := lines[len(lines)-1]
	if code != 0 || !last.Healthy || string(last.Status) != `"ok"` {
		t.Errorf("status: exit %d, %+v", code, last)
	}
	for _, n := range nodes {
		if !slices.ContainsFunc(lines, func(l statusLine) bool { return l.Type == "node" && l.Name == n && l.Ready }) {
			t.Errorf("status does not report Node %s Ready", n)
		}
	}
}

// CheckTakeover kills an up once it holds the lock, then from another workstation: an up refused while
// the dead run's Lease holds, taken over once it expires (a no-op up, which takes no free Lease, takes
// over a held one). (up reads the Lease beside its preflight, render and settled check, and takes it
// before its first step that changes something: --full skips the settled check, and the hooks come next.)
func CheckTakeover(t *testing.T, c *Cluster) {
	c.RunKilled(t, "hooks-before", 0, "up", "--full")
	killed := time.Now()
	other := c.OtherWorkstation(t)
	_, stderr, code := c.Run(t, append([]string{"up"}, other...)...)
	if code != 1 || !strings.Contains(stderr, "holds the cluster's lock") || !strings.Contains(stderr, "its lock expires at") {
		t.Fatalf("up from another workstation after a killed up: exit %d, want 1 naming the killed run and when its lock expires\n%s", code, tail(stderr, 10))
	}
	for {
		stdout, stderr, code := c.Run(t, append([]string{"up", "--output", "json"}, other...)...)
		if code == 0 {
			if !strings.Contains(stdout, "had expired; taken over") {
				t.Errorf("the takeover is not said:\n%s", tail(stdout, 10))
			}
			t.Logf("the killed run's lock taken over from another workstation %s after the kill", time.Since(killed).Round(100*time.Millisecond))
			break
		}
		if code != 1 || !strings.Contains(stderr, "holds the cluster's lock") || time.Since(killed) > 75*time.Second {
			t.Fatalf("up from another workstation %s after a killed up: exit %d\n%s", time.Since(killed).Round(time.Second), code, tail(stderr, 10))
		}
		time.Sleep(3 * time.Second)
	}
	if _, stderr, code := c.Run(t, "up"); code != 0 {
		t.Fatalf("up after the takeover: exit %d\n%s", code, tail(stderr, 10))
	}
}

// diffLine is one line of `clusterctl diff -o json`.
type diffLine struct {
	Type, Host, Path, Diff, Action string
	Differs                        bool
}

// Diff runs `clusterctl diff -o json` and returns its lines and exit code.
func (c *Cluster) Diff(t testing.TB) ([]diffLine, int) {
	t.Helper()
	start := time.Now()
	stdout, stderr, code := c.Run(t, "diff", "-o", "json")
	t.Logf("diff: exit %d in %s", code, time.Since(start).Round(time.Millisecond))
	var lines []diffLine
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var dl diffLine
		if err := json.Unmarshal([]byte(l), &dl); err != nil || dl.Type == "" {
			t.Fatalf("diff: not a typed JSON line (%v): %s\n%s", err, l, tail(stderr, 10))
		}
		lines = append(lines, dl)
	}
	return lines, code
}

// CheckDiff checks that diff finds nothing on a settled cluster, names the host and file a hand edit
// changed (with its diff), and nothing again once up has put it back.
func CheckDiff(t *testing.T, c *Cluster, host string) {
	if lines, code := c.Diff(t); code != 0 {
		t.Fatalf("diff on a settled cluster: exit %d, want 0: %+v", code, lines)
	}
	const cfg = "/var/lib/kubelet/config.yaml"
	c.Lab.Run(t, host, "echo '# edited by hand' >>"+cfg)
	lines, code := c.Diff(t)
	if code != 1 || !slices.ContainsFunc(lines, func(l diffLine) bool {
		return l.Type == "file" && l.Host == host && l.Path == cfg && strings.Contains(l.Diff, "-# edited by hand")
	}) {
		t.Errorf("diff after %s's %s was edited: exit %d, want 1 naming it with its diff: %+v", host, cfg, code, lines)
	}
	if _, stderr, code := c.Run(t, "up"); code != 0 {
		t.Fatalf("up: exit %d\n%s", code, tail(stderr, 10))
	}
	if lines, code := c.Diff(t); code != 0 {
		t.Errorf("diff after up: exit %d, want 0: %+v", code, lines)
	}
}
