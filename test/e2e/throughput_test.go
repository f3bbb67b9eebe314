package e2e

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/test/lab"
)

// ThroughputEnv names the variable that runs TestPodThroughput (make bench-net).
const ThroughputEnv = "CLUSTERCTL_E2E_BENCH_NET"

// TestPodThroughput measures TCP throughput from cp1 to w2 of a 1+2 cluster, between Pods and between the
// hosts themselves (Pods on the host's network), for each pod network as users run it: the bridge on one
// subnet, flannel's VXLAN across two subnets joined by the lab's router (cp1 on one, w2 on the other). Each
// figure is the median of several transfers of 1 GiB over one connection (probe fetch of serve's /bytes/N).
// It prints the figures and asserts nothing on them.
func TestPodThroughput(t *testing.T) {
	if os.Getenv(ThroughputEnv) == "" {
		t.Skip("make bench-net runs it (" + ThroughputEnv + "=1)")
	}
	runs := 5
	if r, err := strconv.Atoi(os.Getenv("RUNS")); err == nil && r > 0 {
		runs = r
	}
	artDir, m := lab.Artifacts(t)
	var table []string
	for _, network := range []struct {
		name    string
		subnets int
	}{{"bridge", 1}, {"flannel", 2}} {
		t.Run(network.name, func(t *testing.T) {
			c := newCluster(t, lab.Options{Hosts: 3, ControlPlanes: 1, Subnets: network.subnets}, artDir, m.KubernetesVersion,
				"  cni:\n    plugin: "+network.name+"\n")
			c.Up(t)
			c.LoadProbe(t, "cp1", "w2")
			ips := ProbePods(t, c, "cp1", "w2")
			hostPod(t, c, "h-w2", "w2")
			hostIP := strings.TrimSpace(c.MustK(t, "get", "pod", "h-w2", "-o", "jsonpath={.status.podIP}"))
			// The MTUs of w2's links: its interface, the Pods' bridge and, with flannel, the VXLAN device.
			mtu := strings.TrimSpace(c.Lab.Run(t, "w2", "for l in host0 cni0 flannel.1; do [ -r /sys/class/net/$l/mtu ] && echo \"$l $(cat /sys/class/net/$l/mtu)\"; done; true"))
			pods := throughput(t, c, "p-cp1", ips["w2"], runs)
			hosts := throughput(t, c, "p-cp1", hostIP, runs)
			row := fmt.Sprintf("| %s | %d | %s | %s | %s |", network.name, network.subnets, pods, hosts, strings.ReplaceAll(mtu, "\n", ", "))
			t.Log(row)
			table = append(table, row)
		})
	}
	t.Logf("TCP throughput cp1 -> w2, MB/s, median of %d transfers of 1 GiB (all runs):\n| network | subnets | Pod to Pod | Pod to w2's host | w2's MTUs |\n| --- | --- | --- | --- | --- |\n%s",
		runs, strings.Join(table, "\n"))
}

// hostPod runs the probe as Pod name on node's own network (hostNetwork: it serves on the host's port 8080).
func hostPod(t testing.TB, c *Cluster, name, node string) {
	t.Helper()
	c.Privileged(t, "default")
	c.MustKApply(t, `apiVersion: v1
kind: Pod
metadata: {name: `+name+`, namespace: default}
spec:
  nodeName: `+node+`
  hostNetwork: true
  containers: [{name: probe, image: `+ProbeImage+`, imagePullPolicy: Never, args: [serve]}]
`)
	c.MustK(t, "wait", "--for=condition=Ready", "pod/"+name, "--timeout=120s")
}

// throughput fetches 1 GiB from the probe at ip:8080 in the Pod from, runs times, and returns the median
// in MB/s followed by every run's.
func throughput(t testing.TB, c *Cluster, from, ip string, runs int) string {
	t.Helper()
	url := "http://" + net.JoinHostPort(ip, "8080") + "/bytes/" + strconv.Itoa(1<<30)
	var rates []float64
	for range runs {
		out := c.MustK(t, "exec", from, "--", "/probe", "fetch", url)
		var n int64
		var secs float64
		if _, err := fmt.Sscanf(out, "%d bytes in %f s", &n, &secs); err != nil || n != 1<<30 || secs <= 0 {
			t.Fatalf("probe fetch %s: %q, %v", url, out, err)
		}
		rates = append(rates, float64(n)/secs/1e6)
		time.Sleep(time.Second)
	}
	all := make([]string, len(rates))
	for i, r := range rates {
		all[i] = strconv.FormatFloat(r, 'f', 0, 64)
	}
	sorted := slices.Clone(rates)
	slices.Sort(sorted)
	return fmt.Sprintf("**%.0f** (%s)", sorted[len(sorted)/2], strings.Join(all, ", "))
}

// TestServiceLatency measures what kube-proxy's mode costs a connection through a Service: on a 1+2
// cluster (the bridge) per mode, iptables then nftables, the probe Pod on cp1 makes short connections one
// after another (connect, an HTTP/1.0 request, close) to a ClusterIP whose one endpoint is the probe Pod on
// w2, and to that Pod's own address (no Service: the network's share), then fetches 1 GiB through the
// ClusterIP. It prints the figures and asserts nothing on them (make bench-net; CONNS connections, default
// 10000).
func TestServiceLatency(t *testing.T) {
	if os.Getenv(ThroughputEnv) == "" {
		t.Skip("make bench-net runs it (" + ThroughputEnv + "=1)")
	}
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("CONNS")); err == nil && v > 0 {
		n = v
	}
	artDir, m := lab.Artifacts(t)
	var table []string
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) {
			c := newCluster(t, lab.Options{Hosts: 3, ControlPlanes: 1}, artDir, m.KubernetesVersion, "  kubeProxy:\n    mode: "+mode+"\n")
			c.Up(t)
			c.LoadProbe(t, "cp1", "w2")
			ips := ProbePods(t, c, "cp1", "w2")
			c.MustK(t, "expose", "pod", "p-w2", "--name", "web", "--port", "8080")
			vip := strings.TrimSpace(c.MustK(t, "get", "service", "web", "-o", "jsonpath={.spec.clusterIP}"))
			// The Service's rules come within kube-proxy's sync of the endpoints.
			deadline := time.Now().Add(30 * time.Second)
			for {
				if out, err := c.K(t, "", "exec", "p-cp1", "--", "/probe", "get", "http://"+net.JoinHostPort(vip, "8080"), "2s"); err == nil && strings.TrimSpace(out) == "p-w2" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the Service %s does not answer", vip)
				}
				time.Sleep(time.Second)
			}
			conns := func(ip string) string {
				return strings.TrimSpace(c.MustK(t, "exec", "p-cp1", "--", "/probe", "conns", net.JoinHostPort(ip, "8080"), strconv.Itoa(n)))
			}
			svc, pod := conns(vip), conns(ips["w2"])
			rate := throughput(t, c, "p-cp1", vip, 3)
			row := fmt.Sprintf("| %s | %s | %s | %s |", mode, svc, pod, rate)
			t.Log(row)
			table = append(table, row)
		})
	}
	t.Logf("%d short connections one after another, Pod on cp1 to a ClusterIP whose endpoint is on w2, and to that Pod directly (microseconds); then MB/s of 1 GiB through the ClusterIP (median of 3):\n| kube-proxy | through the ClusterIP | to the Pod itself | MB/s through the ClusterIP |\n| --- | --- | --- | --- |\n%s",
		n, strings.Join(table, "\n"))
}
