package e2e

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// reachRE is what `probe reach` prints.
var reachRE = regexp.MustCompile(`^answered (\d+) of (\d+), longest outage (\d+)ms, last answered (true|false)$`)

// CheckRoutesComeBack checks that the bridge network's routes survive what networkd does to the interface
// that holds a node's address: the probe Pod pod on node from asks the probe Pod at ip (on node to, whose
// pod range the route goes to) over UDP every 100 ms while `networkctl reconfigure host0` runs on from
// (systemd 252 takes the address away, and the kernel every route through it), and must be answered again
// before it stops; the outage is logged. Then the route deleted by hand (nothing puts it back) is found by
// diff, naming the host, and by status's drift, and put back by up.
func CheckRoutesComeBack(t *testing.T, c *Cluster, from, pod, to, ip string) {
	t.Helper()
	podCIDR := strings.TrimSpace(c.MustK(t, "get", "node", to, "-o", "jsonpath={.spec.podCIDR}"))
	route := "ip route show " + podCIDR
	if out := c.Lab.Run(t, from, route); !strings.Contains(out, " via ") {
		t.Fatalf("%s has no route to %s's pod range %s: %q", from, to, podCIDR, out)
	}
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := c.K(t, "", "exec", pod, "--", "/probe", "reach", ip+":8080", "20s", "100ms")
		done <- result{strings.TrimSpace(out), err}
	}()
	time.Sleep(4 * time.Second)
	c.Lab.Run(t, from, "networkctl reconfigure host0")
	r := <-done
	m := reachRE.FindStringSubmatch(r.out)
	if r.err != nil || m == nil {
		t.Fatalf("probe reach from %s to %s: %q, %v", from, ip, r.out, r.err)
	}
	answered, _ := strconv.Atoi(m[1])
	sent, _ := strconv.Atoi(m[2])
	t.Logf("Pod on %s to Pod on %s across networkctl reconfigure host0 on %s: %s (outage %s ms)", from, to, from, r.out, m[3])
	if m[4] != "true" || answered < sent/2 {
		t.Errorf("the Pod on %s does not reach the Pod on %s again after networkctl reconfigure host0: %s; %s: %q",
			from, to, r.out, route, c.Lab.Run(t, from, route))
	}

	c.Lab.Run(t, from, "ip route del "+podCIDR)
	lines, code := c.Diff(t)
	if code != 1 || !slices.ContainsFunc(lines, func(l diffLine) bool {
		return l.Type == "action" && l.Host == from && strings.Contains(l.Action, "pod routes missing from the kernel")
	}) {
		t.Errorf("diff after %s's route to %s was deleted: exit %d, want 1 naming it: %+v", from, podCIDR, code, lines)
	}
	if st, _ := c.Status(t); st[len(st)-1].Drift[from] == 0 {
		t.Errorf("status after %s's route to %s was deleted: no drift on %s: %+v", from, podCIDR, from, st[len(st)-1])
	}
	if _, stderr, code := c.Run(t, "up"); code != 0 {
		t.Fatalf("up: exit %d\n%s", code, tail(stderr, 10))
	}
	if out := c.Lab.Run(t, from, route); !strings.Contains(out, " via ") {
		t.Errorf("after up, %s has no route to %s's pod range %s: %q", from, to, podCIDR, out)
	}
	if lines, code := c.Diff(t); code != 0 {
		t.Errorf("diff after up: exit %d, want 0: %+v", code, lines)
	}
}
