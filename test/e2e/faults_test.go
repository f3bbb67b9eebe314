package e2e

import (
	"bufio"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFaults injects faults into whole commands: a worker's link cut during up's push, a worker powered off
// while add-node joins it, the workstation process killed in each stage of certs rotate and certs rotate
// --ca. Each command fails naming the host as unreachable, the rest of the cluster stays Ready, and the
// same command (or remove-node of the dead host) finishes the job. Last, the cluster is made again with
// --forks 1 and with --forks 500: the same files on every host. The quick cases, on
// uploads alone, are test/integration's TestFaultsDuringPush, in make test.
func TestFaults(t *testing.T) {
	if os.Getenv(FaultsEnv) == "" {
		t.Skip("make faults runs it (" + FaultsEnv + "=1)")
	}
	full := NewCluster(t, 4, 1) // cp1 w1 w2 w3
	three := full.Subset(t, "three", "cp1", "w1", "w2")

	t.Run("w2's link cut during up's push: up fails naming it unreachable, the re-run finishes", func(t *testing.T) {
		var cut time.Time
		stdout, stderr, code := three.RunFault(t, "push", 3*time.Second, func(*exec.Cmd) {
			three.Lab.Link(t, "w2", false)
			cut = time.Now()
		}, "up")
		t.Logf("up ended %s after the cut, exit %d", time.Since(cut).Round(100*time.Millisecond), code)
		three.Lab.Link(t, "w2", true)
		if code == 0 || !unreachable(stdout, "w2") {
			t.Fatalf("up with w2's link cut: exit %d, w2 not reported unreachable\n%s\n%s", code, tail(stdout, 15), tail(stderr, 15))
		}
		if !strings.Contains(stderr, "w2: unreachable") {
			t.Errorf("stderr does not name w2 unreachable:\n%s", tail(stderr, 15))
		}
		three.Up(t)
		assertReady(t, three, "cp1", "w1", "w2")
		if out := three.Lab.Run(t, "w2", "find / -xdev -name '*.clusterctl-tmp-*' | head -5"); out != "" {
			t.Errorf("temporary files left on w2 after the re-run:\n%s", out)
		}
	})

	t.Run("w3 powered off while add-node joins it: the failure names it, the rest is Ready, remove-node removes it", func(t *testing.T) {
		start := time.Now()
		stdout, stderr, code := full.RunFault(t, "join", 500*time.Millisecond, func(*exec.Cmd) { full.Lab.Kill(t, "w3") }, "add-node", "w3")
		t.Logf("add-node ended %s after it started, exit %d", time.Since(start).Round(100*time.Millisecond), code)
		if code == 0 || !strings.Contains(stderr, "w3: unreachable") {
			t.Fatalf("add-node of a host powered off: exit %d, w3 not named unreachable\n%s\n%s", code, tail(stdout, 10), tail(stderr, 15))
		}
		assertReady(t, three, "cp1", "w1", "w2")
		// The run failed after cp1 (in the run: the join's tokens) got its early network: it still routes
		// to the other workers' Pods.
		assertPodRoutes(t, three, "cp1", "w1", "w2")
		// The host cannot be reset: remove-node takes it out of the cluster and reports it.
		_, stderr, code = full.Run(t, "remove-node", "--yes", "w3")
		t.Logf("remove-node w3: exit %d\n%s", code, tail(stderr, 10))
		if out, _ := full.K(t, "", "get", "node", "w3", "--ignore-not-found", "-o", "name"); out != "" {
			t.Errorf("Node w3 is still there after remove-node: %q", out)
		}
		assertReady(t, three, "cp1", "w1", "w2")
	})

	t.Run("certs rotate killed in each of its stages: the same command finishes", func(t *testing.T) {
		rotate := []string{"certs", "rotate", "--yes", "--fresh", "0s"}
		three.RunKilled(t, "rotate", 5*time.Second, rotate...)
		three.RunKilled(t, "serving", 300*time.Millisecond, rotate...)
		if _, stderr, code := three.Run(t, rotate...); code != 0 {
			t.Fatalf("certs rotate after two kills: exit %d\n%s", code, tail(stderr, 30))
		}
		assertReady(t, three, "cp1", "w1", "w2")
	})

	t.Run("certs rotate --ca killed in its trust, sign and finish stages: the same command finishes", func(t *testing.T) {
		oldCA := readFile(t, filepath.Join(three.StateDir, "pki", "ca.crt"))
		rotate := []string{"certs", "rotate", "--ca", "--yes"}
		for _, stage := range []string{"ca-trust", "ca-sign", "ca-finish"} {
			three.RunKilled(t, stage, 3*time.Second, rotate...)
		}
		if _, stderr, code := three.Run(t, rotate...); code != 0 {
			t.Fatalf("certs rotate --ca after three kills: exit %d\n%s", code, tail(stderr, 30))
		}
		CheckNewCA(t, three, oldCA, "cp1", "w1", "w2")
		assertReady(t, three, "cp1", "w1", "w2")
	})

	t.Run("--forks 1 and --forks 500 make the same cluster", func(t *testing.T) {
		// Left out: the hosts' record of pushed files (modification times), and what follows from the
		// order in which the controller-manager gave the nodes their pod ranges (CNI configuration,
		// routes), which joins in parallel may change.
		prune := []string{"/var/lib/clusterctl", "/etc/cni", "/etc/systemd/system/clusterctl-pod-routes.service"}
		first := map[string]string{}
		for _, forks := range []string{"1", "500"} {
			if _, stderr, code := three.Run(t, "reset", "--yes"); code != 0 {
				t.Fatalf("reset: exit %d\n%s", code, tail(stderr, 20))
			}
			three.Up(t, "--forks", forks)
			assertReady(t, three, "cp1", "w1", "w2")
			for _, h := range []string{"cp1", "w1", "w2"} {
				files := three.Files(t, h, prune...)
				if forks == "1" {
					first[h] = files
				} else if files != first[h] {
					t.Errorf("%s: the files differ between --forks 1 and --forks 500:\n%s", h, changedLines(first[h], files))
				}
			}
		}
	})
}

// changedLines are the lines of a not in b (-) and of b not in a (+).
func changedLines(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ina, inb := in(a), in(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !inb[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ina[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// unreachable reports whether up's JSON output has host ended as unreachable in some play.
func unreachable(stdout, host string) bool {
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct{ Type, Host, Status string }
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type == "host_done" && e.Host == host && e.Status == "unreachable" {
			return true
		}
	}
	return false
}

// assertReady checks that exactly the named Nodes are there, each Ready.
func assertReady(t *testing.T, c *Cluster, nodes ...string) {
	t.Helper()
	out := c.MustK(t, "get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status} {end}")
	want := ""
	for _, n := range nodes {
		want += n + "=True "
	}
	if out != want {
		t.Errorf("nodes: %q, want %q", out, want)
	}
}

// assertPodRoutes checks that host has a route to the pod range of each of peers.
func assertPodRoutes(t *testing.T, c *Cluster, host string, peers ...string) {
	t.Helper()
	for _, p := range peers {
		cidr := c.MustK(t, "get", "node", p, "-o", "jsonpath={.spec.podCIDR}")
		if _, err := netip.ParsePrefix(cidr); err != nil {
			t.Fatalf("Node %s's pod range %q: %v", p, cidr, err)
		}
		if out := c.Lab.Run(t, host, "ip route show "+cidr); !strings.Contains(out, " via ") {
			t.Errorf("%s has no route to %s's Pods (%s): %q", host, p, cidr, out)
		}
	}
}
