package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/test/lab"
)

// VMEnv, when set (make test-vm), runs the VM tier: a cluster on a QEMU virtual machine with a kernel of its
// own, emulated (10-16x slower than the machine), too slow for make test.
const VMEnv = "CLUSTERCTL_E2E_VM"

// vmTimeout is every wait's bound on the emulated VM, given with the flags a user on a slow machine has.
const vmTimeout = "25m"

// TestVM runs what a new user does on a real VM (Debian 13, kernel 6.12, cgroup v2, systemd-networkd on eth0,
// RSA, ECDSA and ED25519 host keys), with the inventory's defaults and the host pinned by its ED25519
// fingerprint: preflight, up, a workload behind a Service reached by name, certs rotate, a reboot after
// which the cluster comes back by itself (its pod routes and Service rule kept through networkd
// reconfiguring eth0), and reset leaving no process, unit, file or kernel setting of the cluster.
func TestVM(t *testing.T) {
	if os.Getenv(VMEnv) == "" {
		t.Skipf("make test-vm runs it (%s=1): a cluster on an emulated VM takes ~30 min", VMEnv)
	}
	start := time.Now()
	c := NewBareCluster(t, lab.Options{Hosts: 1, ControlPlanes: 1, VM: true}, "")
	t.Logf("step lab: VM booted to SSH, artifacts pulled in %s (%s)", time.Since(start).Round(time.Second), c.Lab.Timings(t))
	// Each step is timed; a failed step ends the test only when the next ones need it (up).
	step := func(name string, f func(t *testing.T)) bool {
		t0 := time.Now()
		ok := t.Run(name, f)
		t.Logf("step %s: %s", name, time.Since(t0).Round(time.Second))
		return ok
	}
	before := Sysctls(t, c, "cp1")

	step("the host is what a real VM is", func(t *testing.T) {
		out := c.Lab.Run(t, "cp1", "stat -fc %T /sys/fs/cgroup; ls /etc/ssh/ | grep -c '_key.pub$'; networkctl list --no-legend eth0 | awk '{print $4, $5}'")
		if want := "cgroup2fs\n3\nroutable configured"; strings.TrimSpace(out) != want {
			t.Fatalf("cp1:\n%s\nwant:\n%s", out, want)
		}
		inv := readFile(t, c.Inventory)
		if !strings.Contains(string(inv), "hostKey: SHA256:") || strings.Contains(string(inv), "knownHosts") || strings.Contains(string(inv), "failCgroupV1") {
			t.Fatalf("the VM's inventory is not the defaults with a pinned key:\n%s", inv)
		}
	})

	step("preflight", func(t *testing.T) {
		out, stderr, code := c.Run(t, "preflight")
		if code != 0 {
			t.Fatalf("preflight: exit %d\n%s\n%s", code, out, stderr)
		}
	})

	upOK := step("up", func(t *testing.T) {
		res := c.Up(t, "--api-timeout", vmTimeout, "--node-timeout", vmTimeout)
		if len(res.Nodes) != 1 || !res.Nodes[0].Ready {
			t.Fatalf("nodes: %+v", res.Nodes)
		}
		// failCgroupV1 is left at its default (true): the kubelet runs because the host has cgroup v2.
		out := c.Lab.Run(t, "cp1", "grep -c failCgroupV1 /var/lib/kubelet/config.yaml; test -d /sys/fs/cgroup/kubepods.slice && echo kubepods.slice; systemctl show -p NeedDaemonReload clusterctl-pod-routes.service; true")
		if want := "0\nkubepods.slice\nNeedDaemonReload=no"; strings.TrimSpace(out) != want {
			t.Errorf("cp1 after up:\n%s\nwant:\n%s", out, want)
		}
	})
	if !upOK {
		t.FailNow()
	}

	step("a Pod reaches a Service by name", func(t *testing.T) {
		c.LoadProbe(t, "cp1")
		if _, err := c.K(t, vmWorkload, "apply", "-f", "-"); err != nil {
			t.Fatal(err)
		}
		c.MustWait(t, "pod/web", "condition=Ready", 10*time.Minute)
		c.MustWait(t, "pod/client", "condition=Ready", 10*time.Minute)
		reachService(t, c, 10*time.Minute)
	})

	step("certs rotate", func(t *testing.T) {
		if out, stderr, code := c.Run(t, "certs", "rotate", "--yes", "--fresh", "0", "--node-timeout", vmTimeout); code != 0 {
			t.Fatalf("certs rotate: exit %d\n%s\n%s", code, tail(out, 30), stderr)
		}
		reachService(t, c, 5*time.Minute)
	})

	step("reboot: the cluster comes back by itself", func(t *testing.T) {
		boot := strings.TrimSpace(c.Lab.Run(t, "cp1", "cat /proc/sys/kernel/random/boot_id"))
		c.Lab.Run(t, "cp1", "systemd-run --on-active=1 --timer-property=AccuracySec=100ms systemctl reboot >/dev/null")
		t0 := time.Now()
		deadline := t0.Add(10 * time.Minute)
		for {
			out, err := c.Lab.SSH("", "cp1", "cat /proc/sys/kernel/random/boot_id")
			if err == nil && strings.TrimSpace(out) != boot {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cp1 not back after %s", time.Since(t0))
			}
			time.Sleep(2 * time.Second)
		}
		t.Logf("reboot to SSH: %s", time.Since(t0).Round(time.Second))
		waitKubeSystemReady(t, c, 25*time.Minute)
		t.Logf("reboot to all kube-system Pods Ready: %s", time.Since(t0).Round(time.Second))
		reachService(t, c, 10*time.Minute)
	})

	step("the pod routes and the Service rule survive networkd", func(t *testing.T) {
		routes := "ip rule show priority 32700 | grep -c unreachable; ip route show 10.96.0.0/12 | grep -c dev"
		if out := strings.TrimSpace(c.Lab.Run(t, "cp1", routes)); out != "1\n1" {
			t.Fatalf("after the reboot, rule and Service route: %q", out)
		}
		c.Lab.Run(t, "cp1", "networkctl reconfigure eth0 && sleep 5")
		if out := strings.TrimSpace(c.Lab.Run(t, "cp1", routes)); out != "1\n1" {
			t.Errorf("after networkctl reconfigure eth0, rule and Service route: %q", out)
		}
	})

	step("reset leaves nothing of the cluster", func(t *testing.T) {
		if _, stderr, code := c.Run(t, "reset", "--yes"); code != 0 {
			t.Fatalf("reset: exit %d\n%s", code, stderr)
		}
		if left := ResetLeftovers(t, c, "cp1", before); left != "" {
			t.Errorf("cp1 after reset:\n%s", left)
		}
	})
}

