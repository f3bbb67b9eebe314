package e2e

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The pod network's checks, made on a cluster with probe Pods named p-NODE (ProbePodOn) on the nodes
// given: TestGrowAndShrink runs them on flannel across two subnets with the NetworkPolicy controller.

// ProbePods runs a probe Pod p-NODE on each node (LoadProbe put its image there) and returns their
// addresses by node.
func ProbePods(t testing.TB, c *Cluster, nodes ...string) map[string]string {
	t.Helper()
	ips := map[string]string{}
	for _, n := range nodes {
		c.ProbePodOn(t, "p-"+n, n)
		ips[n] = strings.TrimSpace(c.MustK(t, "get", "pod", "p-"+n, "-o", "jsonpath={.status.podIP}"))
	}
	t.Logf("probe Pods: %v", ips)
	return ips
}

// CheckPodPairs checks that the probe Pod on every node reaches the one on every other over TCP and UDP.
func CheckPodPairs(t *testing.T, c *Cluster, ips map[string]string) {
	t.Helper()
	for from := range ips {
		for to, ip := range ips {
			if from == to {
				continue
			}
			addr := net.JoinHostPort(ip, "8080")
			if out, err := c.K(t, "", "exec", "p-"+from, "--", "/probe", "get", "http://"+addr); err != nil || strings.TrimSpace(out) != "p-"+to {
				t.Errorf("TCP %s -> %s (%s): %q, %v", from, to, addr, out, err)
			}
			if out, err := c.K(t, "", "exec", "p-"+from, "--", "/probe", "udp", addr); err != nil || strings.TrimSpace(out) != "p-"+to {
				t.Errorf("UDP %s -> %s (%s): %q, %v", from, to, addr, out, err)
			}
		}
	}
}

// CheckServiceByName exposes the probe Pod on node as the Service web and checks that the probe Pods on
// the nodes from reach it by its DNS name (within 60 s: the endpoints and DNS records take seconds).
func CheckServiceByName(t *testing.T, c *Cluster, node string, from ...string) {
	t.Helper()
	c.MustK(t, "expose", "pod", "p-"+node, "--name", "web", "--port", "8080")
	deadline := time.Now().Add(60 * time.Second)
	for _, f := range from {
		for {
			out, err := c.K(t, "", "exec", "p-"+f, "--", "/probe", "get", "http://web.default.svc.cluster.local:8080")
			if err == nil && strings.TrimSpace(out) == "p-"+node {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Service from %s: %q, %v", f, out, err)
			}
			time.Sleep(2 * time.Second)
		}
	}
}

// CheckNetworkPolicy puts the probe Pod on target (at ip) under a default-deny ingress policy, then allows
// the probe Pod on allowed alone (other stays blocked), then removes both policies; each step must be in
// force within 30 s, on Pods started before the policies.
func CheckNetworkPolicy(t *testing.T, c *Cluster, target, ip, allowed, other string) {
	t.Helper()
	get := func(from string) bool {
		// 2 s: a connection the policy drops times out; an allowed one takes milliseconds
		out, err := c.K(t, "", "exec", "p-"+from, "--", "/probe", "get", "http://"+net.JoinHostPort(ip, "8080"), "2s")
		return err == nil && strings.TrimSpace(out) == "p-"+target
	}
	// until waits (up to 30 s) for the connection from each client to be as wanted, and says how long the
	// policy took to hold (a blocked client's check takes its 2 s timeout).
	until := func(what string, want map[string]bool) {
		t.Helper()
		start := time.Now()
		for {
			ok := true
			for from, allow := range want {
				ok = ok && get(from) == allow
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
	until("no policy", map[string]bool{allowed: true, other: true})
	c.MustKApply(t, fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-%[1]s, namespace: default}
spec:
  podSelector: {matchLabels: {app: p-%[1]s}}
  policyTypes: [Ingress]
`, target))
	until("default deny", map[string]bool{allowed: false, other: false})
	c.MustKApply(t, fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-%[2]s, namespace: default}
spec:
  podSelector: {matchLabels: {app: p-%[1]s}}
  policyTypes: [Ingress]
  ingress: [{from: [{podSelector: {matchLabels: {app: p-%[2]s}}}], ports: [{port: 8080, protocol: TCP}]}]
`, target, allowed))
	until("allow p-"+allowed, map[string]bool{allowed: true, other: false})
	c.MustK(t, "delete", "networkpolicy", "deny-"+target, "allow-"+allowed)
	until("policies removed", map[string]bool{allowed: true, other: true})
}

// CheckNoNetworkLeft checks that hosts keep nothing of flannel's or the policy controller's: no flannel.1
// or cni0 device, no /run/flannel, no CNI configuration, no FLANNEL chain, no kube-network-policies
// nftables table (read with the machine's nft in the host's network namespace).
func CheckNoNetworkLeft(t *testing.T, c *Cluster, hosts ...string) {
	t.Helper()
	for _, h := range hosts {
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
}

// MustKApply applies a manifest with kubectl and fails the test on error.
func (c *Cluster) MustKApply(t testing.TB, manifest string) {
	t.Helper()
	if _, err := c.K(t, manifest, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}
