package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/tasks/textdiff"
	"github.com/clusterctl/clusterctl/test/lab"
)

// TestExternalEtcd brings up, from a kubespray INI inventory whose etcd group is three hosts of their own,
// kubeadm's external-etcd topology: etcd as a unit on those hosts (nothing of a node there), two
// control-plane nodes whose API servers use every member, one worker; a workload runs; a re-run changes
// nothing; the cluster keeps answering with one etcd host down, and the member catches up when it is back;
// an etcd host leaves the cluster and the inventory, then comes back: each time every API server is
// pointed at the members there are, one control-plane node at a time, and a client of the node-local
// proxy sees no failed request; a restore from a snapshot onto the etcd hosts; then upgrade moves the
// cluster to the lab's version, the etcd members first (one at a time, the target's etcd), the same client
// still seeing no failed request, nor while clusterctl reboot reboots two etcd hosts and a control-plane
// node. make test brings it up at the lab's version and leaves the leaf rotation, the leave-and-come-back,
// the restore and the upgrade to make test-long (~550 s): it renews stacked members' certificates (TestUp,
// TestGrowAndShrink), restores stacked members (TestUp, TestDualStack) and upgrades a control-plane node
// with a workload (TestKubeadm).
func TestExternalEtcd(t *testing.T) {
	long := os.Getenv(LongEnv) != ""
	toDir, toM := lab.Artifacts(t)
	artDir, m := toDir, toM
	if long {
		// make test-long brings it up at the version before, and upgrades it.
		artDir, m = lab.ArtifactsOf(t, lab.UpgradeFrom)
	}
	bin := Clusterctl(t)
	l := lab.Start(t, lab.Options{Hosts: 6, ControlPlanes: 2, Bare: true}) // cp1 cp2 w1 w2 w3 w4
	addr := map[string]string{}
	for _, h := range l.Hosts {
		addr[h.Name] = h.Address
	}
	// The lab host each inventory host is.
	labHost := map[string]string{"cp1": "cp1", "cp2": "cp2", "node1": "w1", "etcd1": "w2", "etcd2": "w3", "etcd3": "w4"}
	ini := fmt.Sprintf(`# kubespray's layout with etcd on hosts of its own (etcd_deployment_type: host)
[all]
cp1   ansible_host=%s
cp2   ansible_host=%s
node1 ansible_host=%s
etcd1 ansible_host=%s
etcd2 ansible_host=%s
etcd3 ansible_host=%s

[kube_control_plane]
cp1
cp2

[etcd]
etcd1
etcd2
etcd3

[kube_node]
node1

[all:vars]
ansible_user=root
ansible_ssh_private_key_file=%s
kube_version=%s
# the lab's eviction thresholds, as lab.sh's hosts.yaml sets them: the hosts share the machine's disk, and
# the kubelet's default (imagefs.available<15%%) would evict the workload on a machine with less free
eviction_hard={"memory.available": "100Mi", "nodefs.available": "1Gi", "imagefs.available": "1Gi"}
`, addr["cp1"], addr["cp2"], addr["w1"], addr["w2"], addr["w3"], addr["w4"], l.Key(), m.KubernetesVersion)
	if out, _ := exec.Command("stat", "-fc", "%T", "/sys/fs/cgroup").Output(); strings.TrimSpace(string(out)) != "cgroup2fs" {
		// This machine's hosts use cgroup v1: kubelets from v1.35 run on it only with failCgroupV1 false.
		ini += `kubelet_config_extra_args={"failCgroupV1": false}` + "\n"
	}
	inv := filepath.Join(l.Dir, "hosts.ini")
	if err := os.WriteFile(inv, []byte(ini), 0o644); err != nil {
		t.Fatal(err)
	}
	// The hosts' keys are the cluster's known ones (an INI inventory names no known_hosts file), and the
	// lab's artifacts are this workstation's cache for the version (an INI inventory names no directory).
	state := filepath.Join(l.Dir, ".clusterctl", "kubernetes")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "known_hosts"), readFile(t, l.KnownHosts()), 0o600); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cache, "clusterctl", "artifacts"), 0o755); err != nil {
		t.Fatal(err)
	}
	for v, dir := range map[string]string{m.KubernetesVersion: artDir, toM.KubernetesVersion: toDir} {
		if err := os.Symlink(dir, filepath.Join(cache, "clusterctl", "artifacts", v)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_CACHE_HOME", cache)
	c := &Cluster{Lab: l, Inventory: inv, Bin: bin, Kubectl: filepath.Join(artDir, "bin", "linux-"+runtime.GOARCH, "kubectl"),
		StateDir: state, Version: m.KubernetesVersion}
	etcdctl := func(host, args string) string {
		t.Helper()
		return l.Run(t, labHost[host], "etcdctl --endpoints https://127.0.0.1:2379 --cacert /etc/kubernetes/pki/etcd/ca.crt "+
			"--cert /etc/kubernetes/pki/etcd/healthcheck-client.crt --key /etc/kubernetes/pki/etcd/healthcheck-client.key "+args)
	}

	t.Run("up", func(t *testing.T) {
		c.Up(t)
		members := etcdctl("etcd1", "member list")
		if n := strings.Count(members, ", started, "); n != 3 || strings.Contains(members, "true") {
			t.Errorf("want 3 started voting members:\n%s", members)
		}
		for _, h := range []string{"etcd1", "etcd2", "etcd3"} {
			// A unit of the artifacts' etcd; no kubelet, runtime or manifests: the host is no node.
			out := l.Run(t, labHost[h], "systemctl is-active etcd; systemctl is-active kubelet containerd 2>&1 | tr '\\n' ' '; echo; "+
				"test -e /etc/kubernetes/manifests && echo MANIFESTS; ls /etc/kubernetes/pki/etcd; test -e /etc/kubernetes/pki/etcd/ca.key && echo CA-KEY || true")
			want := "active\ninactive inactive \nca.crt\nhealthcheck-client.crt\nhealthcheck-client.key\npeer.crt\npeer.key\nserver.crt\nserver.key\n"
			if out != want {
				t.Errorf("%s:\n%s\nwant\n%s", h, out, want)
			}
		}
		for _, cp := range []string{"cp1", "cp2"} {
			out := l.Run(t, cp, "ls /etc/kubernetes/manifests; ls /etc/kubernetes/pki/etcd; systemctl is-active etcd || true")
			if want := "clusterctl-apiserver-proxy.yaml\nkube-apiserver.yaml\nkube-controller-manager.yaml\nkube-scheduler.yaml\nca.crt\ninactive\n"; out != want {
				t.Errorf("%s:\n%s\nwant\n%s", cp, out, want)
			}
		}
		checkEtcdServers(t, c, "w2", "w3", "w4")
		if nodes := c.MustK(t, "get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type==\"Ready\")].status} {end}"); nodes != "cp1=True cp2=True node1=True " {
			t.Errorf("nodes: %q", nodes)
		}
	})

	t.Run("a workload runs on the worker", func(t *testing.T) {
		c.LoadProbe(t, "w1")
		defer func() {
			if t.Failed() {
				out, _ := c.K(t, "", "describe", "pod", "on-node1")
				t.Logf("the Pod:\n%s", tail(out, 25))
			}
		}()
		c.ProbePodOn(t, "on-node1", "node1")
	})

	t.Run("a re-run changes nothing", func(t *testing.T) {
		before := map[string]string{}
		for _, h := range labHost {
			before[h] = c.Files(t, h)
		}
		pid := l.Run(t, "w2", "systemctl show -p MainPID --value etcd")
		c.Up(t)
		for _, h := range labHost {
			if diff := textdiff.Unified("before", "after", before[h], c.Files(t, h), 0); diff != "" {
				t.Errorf("%s: files changed by a re-run:\n%s", h, diff)
			}
		}
		if again := l.Run(t, "w2", "systemctl show -p MainPID --value etcd"); again != pid {
			t.Errorf("etcd on etcd1 restarted by a re-run (pid %s, then %s)", strings.TrimSpace(pid), strings.TrimSpace(again))
		}
	})

	t.Run("certs check-expiration reads the etcd hosts' certificates", func(t *testing.T) {
		stdout, stderr, code := c.Run(t, "certs", "check-expiration", "--output", "json")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		var report struct {
			Certificates []struct{ Host, Path, State string } `json:"certificates"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &report); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		seen := map[string]string{}
		for _, cert := range report.Certificates {
			seen[cert.Host+":"+cert.Path] = cert.State
		}
		for _, want := range []string{"etcd1:/etc/kubernetes/pki/etcd/server.crt", "etcd3:/etc/kubernetes/pki/etcd/peer.crt",
			"cp1:/etc/kubernetes/pki/apiserver-etcd-client.crt", "etcd2:/etc/kubernetes/pki/etcd/ca.crt"} {
			if seen[want] != "match" {
				t.Errorf("%s: %q, want match", want, seen[want])
			}
		}
	})

	t.Run("etcd status and snapshot from the etcd hosts", func(t *testing.T) {
		members, code := c.EtcdStatus(t)
		checkHealthy(t, members, code, "etcd1", "etcd2", "etcd3")
		c.Snapshot(t)
	})

	t.Run("certs rotate renews the etcd hosts' certificates, members restarted one at a time", func(t *testing.T) {
		// ~95 s.
		longOnly(t, "leaf rotations that restart stacked etcd members one at a time (TestUp, TestGrowAndShrink)")
		serial := func(h string) string {
			return l.Run(t, labHost[h], "openssl x509 -noout -serial -in /etc/kubernetes/pki/etcd/server.crt")
		}
		before := map[string]string{}
		for _, h := range []string{"etcd1", "etcd2", "etcd3"} {
			before[h] = serial(h)
		}
		if _, stderr, code := c.Run(t, "certs", "rotate", "--yes", "--fresh", "0s"); code != 0 {
			t.Fatalf("certs rotate: exit %d\n%s", code, tail(stderr, 30))
		}
		for _, h := range []string{"etcd1", "etcd2", "etcd3"} {
			if serial(h) == before[h] {
				t.Errorf("%s: etcd's server certificate not renewed", h)
			}
		}
		members, code := c.EtcdStatus(t)
		checkHealthy(t, members, code, "etcd1", "etcd2", "etcd3")
		c.NodesReady(t, 3)
	})
	if long {
		// The CA rotation (~7.5 min with one control-plane node) goes through the same roll of the etcd
		// members at each of its stages.
		t.Run("certs rotate --ca: every etcd host trusts, then presents, the new etcd CA; members restarted one at a time", func(t *testing.T) {
			oldCA := readFile(t, filepath.Join(c.StateDir, "pki", "etcd", "ca.crt"))
			stdout, stderr, code := c.Run(t, "certs", "rotate", "--ca", "--yes", "--output", "json")
			if code != 0 {
				t.Fatalf("certs rotate --ca: exit %d\n%s", code, tail(stderr, 30))
			}
			t.Logf("%s", lastLine(stdout))
			newCA := readFile(t, filepath.Join(c.StateDir, "pki", "etcd", "ca.crt"))
			if string(newCA) == string(oldCA) {
				t.Fatal("the state directory's etcd CA did not change")
			}
			for _, h := range []string{"etcd1", "etcd2", "etcd3", "cp1"} {
				if got := l.Run(t, labHost[h], "cat /etc/kubernetes/pki/etcd/ca.crt"); got != string(newCA) {
					t.Errorf("%s: etcd/ca.crt is not the new etcd CA alone", h)
				}
			}
			for _, h := range []string{"etcd1", "etcd2", "etcd3"} {
				if out := l.Run(t, labHost[h], "openssl verify -CAfile /etc/kubernetes/pki/etcd/ca.crt /etc/kubernetes/pki/etcd/server.crt /etc/kubernetes/pki/etcd/peer.crt"); strings.Count(out, ": OK") != 2 {
					t.Errorf("%s: its certificates are not the new CA's: %s", h, out)
				}
			}
			members, code := c.EtcdStatus(t)
			checkHealthy(t, members, code, "etcd1", "etcd2", "etcd3")
			c.NodesReady(t, 3)
		})
	}

	t.Run("one etcd host down: the cluster answers; back, its member catches up", func(t *testing.T) {
		l.Run(t, "w4", "systemctl stop etcd")
		if _, err := c.K(t, "", "create", "configmap", "while-etcd3-down", "-n", "default"); err != nil {
			t.Fatalf("a write with 2 of 3 members: %v", err)
		}
		l.Run(t, "w4", "systemctl start etcd")
		health := etcdctl("etcd3", "endpoint health --cluster 2>&1")
		if strings.Count(health, " is healthy") != 3 {
			t.Errorf("members after etcd3 is back:\n%s", health)
		}
		if out := etcdctl("etcd3", "get --keys-only --prefix /registry/configmaps/default/while-etcd3-down"); !strings.Contains(out, "while-etcd3-down") {
			t.Errorf("etcd3 lacks what was written while it was down: %q", out)
		}
	})

	t.Run("an etcd host leaves the cluster and the inventory, then comes back: every API server follows, one at a time", func(t *testing.T) {
		// ~140 s.
		longOnly(t, "removing and adding stacked members (TestGrowAndShrink)")
		if _, stderr, code := c.Run(t, "remove-node", "--yes", "etcd3"); code != 0 {
			t.Fatalf("remove-node etcd3: exit %d\n%s", code, tail(stderr, 30))
		}
		if members := etcdctl("etcd1", "member list"); strings.Count(members, ", started, ") != 2 || strings.Contains(members, "etcd3") {
			t.Errorf("after remove-node etcd3:\n%s", members)
		}
		if out := l.Run(t, "w4", "test -e /etc/systemd/system/etcd.service && echo UNIT; ls /var/lib/etcd 2>/dev/null | wc -l"); out != "0\n" {
			t.Errorf("etcd3 not reset: %q", out)
		}
		// Out of the inventory: up points every API server at the two members left.
		without := strings.NewReplacer("etcd3 ansible_host="+addr["w4"]+"\n", "", "etcd2\netcd3\n", "etcd2\n").Replace(ini)
		if without == ini {
			t.Fatal("the inventory without etcd3 is the same")
		}
		if err := os.WriteFile(inv, []byte(without), 0o644); err != nil {
			t.Fatal(err)
		}
		underProxyClient(t, c, "up without etcd3", func() { c.Up(t) })
		checkEtcdServers(t, c, "w2", "w3")
		// Back in the inventory: add-node etcd3 joins its member, then points every API server at it.
		if err := os.WriteFile(inv, []byte(ini), 0o644); err != nil {
			t.Fatal(err)
		}
		underProxyClient(t, c, "add-node etcd3", func() {
			if _, stderr, code := c.Run(t, "add-node", "etcd3"); code != 0 {
				t.Fatalf("add-node etcd3: exit %d\n%s", code, tail(stderr, 30))
			}
		})
		checkEtcdServers(t, c, "w2", "w3", "w4")
		members := etcdctl("etcd3", "member list")
		if n := strings.Count(members, ", started, "); n != 3 || strings.Contains(members, "true") {
			t.Errorf("after add-node etcd3, want 3 started voting members:\n%s", members)
		}
		if out := etcdctl("etcd3", "get --keys-only --prefix /registry/configmaps/default/while-etcd3-down"); !strings.Contains(out, "while-etcd3-down") {
			t.Errorf("etcd3 lacks the cluster's data after it joined: %q", out)
		}
		if _, err := c.K(t, "", "create", "configmap", "after-etcd3-back", "-n", "default"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("restore from a snapshot onto the etcd hosts: what was deleted after it is back", func(t *testing.T) {
		longOnly(t, "restores onto one stacked member (TestUp) and from a backup archive (TestDualStack)")
		c.MustK(t, "create", "namespace", "before-snapshot")
		file := c.Snapshot(t)
		c.MustK(t, "delete", "namespace", "before-snapshot", "--wait=false")
		c.Restore(t, file)
		if phase := c.MustK(t, "get", "namespace", "before-snapshot", "-o", "jsonpath={.status.phase}"); phase != "Active" {
			t.Errorf("namespace before-snapshot after the restore: %q", phase)
		}
		members, code := c.EtcdStatus(t)
		checkHealthy(t, members, code, "etcd1", "etcd2", "etcd3")
		c.NodesReady(t, 3)
	})

	t.Run("upgrade: the etcd members one at a time, then the control plane and the kubelets", func(t *testing.T) {
		longOnly(t, "the upgrade of one control-plane node with a workload (TestKubeadm)")
		to := toM.KubernetesVersion
		var r upgradeResult
		underProxyClient(t, c, "the upgrade", func() {
			var stderr string
			var code int
			r, stderr, code = c.upgrade(t, "--to", to, "--yes")
			if code != 0 {
				t.Fatalf("upgrade: exit %d: %s\n%s", code, r.Error, tail(stderr, 40))
			}
		})
		t.Logf("upgrade %s to %s: control planes %+v, kubelets %+v", r.From, to, r.ControlPlanes, r.Kubelets)
		for _, h := range []string{"etcd1", "etcd2", "etcd3"} {
			if out := l.Run(t, labHost[h], "etcd --version | head -1"); !strings.Contains(out, strings.TrimPrefix(toM.EtcdVersion, "v")) {
				t.Errorf("%s: %s, want etcd %s", h, out, toM.EtcdVersion)
			}
		}
		if out := etcdctl("etcd1", "endpoint status --cluster"); strings.Count(out, ", "+strings.TrimPrefix(toM.EtcdVersion, "v")+",") != 3 {
			t.Errorf("members' versions, want %s on each:\n%s", toM.EtcdVersion, out)
		}
		if out := c.MustK(t, "get", "nodes", "-o", "jsonpath={range .items[*]}{.status.nodeInfo.kubeletVersion} {.spec.unschedulable}{\"\\n\"}{end}"); out != strings.Repeat(to+" \n", 3) {
			t.Errorf("kubelets (version, unschedulable):\n%s", out)
		}
		checkEtcdServers(t, c, "w2", "w3", "w4")
		members, code := c.EtcdStatus(t)
		checkHealthy(t, members, code, "etcd1", "etcd2", "etcd3")
	})

	t.Run("clusterctl reboot of two etcd hosts and a control-plane node: their members and API server come back by themselves", func(t *testing.T) {
		longOnly(t, "reboots of a worker and of every host at once (TestOperateUp), of workers and control-plane nodes with stacked members (TestGrowAndShrink in make test-long)")
		c.MustK(t, "create", "configmap", "before-reboot", "-n", "default")
		hosts := []string{"w2", "w3", "cp2"} // etcd1, etcd2, cp2
		before := l.BootIDs(t, hosts...)
		underProxyClient(t, c, "the reboot", func() {
			if _, stderr, code := c.Run(t, "reboot", "--yes", "--limit", "etcd1,etcd2,cp2"); code != 0 {
				t.Fatalf("reboot: exit %d\n%s", code, tail(stderr, 30))
			}
		})
		after := l.BootIDs(t, hosts...)
		for _, h := range hosts {
			if after[h] == before[h] {
				t.Errorf("%s is in the boot it was in before", h)
			}
		}
		members, code := c.EtcdStatus(t)
		checkHealthy(t, members, code, "etcd1", "etcd2", "etcd3")
		for _, h := range []string{"etcd1", "etcd2"} {
			if out := etcdctl(h, "get --keys-only --prefix /registry/configmaps/default/before-reboot"); !strings.Contains(out, "before-reboot") {
				t.Errorf("%s lacks what was written before the reboot: %q", h, out)
			}
		}
		checkNodesSchedulable(t, c)
	})

	t.Run("reset leaves the etcd hosts as they were", func(t *testing.T) {
		if _, stderr, code := c.Run(t, "reset", "--yes"); code != 0 {
			t.Fatalf("reset: exit %d\n%s", code, tail(stderr, 30))
		}
		for _, h := range []string{"etcd1", "etcd2", "etcd3"} {
			out := l.Run(t, labHost[h], "systemctl is-active etcd || true; ls /etc/systemd/system/etcd.service /usr/local/bin/etcd /var/lib/etcd /etc/kubernetes 2>&1 | grep -vc 'No such file' || true")
			if out != "inactive\n0\n" {
				t.Errorf("%s after reset: %q", h, out)
			}
		}
	})
}

// checkEtcdServers checks that every control-plane node's API server is pointed at the etcd members on
// the lab hosts members, in that order, and runs with that manifest.
func checkEtcdServers(t *testing.T, c *Cluster, members ...string) {
	t.Helper()
	addr := map[string]string{}
	for _, h := range c.Lab.Hosts {
		addr[h.Name] = h.Address
	}
	var urls []string
	for _, m := range members {
		urls = append(urls, "https://"+addr[m]+":2379")
	}
	want := "--etcd-servers=" + strings.Join(urls, ",") + "\n"
	for _, cp := range []string{"cp1", "cp2"} {
		if out := c.Lab.Run(t, cp, "grep -o -- '--etcd-servers=[^ ]*' /etc/kubernetes/manifests/kube-apiserver.yaml"); out != want {
			t.Errorf("%s's API server manifest: %q, want %q", cp, out, want)
		}
		if out := c.Lab.Run(t, cp, "tr '\\0' ' ' </proc/$(pgrep -xo kube-apiserver)/cmdline | grep -o -- '--etcd-servers=[^ ]*'"); out != want {
			t.Errorf("%s's running API server: %q, want %q", cp, out, want)
		}
	}
}

// underProxyClient runs what with a client of w1's node-local API proxy, and fails the test if a request
// of it failed: at every moment an API server answered.
func underProxyClient(t *testing.T, c *Cluster, what string, run func()) {
	t.Helper()
	const host = "w1"
	stop := StartProxyClient(t, c, host)
	run()
	ok, failed := stop()
	t.Logf("through %s's node-local proxy during %s: %d requests ok, %d failed", host, what, ok, len(failed))
	if len(failed) > 0 {
		t.Errorf("requests through the node-local proxy failed during %s:\n%s", what, strings.Join(firstTen(failed), "\n"))
	}
}