// vmWorkload is a server Pod behind a Service, and a client Pod, both on the one node.
const vmWorkload = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  nodeName: cp1
  containers: [{name: probe, image: ` + ProbeImage + `, imagePullPolicy: Never, args: [serve]}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: default}
spec:
  nodeName: cp1
  containers: [{name: probe, image: ` + ProbeImage + `, imagePullPolicy: Never, args: [serve]}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
`

// reachService checks that the client Pod reaches the web Service by name (retried within timeout, as
// kube-proxy and CoreDNS may be catching up).
func reachService(t *testing.T, c *Cluster, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, err := c.K(t, "", "exec", "client", "--", "/probe", "get", "http://web.default.svc.cluster.local/")
		if err == nil && strings.TrimSpace(out) == "web" {
			return
		}
		if time.Now().After(deadline) {
			// What a user would look at: the Pods, the Service's endpoints, kube-proxy's rules and log.
			diag, _ := c.K(t, "", "get", "pods,endpointslices", "-A", "-o", "wide")
			rules, _ := c.Lab.SSH("", "cp1", "iptables-save -t nat | grep -c KUBE-SVC; iptables-save | grep default/web; crictl logs --tail 20 $(crictl ps -q --name kube-proxy) 2>&1")
			t.Fatalf("client -> Service web by name: %q, %v\n%s\n%s", out, err, diag, rules)
		}
		time.Sleep(3 * time.Second)
	}
}

// waitKubeSystemReady waits until the node is Ready and every kube-system Pod is Running and Ready.
func waitKubeSystemReady(t *testing.T, c *Cluster, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		out, err := c.K(t, "", "get", "nodes,pods", "-n", "kube-system", "-o",
			`jsonpath={range .items[*]}{.kind}/{.metadata.name} {range .status.conditions[?(@.type=="Ready")]}{.status}{end}{"\n"}{end}`)
		if err == nil {
			waiting := []string{}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			for _, l := range lines {
				if !strings.HasSuffix(l, " True") {
					waiting = append(waiting, l)
				}
			}
			if len(waiting) == 0 && len(lines) > 1 {
				return
			}
			last = strings.Join(waiting, ", ")
		} else {
			last = err.Error()
		}
		time.Sleep(5 * time.Second)
	}
	t.Fatalf("after %s, not Ready: %s", timeout, last)
}
