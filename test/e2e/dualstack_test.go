package e2e

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/test/lab"
)

// TestDualStack brings up a dual-stack 1+2 cluster (lab hosts with an IPv4 and an IPv6 address; podSubnet
// and serviceSubnet each a pair, the IPv4 range first) with kube-proxy in nftables mode and the bridge
// pod network, and checks what dual-stack means to a user: every Node has a pod range and an address of
// each family, a Pod gets an address of each, Pods on different nodes reach each other over both, a
// PreferDualStack Service answers on both ClusterIPs from a Pod on another node, DNS returns its A and AAAA
// records, and the API server's certificate names both Service addresses and both of the node's. Then
// `certs rotate` leaves it answering, and reset leaves no kube-proxy table of either family and no IPv6
// Service rule.
func TestDualStack(t *testing.T) {
	artDir, m := lab.Artifacts(t)
	c := newCluster(t, lab.Options{Hosts: 3, ControlPlanes: 1, IP: "dual"}, artDir, m.KubernetesVersion, "  kubeProxy:\n    mode: nftables\n")
	c.Up(t)

	t.Run("every Node has a pod range and an InternalIP of each family", func(t *testing.T) {
		out := c.MustK(t, "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.podCIDRs[*]} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}`)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) != 5 || !bothFamilies(t, f[1:3]) || !bothFamilies(t, f[3:5]) || !strings.Contains(f[2], "fd00:10:244:") {
				t.Errorf("node: %q, want its name, an IPv4 and an IPv6 pod range, an IPv4 and an IPv6 InternalIP", line)
			}
		}
	})

	c.LoadProbe(t, "cp1", "w2")
	ips := map[string][]string{}
	for _, n := range []string{"cp1", "w2"} {
		c.ProbePodOn(t, "p-"+n, n)
		ips[n] = strings.Fields(c.MustK(t, "get", "pod", "p-"+n, "-o", "jsonpath={.status.podIPs[*].ip}"))
		if !bothFamilies(t, ips[n]) {
			t.Fatalf("p-%s's addresses: %q, want one of each family", n, ips[n])
		}
	}
	t.Logf("probe Pods: %v", ips)

	t.Run("Pods on different nodes reach each other over IPv4 and IPv6, TCP and UDP", func(t *testing.T) {
		for _, p := range [][2]string{{"cp1", "w2"}, {"w2", "cp1"}} {
			for _, ip := range ips[p[1]] {
				addr := net.JoinHostPort(ip, "8080")
				if out, err := c.K(t, "", "exec", "p-"+p[0], "--", "/probe", "get", "http://"+addr); err != nil || strings.TrimSpace(out) != "p-"+p[1] {
					t.Errorf("TCP %s -> %s (%s): %q, %v", p[0], p[1], addr, out, err)
				}
				if out, err := c.K(t, "", "exec", "p-"+p[0], "--", "/probe", "udp", addr); err != nil || strings.TrimSpace(out) != "p-"+p[1] {
					t.Errorf("UDP %s -> %s (%s): %q, %v", p[0], p[1], addr, out, err)
				}
			}
		}
	})

	c.MustKApply(t, `apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  ipFamilyPolicy: PreferDualStack
  selector: {app: p-w2}
  ports: [{port: 8080, protocol: TCP}]
`)
	vips := strings.Fields(c.MustK(t, "get", "service", "web", "-o", "jsonpath={.spec.clusterIPs[*]}"))
	if !bothFamilies(t, vips) {
		t.Fatalf("the PreferDualStack Service's ClusterIPs: %q, want one of each family", vips)
	}
	serviceAnswers := func(t *testing.T) {
		t.Helper()
		for _, vip := range vips {
			url := "http://" + net.JoinHostPort(vip, "8080")
			// kube-proxy writes the Service's rules within its sync period of the endpoints.
			deadline := time.Now().Add(30 * time.Second)
			for {
				out, err := c.K(t, "", "exec", "p-cp1", "--", "/probe", "get", url, "2s")
				if err == nil && strings.TrimSpace(out) == "p-w2" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the Service at %s from p-cp1: %q, %v", url, out, err)
				}
				time.Sleep(time.Second)
			}
		}
	}
	t.Run("a PreferDualStack Service answers on both ClusterIPs from a Pod on another node", serviceAnswers)

	t.Run("DNS returns the Service's A and AAAA records", func(t *testing.T) {
		out, err := c.K(t, "", "exec", "p-cp1", "--", "/probe", "resolve", "web.default.svc.cluster.local")
		got := strings.Fields(out)
		if err != nil || len(got) != 2 || !slices.Contains(got, vips[0]) || !slices.Contains(got, vips[1]) {
			t.Errorf("resolve web.default.svc.cluster.local: %q, %v; want %q", out, err, vips)
		}
	})

	t.Run("the API server certificate names both Service addresses and both of the node's", func(t *testing.T) {
		cert := c.Presented(t, "cp1", 6443)
		var sans []string
		for _, ip := range cert.IPAddresses {
			sans = append(sans, ip.String())
		}
		addrs := strings.Fields(c.MustK(t, "get", "node", "cp1", "-o", `jsonpath={.status.addresses[?(@.type=="InternalIP")].address}`))
		for _, want := range append([]string{"10.96.0.1", "fd00:10:96::1"}, addrs...) {
			if !slices.Contains(sans, want) {
				t.Errorf("the API server's certificate names %v, not %s", sans, want)
			}
		}
	})

	t.Run("kube-proxy programs its nftables table of each family", func(t *testing.T) {
		out := c.Lab.Run(t, "w1", "nft list table ip kube-proxy | grep -c '"+vips[0]+" . tcp . 8080'; nft list table ip6 kube-proxy | grep -c '"+vips[1]+" . tcp . 8080'; true")
		if strings.Fields(out) == nil || strings.Join(strings.Fields(out), " ") != "1 1" {
			t.Errorf("the Service in kube-proxy's ip and ip6 tables on w1: %q, want \"1 1\"", out)
		}
	})

	t.Run("certs rotate leaves the Service answering on both families", func(t *testing.T) {
		if _, stderr, code := c.Run(t, "certs", "rotate", "--yes", "--fresh", "0s"); code != 0 {
			t.Fatalf("certs rotate: exit %d\n%s", code, stderr)
		}
		serviceAnswers(t)
	})

	t.Run("reset leaves no kube-proxy table and no Service rule of either family", func(t *testing.T) {
		if _, stderr, code := c.Run(t, "reset", "--yes"); code != 0 {
			t.Fatalf("reset: exit %d\n%s", code, stderr)
		}
		for _, h := range []string{"cp1", "w1", "w2"} {
			out, _ := c.Lab.SSH("", h, `nft list tables | grep -w kube-proxy; ip rule | grep 32700; ip -6 rule | grep 32700; `+
				`ip -6 route | grep fd00:10:244; ls -d /var/lib/clusterctl/pod-rules6 /sys/class/net/cni0 2>/dev/null; true`)
			if strings.TrimSpace(out) != "" {
				t.Errorf("%s after reset:\n%s", h, out)
			}
		}
	})
}

// bothFamilies reports whether list is two addresses or ranges, one IPv4 and one IPv6.
func bothFamilies(t *testing.T, list []string) bool {
	t.Helper()
	if len(list) != 2 {
		return false
	}
	v6 := 0
	for _, s := range list {
		a, err := netip.ParseAddr(strings.Split(s, "/")[0])
		if err != nil {
			return false
		}
		if a.Is6() {
			v6++
		}
	}
	return v6 == 1
}
