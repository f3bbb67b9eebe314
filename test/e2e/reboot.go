package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// PowerCycle cuts every host's power at once and switches them on again, as a power cut does, with no
// clusterctl run after: a marker object written before is read after (etcd kept its data), every Node is
// Ready again, the workload's Pods run again on the workers, and no host has a bootstrap kubeconfig again.
// It logs how long from power-on to every Node Ready.
func PowerCycle(t *testing.T, c *Cluster, hosts []string) {
	t.Helper()
	c.MustK(t, "create", "configmap", "before-the-power-cut", "--from-literal=k=v")
	workers := hosts[1:]
	c.LoadProbe(t, workers...)
	c.MustKApply(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: survives, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: survives}}
  template:
    metadata: {labels: {app: survives}}
    spec:
      containers: [{name: probe, image: `+ProbeImage+`, imagePullPolicy: Never, args: [serve]}]
`)
	c.MustK(t, "rollout", "status", "deployment/survives", "--timeout=120s")
	ids := c.Lab.BootIDs(t, hosts...)
	for _, h := range hosts {
		c.Lab.Kill(t, h)
	}
	on := time.Now()
	c.Lab.Start(t, ids, hosts...)
	t.Logf("every host answers SSH %s after power-on", time.Since(on).Round(100*time.Millisecond))
	// Ready may be the status from before the cut: each Node must be Ready by a status its kubelet posted
	// from the host's new boot (the boot ID it reports).
	boots := c.Lab.BootIDs(t, hosts...)
	var want []string
	for _, h := range hosts {
		want = append(want, h+" "+boots[h]+" True")
	}
	slices.Sort(want)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		out, err := c.K(t, "", "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.nodeInfo.bootID} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		got := strings.Split(strings.TrimSpace(out), "\n")
		slices.Sort(got)
		if err == nil && slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes not all Ready from their new boot 5 min after power-on: %q (%v), want %q", got, err, want)
		}
		time.Sleep(time.Second)
	}
	t.Logf("every Node Ready %s after power-on", time.Since(on).Round(100*time.Millisecond))
	if out := c.MustK(t, "get", "configmap", "before-the-power-cut", "-o", "jsonpath={.data.k}"); out != "v" {
		t.Errorf("the marker written before the cut: %q", out)
	}
	c.MustK(t, "rollout", "status", "deployment/survives", "--timeout=180s")
	t.Logf("the workload's Pods Ready %s after power-on", time.Since(on).Round(100*time.Millisecond))
	for _, h := range hosts {
		if out := c.Lab.Run(t, h, "ls /etc/kubernetes/bootstrap-kubelet.conf 2>/dev/null; true"); strings.TrimSpace(out) != "" {
			t.Errorf("%s has its bootstrap kubeconfig again", h)
		}
	}
}

// readyNodes are the cluster's Nodes with their readiness, as up reports them.
func readyNodes(t testing.TB, c *Cluster) []NodeResult {
	t.Helper()
	var nodes []NodeResult
	out := c.MustK(t, "get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}")
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		name, ready, _ := strings.Cut(l, " ")
		nodes = append(nodes, NodeResult{Name: name, Ready: ready == "True"})
	}
	return nodes
}
