package e2e

import (
	"net"
	"net/netip"
	"os"
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
// records, and the API server's certificate names both Service addresses and both of the node's, a
// kubelet's serving certificate both of its node's. Then `certs rotate` of those certificates gives new
// ones naming both families; an encrypted backup restores a deleted ConfigMap (etcd restore --from the
// archive) and rebuilds a state directory; and reset leaves no kube-proxy table of either family and no
// IPv6 Service rule.
//
// CLUSTERCTL_E2E_CNI=flannel runs it on flannel (its second, IPv6 VXLAN device) in place of the bridge.
func TestDualStack(t *testing.T) {
	artDir, m := lab.Artifacts(t)
	settings := "  kubeProxy:\n    mode: nftables\n"
	if cni := os.Getenv("CLUSTERCTL_E2E_CNI"); cni != "" {
		settings += "  cni:\n    plugin: " + cni + "\n"
	}
	c := newCluster(t, lab.Options{Hosts: 3, ControlPlanes: 1, IP: "dual"}, artDir, m.KubernetesVersion, settings)
	c.Up(t)
	checkStack(t, c, 2, "cp1", "w2", []string{"10.96.0.1", "fd00:10:96::1"}, "")
}

// TestIPv6Only (make test-long) brings up an IPv6-only 2+1 cluster (hosts with an IPv6 address alone,
// reached over IPv6 by SSH too) with kube-proxy in nftables mode, and makes TestDualStack's checks with one
// family: every URL with an address in brackets, etcd's and the API server's among them. Two control-plane
// nodes make etcd's peers and the node-local API proxy's backends IPv6 too: the rotation of the API
// servers' certificates, one node at a time, fails no request through the worker's proxy.
func TestIPv6Only(t *testing.T) {
	longOnly(t, "a dual-stack cluster (TestDualStack)")
	artDir, m := lab.Artifacts(t)
	c := newCluster(t, lab.Options{Hosts: 3, ControlPlanes: 2, IP: "6"}, artDir, m.KubernetesVersion, "  kubeProxy:\n    mode: nftables\n")
	res := c.Up(t)
	if !strings.HasPrefix(res.Endpoint, "https://[fdcc:") {
		t.Errorf("the API endpoint %q is not an IPv6 address in brackets", res.Endpoint)
	}
	t.Run("each API server answers at its IPv6 address, etcd's members peer over IPv6, the worker's proxy has each as a backend", func(t *testing.T) {
		for _, h := range c.Lab.Hosts[:2] {
			out, err := c.K(t, "", "--server", "https://"+net.JoinHostPort(h.Address, "6443"), "--tls-server-name", h.Address, "get", "--raw", "/readyz")
			if err != nil || out != "ok" {
				t.Errorf("the API server on %s: %q, %v", h.Name, out, err)
			}
		}
		members := c.Etcdctl(t, "cp1", "member list")
		if strings.Count(members, ", started, ") != 2 || strings.Count(members, "https://[fdcc:") != 4 {
			t.Errorf("want 2 started members, each with an IPv6 peer and client URL:\n%s", members)
		}
		out := c.Lab.Run(t, "w1", "grep '^    server cp' /etc/kubernetes/clusterctl-apiserver-proxy.cfg")
		if strings.Count(out, " [fdcc:") != 2 || strings.Count(out, "]:6443\n") != 2 {
			t.Errorf("w1's API proxy backends, want both API servers at [IPv6]:6443:\n%s", out)
		}
	})
	checkStack(t, c, 1, "cp1", "w1", []string{"fd00:10:96::1"}, "w1")
}

// checkStack makes the checks of a cluster with families IP families (2: dual-stack; 1: the hosts' one)
// and probe Pods on nodes a and b: every Node has a pod range and an InternalIP of each family, a Pod an
// address of each, Pods on a and b reach each other over each (TCP and UDP), a PreferDualStack Service
// answers on each ClusterIP from a Pod on the other node, DNS returns a record of each family, the API
// server certificate names apiVIPs and the node's addresses, kube-proxy's nftables table of each family
// has the Service; then certs rotate renews the certificates that name addresses (the API server's, the
// kubelets' serving ones), the new ones naming each family's (with proxyHost set, no request through that
// host's node-local API proxy failing meanwhile), and reset leaves no kube-proxy table and no Service rule
// of either family.
func checkStack(t *testing.T, c *Cluster, families int, a, b string, apiVIPs []string, proxyHost string) {
	t.Helper()
	t.Run("every Node has a pod range and an InternalIP of each family", func(t *testing.T) {
		out := c.MustK(t, "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.podCIDRs[*]} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}`)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) != 1+2*families || !ofFamilies(f[1:1+families]) || !ofFamilies(f[1+families:]) || !strings.Contains(line, "fd00:10:244:") {
				t.Errorf("node: %q, want its name, a pod range and an InternalIP of each of %d families", line, families)
			}
		}
	})

	c.LoadProbe(t, a, b)
	ips := map[string][]string{}
	for _, n := range []string{a, b} {
		c.ProbePodOn(t, "p-"+n, n)
		ips[n] = strings.Fields(c.MustK(t, "get", "pod", "p-"+n, "-o", "jsonpath={.status.podIPs[*].ip}"))
		if len(ips[n]) != families || !ofFamilies(ips[n]) {
			t.Fatalf("p-%s's addresses: %q, want one of each of %d families", n, ips[n], families)
		}
	}
	t.Logf("probe Pods: %v", ips)

	t.Run("Pods on different nodes reach each other over each family, TCP and UDP", func(t *testing.T) {
		for _, p := range [][2]string{{a, b}, {b, a}} {
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
  selector: {app: p-`+b+`}
  ports: [{port: 8080, protocol: TCP}]
`)
	vips := strings.Fields(c.MustK(t, "get", "service", "web", "-o", "jsonpath={.spec.clusterIPs[*]}"))
	if len(vips) != families || !ofFamilies(vips) {
		t.Fatalf("the PreferDualStack Service's ClusterIPs: %q, want one of each of %d families", vips, families)
	}
	serviceAnswers := func(t *testing.T) {
		t.Helper()
		for _, vip := range vips {
			url := "http://" + net.JoinHostPort(vip, "8080")
			// kube-proxy writes the Service's rules within its sync period of the endpoints.
			deadline := time.Now().Add(30 * time.Second)
			for {
				out, err := c.K(t, "", "exec", "p-"+a, "--", "/probe", "get", url, "2s")
				if err == nil && strings.TrimSpace(out) == "p-"+b {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the Service at %s from p-%s: %q, %v", url, a, out, err)
				}
				time.Sleep(time.Second)
			}
		}
	}
	t.Run("a PreferDualStack Service answers on each ClusterIP from a Pod on another node", serviceAnswers)

	t.Run("DNS returns a record of the Service of each family", func(t *testing.T) {
		out, err := c.K(t, "", "exec", "p-"+a, "--", "/probe", "resolve", "web.default.svc.cluster.local")
		got := strings.Fields(out)
		slices.Sort(got)
		want := slices.Sorted(slices.Values(vips))
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("resolve web.default.svc.cluster.local: %q, %v; want %q", out, err, vips)
		}
	})

	// names checks that the certificate host presents at port names each address of node (its InternalIPs)
	// and the extra ones, and returns its serial number.
	names := func(t *testing.T, what, host string, port int, node string, extra ...string) string {
		t.Helper()
		cert := c.Presented(t, host, port)
		var sans []string
		for _, ip := range cert.IPAddresses {
			sans = append(sans, ip.String())
		}
		addrs := strings.Fields(c.MustK(t, "get", "node", node, "-o", `jsonpath={.status.addresses[?(@.type=="InternalIP")].address}`))
		for _, want := range append(slices.Clone(extra), addrs...) {
			if !slices.Contains(sans, want) {
				t.Errorf("%s names %v, not %s", what, sans, want)
			}
		}
		return cert.SerialNumber.String()
	}
	var apiSerial, servingSerial string
	t.Run("the API server certificate names each Service address and each of the node's, a kubelet's serving certificate each of its node's", func(t *testing.T) {
		apiSerial = names(t, "the API server's certificate", "cp1", 6443, "cp1", apiVIPs...)
		servingSerial = names(t, b+"'s kubelet serving certificate", b, 10250, b)
	})

	t.Run("kube-proxy programs its nftables table of each family", func(t *testing.T) {
		var script, want []string
		for _, vip := range vips {
			family := "ip"
			if strings.Contains(vip, ":") {
				family = "ip6"
			}
			script = append(script, "nft list table "+family+" kube-proxy | grep -c '"+vip+" . tcp . 8080'")
			want = append(want, "1")
		}
		out := c.Lab.Run(t, a, strings.Join(script, "; ")+"; true")
		if strings.Join(strings.Fields(out), " ") != strings.Join(want, " ") {
			t.Errorf("the Service in kube-proxy's tables on %s: %q, want %q", a, out, want)
		}
	})

	// The certificates that name addresses of both families, renewed: the API server's, and the kubelets'
	// serving ones (requested anew, approved only when every address is the node's).
	t.Run("certs rotate of the API server's and the kubelets' serving certificates: new ones naming each family's addresses, the Service answering", func(t *testing.T) {
		stop := func() (int, []string) { return 0, nil }
		if proxyHost != "" {
			stop = StartProxyClient(t, c, proxyHost)
		}
		_, stderr, code := c.Run(t, "certs", "rotate", "--yes", "--fresh", "0s", "--only", "apiserver,kubelet-serving")
		ok, failed := stop()
		if code != 0 {
			t.Fatalf("certs rotate: exit %d\n%s", code, stderr)
		}
		if proxyHost != "" {
			t.Logf("during the rotation, through %s's API proxy: %d requests ok, %d failed", proxyHost, ok, len(failed))
			if len(failed) > 0 {
				t.Errorf("requests failed during the rolling rotation:\n%s", strings.Join(firstTen(failed), "\n"))
			}
		}
		if serial := names(t, "the API server's new certificate", "cp1", 6443, "cp1", apiVIPs...); serial == apiSerial {
			t.Errorf("the API server presents the certificate it had before the rotation (serial %s)", serial)
		}
		if serial := names(t, b+"'s new kubelet serving certificate", b, 10250, b); serial == servingSerial {
			t.Errorf("%s's kubelet presents the serving certificate it had before the rotation (serial %s)", b, serial)
		}
		serviceAnswers(t)
	})

	t.Run("backup (encrypted), a ConfigMap deleted, etcd restore from the archive: it is back; state pull from it: the same CA", func(t *testing.T) {
		CheckBackupRestore(t, c)
	})
	t.Run("reset leaves no kube-proxy table and no Service rule of either family", func(t *testing.T) {
		if _, stderr, code := c.Run(t, "reset", "--yes"); code != 0 {
			t.Fatalf("reset: exit %d\n%s", code, stderr)
		}
		for _, h := range c.Lab.Hosts {
			out, _ := c.Lab.SSH("", h.Name, `nft list tables | grep -w kube-proxy; ip rule | grep 32700; ip -6 rule | grep 32700; `+
				`ip -6 route | grep fd00:10:244; ls -d /var/lib/clusterctl/pod-rules6 /sys/class/net/cni0 /sys/class/net/flannel.1 /sys/class/net/flannel-v6.1 /run/flannel 2>/dev/null; true`)
			if strings.TrimSpace(out) != "" {
				t.Errorf("%s after reset:\n%s", h.Name, out)
			}
		}
	})
}

// ofFamilies reports whether list is addresses or ranges of distinct families: one, or one IPv4 and one
// IPv6.
func ofFamilies(list []string) bool {
	seen := map[bool]bool{}
	for _, s := range list {
		a, err := netip.ParseAddr(strings.Split(s, "/")[0])
		if err != nil || seen[a.Is6()] {
			return false
		}
		seen[a.Is6()] = true
	}
	return len(list) > 0
}
