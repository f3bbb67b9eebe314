package e2e

import (
	"os"
	"strings"
	"testing"
	"time"
)

// NodeSettingsReconciled checks that up reconciles the inventory's labels, taints and kubelet settings: a
// cluster-wide label on every Node, a group of the workers with a label, a taint and maxPods on the workers
// alone (their kubelets restarted one at a time, the control-plane node's not); then, the group taken out of the
// inventory, its label and taint taken off and maxPods back to the kubelet's default, while a label someone
// else set stays.
func NodeSettingsReconciled(t *testing.T, c *Cluster, cp string, workers []string) {
	t.Helper()
	before, err := os.ReadFile(c.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	started := func(h string) string {
		return strings.TrimSpace(c.Lab.Run(t, h, "systemctl show -p ExecMainStartTimestampMonotonic --value kubelet"))
	}
	node := func(h, what string) string {
		return c.MustK(t, "get", "node", h, "-o", "jsonpath="+what)
	}
	// waitNode waits (the kubelet reports its capacity at its next status update) for a Node's field.
	waitNode := func(h, what, want string) {
		t.Helper()
		var got string
		for end := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
			if got = node(h, what); got == want || time.Now().After(end) {
				break
			}
		}
		if got != want {
			t.Errorf("%s: %s is %q, want %q", h, what, got, want)
		}
	}
	c.MustK(t, "label", "node", workers[0], "example.com/team=ops")
	cpStarted := started(cp)
	workerStarted := map[string]string{}
	for _, w := range workers {
		workerStarted[w] = started(w)
	}
	c.AddSettings(t, "  nodeLabels:\n    example.com/site: lab\n")
	groups := "groups:\n  - name: workers\n    roles: [worker]\n    labels: {example.com/pool: general}\n" +
		"    taints: [{key: example.com/pool, value: general, effect: PreferNoSchedule}]\n    kubelet: {maxPods: 60}\n"
	withSite, _ := os.ReadFile(c.Inventory)
	if err := os.WriteFile(c.Inventory, append(withSite, groups...), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := c.Run(t, "up", "--output", "json")
	if code != 0 {
		t.Fatalf("up with node settings: exit %d\n%s", code, stderr)
	}
	restartedInTurn(t, "up", stdout, workers)
	for _, w := range workers {
		if got := node(w, `{.metadata.labels.example\.com/site} {.metadata.labels.example\.com/pool} {.spec.taints[?(@.key=="example.com/pool")].effect}`); got != "lab general PreferNoSchedule" {
			t.Errorf("%s: site, pool, the pool's taint: %q", w, got)
		}
		waitNode(w, "{.status.capacity.pods}", "60")
		if started(w) == workerStarted[w] {
			t.Errorf("%s: its kubelet's configuration changed and it was not restarted", w)
		}
	}
	if got := node(cp, `{.metadata.labels.example\.com/site} {.metadata.labels.example\.com/pool}`); got != "lab " {
		t.Errorf("%s: site and pool labels %q, want only site", cp, got)
	}
	if started(cp) != cpStarted {
		t.Errorf("%s: its kubelet was restarted although its configuration did not change", cp)
	}
	// The group out of the inventory: what it set goes; the site label and someone else's label stay.
	if err := os.WriteFile(c.Inventory, withSite, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := c.Run(t, "up"); code != 0 {
		t.Fatalf("up without the group: exit %d\n%s", code, stderr)
	}
	for _, w := range workers {
		if got := node(w, `{.metadata.labels.example\.com/site} {.metadata.labels.example\.com/pool} {.spec.taints[?(@.key=="example.com/pool")].effect}`); got != "lab  " {
			t.Errorf("%s: site, pool, the pool's taint after the group left: %q", w, got)
		}
		waitNode(w, "{.status.capacity.pods}", "110")
	}
	if got := node(workers[0], `{.metadata.labels.example\.com/team}`); got != "ops" {
		t.Errorf("%s: a label clusterctl did not set was changed: %q", workers[0], got)
	}
	if err := os.WriteFile(c.Inventory, before, 0o644); err != nil {
		t.Fatal(err)
	}
}

// restartedInTurn checks that a command's JSON output (stdout) says each of workers' kubelets restarted
// alone, its Node and the Pods Ready on it before Ready again before the next.
func restartedInTurn(t *testing.T, command, stdout string, workers []string) {
	t.Helper()
	for _, w := range workers {
		if !strings.Contains(stdout, "kubelet of "+w+" restarted: its Node and the") {
			t.Errorf("%s does not say %s's kubelet restarted alone, its Node and Pods Ready again:\n%s", command, w, tail(stdout, 20))
		}
	}
	if len(workers) > 1 && strings.Contains(stdout, "kubelet of "+strings.Join(workers, ", ")+" restarted") {
		t.Errorf("%s restarted the workers' kubelets together", command)
	}
}
