package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/test/lab"
)

// TestNetwork brings up one control-plane node and two workers on two subnets joined by a router (cp1 and
// w1 on one, w2 on the other; nodes reach each other only through a gateway, as in a VPC of several
// subnets). Preflight refuses the bridge network there, naming the pair; flannel's VXLAN is set up instead,
// with the NetworkPolicy controller, and Pods on every pair of nodes reach each other over TCP and UDP,
// through a Service and by its DNS name. A default-deny policy then blocks a client of a Pod started
// before it, an allow rule lets exactly that client through, and removing the policies restores traffic.
// reset leaves no flannel device, directory or CNI configuration, and no nftables table of the controller.
func TestNetwork(t *testing.T) {
	artDir, m := lab.Artifacts(t)
	c := newCluster(t, lab.Options{Hosts: 3, ControlPlanes: 1, Subnets: 2}, artDir, m.KubernetesVersion, "")

	t.Run("the bridge network is refused on routed subnets, naming the pair and flannel", func(t *testing.T) {
		_, stderr, code := c.Run(t, "up")
		if code == 0 || !strings.Contains(stderr, "not on one L2 segment") || !strings.Contains(stderr, "w2") ||
			!strings.Contains(stderr, "cni.plugin: flannel") {
			t.Fatalf("up with the bridge on two subnets: exit %d, want a preflight error naming w2 and flannel\n%s", code, tail(stderr, 30))
		}
	})

	c.AddSettings(t, "  cni:\n    plugin: flannel\n    networkPolicy: true\n")
	res := c.Up(t)
	nodes := []string{"cp1", "w1", "w2"}
	c.LoadProbe(t, nodes...)
	ips := map[string]string{}
	for _, n := range nodes {
		c.probeApp(t, "p-"+n, n)
		ips[n] = strings.TrimSpace(c.MustK(t, "get", "pod", "p-"+n, "-o", "jsonpath={.status.podIP}"))
	}
	t.Logf("up %.1fs; pods: %v", float64(res.DurationMS)/1000, ips)

	t.Run("Pods on every pair of nodes reach each other over TCP and UDP", func(t *testing.T) {
		for _, from := range nodes {
			for _, to := range nodes {
				if from == to {
					continue
				}
				addr := ips[to] + ":8080"
				if out, err := c.K(t, "", "exec", "p-"+from, "--", "/probe", "get", "http://"+addr); err != nil || strings.TrimSpace(out) != "p-"+to {
					t.Errorf("TCP %s -> %s (%s): %q, %v", from, to, addr, out, err)
				}
				if out, err := c.K(t, "", "exec", "p-"+from, "--", "/probe", "udp", addr); err != nil || strings.TrimSpace(out) != "p-"+to {
					t.Errorf("UDP %s -> %s (%s): %q, %v", from, to, addr, out, err)
				}
			}
		}
	})

	t.Run("a Service on w2 answers Pods on the other subnet, by its name", func(t *testing.T) {
		c.MustK(t, "expose", "pod", "p-w2", "--name", "web", "--port", "8080")
		deadline := time.Now().Add(60 * time.Second)
		for _, from := range []string{"cp1", "w1"} {
			for {
				out, err := c.K(t, "", "exec", "p-"+from, "--", "/probe", "get", "http://web.default.svc.cluster.local:8080")
				if err == nil && strings.TrimSpace(out) == "p-w2" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the Service from %s: %q, %v", from, out, err)
				}
				time.Sleep(2 * time.Second)
			}
		}
	})

	t.Run("NetworkPolicy: default deny, an allow rule for one client, then none", func(t *testing.T) {
		get := func(from string) bool {
			// 2 s: a connection the policy drops times out; an allowed one takes milliseconds
			out, err := c.K(t, "", "exec", "p-"+from, "--", "/probe", "get", "http://"+ips["w2"]+":8080", "2s")
			return err == nil && strings.TrimSpace(out) == "p-w2"
		}
		// until waits (up to 30 s) for the connection from each client to be as wanted, and says how long
		// the policy took to hold (a blocked client's check takes its 2 s timeout).
		until := func(what string, want map[string]bool) {
			t.Helper()
			start := time.Now()
			for {
				ok := true
				for from, allowed := range want {
					ok = ok && get(from) == allowed
				}
				if ok {
					t.Logf("%s: in force after %.1fs", what, time.Since(start).Seconds())
					return
				}
				if time.Since(start) > 30*time.Second {
					t.Fatalf("%s: not in force after 30s (want %v)", what, want)
				}
			}
		}
		until("no policy", map[string]bool{"cp1": true, "w1": true})
		c.MustKApply(t, `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-w2, namespace: default}
spec:
  podSelector: {matchLabels: {app: p-w2}}
  policyTypes: [Ingress]
`)
		until("default deny", map[string]bool{"cp1": false, "w1": false})
		c.MustKApply(t, `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-cp1, namespace: default}
spec:
  podSelector: {matchLabels: {app: p-w2}}
  policyTypes: [Ingress]
  ingress: [{from: [{podSelector: {matchLabels: {app: p-cp1}}}], ports: [{port: 8080, protocol: TCP}]}]
`)
		until("allow p-cp1", map[string]bool{"cp1": true, "w1": false})
		c.MustK(t, "delete", "networkpolicy", "deny-w2", "allow-cp1")
		until("policies removed", map[string]bool{"cp1": true, "w1": true})
	})

	t.Run("reset leaves no flannel device, directory or CNI configuration", func(t *testing.T) {
		if _, stderr, code := c.Run(t, "reset", "--yes"); code != 0 {
			t.Fatalf("reset: exit %d\n%s", code, tail(stderr, 30))
		}
		for _, h := range nodes {
			out := c.Lab.Run(t, h, "ls -d /sys/class/net/flannel.1 /sys/class/net/cni0 /run/flannel /etc/cni/net.d/* 2>/dev/null; "+
				"iptables-save 2>/dev/null | grep -c FLANNEL; true")
			if strings.TrimSpace(out) != "0" {
				t.Errorf("%s after reset:\n%s", h, out)
			}
			tables, err := exec.Command("nsenter", "--net="+c.Lab.NetNS(t, h), "nft", "list", "tables").CombinedOutput()
			if err != nil || strings.Contains(string(tables), "kube-network-policies") {
				t.Errorf("%s's nftables tables after reset: %v\n%s", h, err, tables)
			}
		}
	})
}

// probeApp runs the probe as Pod name with the label app=name on node (LoadProbe put its image there),
// and waits until it is Ready.
func (c *Cluster) probeApp(t testing.TB, name, node string) {
	t.Helper()
	if _, err := c.K(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default, labels: {app: %s}}
spec:
  nodeName: %s
  containers: [{name: probe, image: %s, imagePullPolicy: Never, args: [serve]}]
`, name, name, node, ProbeImage), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.K(t, "", "wait", "--for=condition=Ready", "pod/"+name, "--timeout=90s"); err != nil {
		t.Fatal(err)
	}
}

// MustKApply applies a manifest with kubectl and fails the test on error.
func (c *Cluster) MustKApply(t testing.TB, manifest string) {
	t.Helper()
	if _, err := c.K(t, manifest, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}
