package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/tasks/bootstrap"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/snapshots"
	"github.com/clusterctl/clusterctl/test/lab"
)

// kubeadmFallback is what kubeadm prints when it cannot read a cluster's configuration and goes on with its
// defaults; kubeadmStrict what it warns when the configuration has fields it does not know.
var kubeadmFallback = []string{"Falling back to default configuration", "Error reading configuration", "strict decoding error", "unknown field"}

// TestKubeadmDecodesClusterConfiguration runs the lab's kubeadm of each version clusterctl accepts (v1.34 to
// v1.37) on the ClusterConfiguration clusterctl writes into kubeadm-config, in every shape it takes:
// kubeadm's own decoder and validation accept it (`kubeadm config validate`).
func TestKubeadmDecodesClusterConfiguration(t *testing.T) {
	for _, v := range append(append([]string{}, lab.KubeadmOnly...), lab.UpgradeFrom, lab.KubernetesVersion) {
		t.Run(v, func(t *testing.T) { kubeadmValidates(t, v) })
	}
}

func kubeadmValidates(t *testing.T, v string) {
	kubeadm := lab.Kubeadm(t, v)
	{
		for name, cc := range map[string]bootstrap.ClusterConfig{
			"stacked etcd": {KubernetesVersion: v, ClusterName: "lab", ControlPlaneEndpoint: "10.10.0.11:6443",
				PodSubnet: "10.244.0.0/16", ServiceSubnet: "10.96.0.0/12", DNSDomain: "cluster.local", ImageRepository: "registry.k8s.io",
				EncryptionAlgorithm: "ECDSA-P256", CertValidity: 365 * 24 * time.Hour, CAValidity: 10 * 365 * 24 * time.Hour},
			"external etcd, extra arguments, SANs, RSA": {KubernetesVersion: v, ClusterName: "prod", ControlPlaneEndpoint: "api.example.com:6443",
				PodSubnet: "10.244.0.0/16", ServiceSubnet: "10.96.0.0/12", DNSDomain: "cluster.local", ImageRepository: "registry.example.com/k8s",
				EncryptionAlgorithm: "RSA-2048", CertValidity: 90 * 24 * time.Hour, CAValidity: 5 * 365 * 24 * time.Hour,
				APIServerArgs: [][2]string{{"audit-log-maxage", "30"}}, ControllerManager: [][2]string{{"node-monitor-grace-period", "50s"}},
				SchedulerArgs: [][2]string{{"v", "2"}}, CertSANs: []string{"api.example.com", "10.0.0.100"},
				EtcdServers: []string{"https://10.10.0.31:2379", "https://10.10.0.32:2379", "https://10.10.0.33:2379"}},
		} {
			cm, err := bootstrap.KubeadmConfig(cc)
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "cluster.yaml")
			if err := os.WriteFile(file, []byte(cm.Data["ClusterConfiguration"]), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(kubeadm, "config", "validate", "--config", file).CombinedOutput()
			if err != nil || containsAny(string(out), kubeadmFallback) {
				t.Errorf("kubeadm %s, %s: %v\n%s\n%s", v, name, err, out, cm.Data["ClusterConfiguration"])
			}
		}
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestKubeadm shows kubeadm operating a cluster clusterctl made, one control-plane node and a worker at
// the lab's previous version: kubeadm reads the cluster's configuration (certs check-expiration, upgrade
// plan); a third host joins by `kubeadm join` and clusterctl, once the host is in its inventory, takes it
// over (up, a no-op second up, check-expiration, a workload there); clusterctl upgrades the cluster with a
// workload and a token client running (the outage one API server means is measured; before it, an upgrade of a
// kubelet alone is refused and a dry run plans it; after it, a second run changes nothing and a downgrade is
// refused: TestUpgrade's checks, which make test leaves to make test-long), `kubeadm upgrade
// node` on a worker after it leaves the worker working, and `remove-node` removes the kubeadm-joined node.
// The cluster runs flannel: the upgrade's workload moves between nodes over its VXLAN.
func TestKubeadm(t *testing.T) {
	fromDir, fromM := lab.ArtifactsOf(t, lab.UpgradeFrom)
	toDir, toM := lab.Artifacts(t)
	from, to := fromM.KubernetesVersion, toM.KubernetesVersion
	kubeadmFrom, kubeadmTo := lab.Kubeadm(t, from), lab.Kubeadm(t, to)
	// cp1 w1 w2; cp1's etcd snapshots on a schedule: the upgrade leaves its timer running; kubeadmJoin: w2
	// joins by `kubeadm join` with a token of `kubeadm token create`, approved by the controller-manager.
	full := newCluster(t, lab.Options{Hosts: 3, ControlPlanes: 1}, fromDir, from, "  cni:\n    plugin: flannel\n  etcd:\n    snapshots: {keep: 1}\n  kubeadmJoin: true\n")
	c := full.Subset(t, "made", "cp1", "w1")
	c.Up(t)
	full.Put(t, kubeadmFrom, "/usr/local/bin/kubeadm", "cp1", "w2")
	full.Put(t, kubeadmTo, "/usr/local/bin/kubeadm-"+to, "cp1", "w1")

	t.Run("kubeadm certs check-expiration reads the cluster's configuration", func(t *testing.T) {
		out := full.Lab.Run(t, "cp1", "kubeadm certs check-expiration 2>&1")
		if containsAny(out, kubeadmFallback) || strings.Contains(out, "MISSING") {
			t.Errorf("kubeadm did not read the cluster's configuration or misses a file:\n%s", out)
		}
		for _, want := range []string{"admin.conf", "super-admin.conf", "apiserver-etcd-client", "etcd-server", "front-proxy-client", "CERTIFICATE AUTHORITY"} {
			if !strings.Contains(out, want) {
				t.Errorf("check-expiration does not list %s:\n%s", want, out)
			}
		}
		t.Logf("kubeadm %s certs check-expiration:\n%s", from, out)
	})

	t.Run("kubeadm upgrade plan names the version to upgrade to", func(t *testing.T) {
		out, err := full.Lab.SSH("", "cp1", "kubeadm-"+to+" upgrade plan "+to+" 2>&1")
		if err != nil || !strings.Contains(out, "kubeadm upgrade apply "+to) || containsAny(out, kubeadmFallback) {
			t.Errorf("kubeadm %s upgrade plan %s: %v\n%s", to, to, err, out)
		}
		t.Logf("kubeadm %s upgrade plan:\n%s", to, tail(out, 40))
	})

	t.Run("a host joined by kubeadm join is taken over by clusterctl", func(t *testing.T) {
		join := strings.TrimSpace(full.Lab.Run(t, "cp1", "kubeadm token create --ttl 10m --print-join-command"))
		if !strings.HasPrefix(join, "kubeadm join ") || !strings.Contains(join, "--discovery-token-ca-cert-hash sha256:") {
			t.Fatalf("join command: %q", join)
		}
		prepareForKubeadm(t, full, "w1", "w2")
		// The lab's hosts are containers: kubeadm's kernel and system checks do not apply to them (clusterctl's
		// preflight, which knows containers, runs its own on w2 below).
		if out, err := full.Lab.SSH("", "w2", join+" --ignore-preflight-errors=all 2>&1"); err != nil {
			t.Fatalf("%s: %v\n%s", join, err, out)
		}
		full.MustWait(t, "node/w2", "jsonpath={.spec.podCIDR}", 60*time.Second)
		clientCert := full.Lab.Run(t, "w2", "sha256sum /var/lib/kubelet/pki/kubelet-client-current.pem")

		// In the inventory, w2 is taken over: up writes its configuration and gives it the pod network.
		res := full.Up(t)
		for _, n := range res.Nodes {
			if !n.Ready {
				t.Errorf("node %s not Ready after up", n.Name)
			}
		}
		if got := full.Lab.Run(t, "w2", "sha256sum /var/lib/kubelet/pki/kubelet-client-current.pem"); got != clientCert {
			t.Errorf("w2's kubelet client certificate changed: it should keep the one kubeadm join got")
		}
		full.LoadProbe(t, "w2")
		full.ProbePodOn(t, "on-w2", "w2")
		// kubectl logs reaches w2's kubelet: it serves with a certificate clusterctl approved.
		full.MustK(t, "logs", "on-w2")

		before := full.Hash(t, "w2") + full.Lab.Run(t, "w2", "systemctl show -p ActiveEnterTimestampMonotonic kubelet containerd")
		full.Up(t)
		if after := full.Hash(t, "w2") + full.Lab.Run(t, "w2", "systemctl show -p ActiveEnterTimestampMonotonic kubelet containerd"); after != before {
			t.Errorf("a second up changed w2's files or restarted its kubelet or containerd")
		}

		stdout, stderr, code := full.Run(t, "certs", "check-expiration", "--output", "json")
		if code != 0 || !strings.Contains(stdout, `"host":"w2"`) {
			t.Errorf("certs check-expiration: exit %d, w2 not listed\n%s\n%s", code, tail(stdout, 20), tail(stderr, 20))
		}
	})

	target := []string{"--to", to, "--artifacts", toDir}
	// upgrade's hooks, inside each node's drain window: they write the point, the host, the node's
	// schedulability and the kubelet's version there (the old one before, the new one after)
	hook := `'echo "$CLUSTERCTL_COMMAND.$CLUSTERCTL_HOOK $CLUSTERCTL_HOST $(` + kubeadm.Binary("kubelet") + ` --version)" >>` + hookLog + `'`
	writeFile(t, full.Inventory, "hooks:\n  upgrade: {before: ["+hook+"], after: ["+hook+"]}\n"+string(readFile(t, full.Inventory)))
	t.Run("upgrade refused before anything changes: kubelets before the control plane", func(t *testing.T) {
		upgradeRefusesKubeletsFirst(t, full, target, "w1", from)
	})

	t.Run("a PodDisruptionBudget that allows no disruption blocks the upgrade, named", func(t *testing.T) {
		upgradeBlockedByPDB(t, full, target, "w1", "registry.k8s.io/pause:"+fromM.PauseVersion)
	})

	t.Run("upgrade dry run: the plan, nothing changed", func(t *testing.T) {
		upgradeDryRun(t, full, target, from, to, "cp1", "(workers batch 1 of ")
		r, _, _ := full.upgrade(t, append(target, "--dry-run")...)
		if plan := strings.Join(r.Order, "\n"); !strings.Contains(plan, `w2 (workers batch 2 of 2): cordon, drain (up to 5m0s), hook upgrade.before "echo`) {
			t.Errorf("the plan does not show the hooks in the drain window:\n%s", plan)
		}
	})

	t.Run("clusterctl upgrade with one control-plane node: the workload never fails", func(t *testing.T) {
		full.LoadProbe(t, "cp1", "w1")
		StartMovingClients(t, full)
		full.KeepSecret(t)
		data, err := os.ReadFile(full.Inventory)
		if err != nil {
			t.Fatal(err)
		}
		inv := strings.Replace(strings.Replace(string(data), "kubernetesVersion: "+from, "kubernetesVersion: "+to, 1),
			"artifacts: "+fromDir, "artifacts: "+toDir, 1)
		if err := os.WriteFile(full.Inventory, []byte(inv), 0o644); err != nil {
			t.Fatal(err)
		}
		timer := "systemctl show -p ActiveState,ActiveEnterTimestampMonotonic " + snapshots.TimerName
		timerBefore := full.Lab.Run(t, "cp1", timer)
		r, stderr, code := full.upgrade(t, "--yes")
		if code != 0 {
			t.Fatalf("upgrade: exit %d: %s\n%s", code, r.Error, tail(stderr, 40))
		}
		t.Logf("upgraded %s to %s: control plane %+v, kubelets %+v", r.From, r.To, r.ControlPlanes, r.Kubelets)
		backupKept(t, full, r)
		if after := full.Lab.Run(t, "cp1", timer); after != timerBefore || !strings.Contains(after, "ActiveState=active\n") {
			t.Errorf("cp1's etcd snapshots' timer before the upgrade:\n%safter:\n%s(stopped and started again, or not running)", timerBefore, after)
		}
		for _, h := range []string{"cp1", "w1", "w2"} {
			want := "upgrade.before " + h + " Kubernetes " + from + "\nupgrade.after " + h + " Kubernetes " + to
			if got := strings.TrimSpace(full.Lab.Run(t, h, "cat "+hookLog+"; rm -f "+hookLog)); got != want {
				t.Errorf("%s's upgrade hooks:\n%s\nwant:\n%s", h, got, want)
			}
		}
		if out := full.MustK(t, "get", "nodes", "-o", "jsonpath={range .items[*]}{.status.nodeInfo.kubeletVersion} {.spec.unschedulable}{\"\\n\"}{end}"); out != strings.Repeat(to+" \n", 3) {
			t.Errorf("kubelets (version, unschedulable):\n%s", out)
		}
		time.Sleep(3 * time.Second)
		o := ClientOutcomes(t, full, "cp1", "w1", "w2")
		var longest time.Duration
		for _, d := range o.Outages {
			longest = max(longest, d)
		}
		t.Logf("one control-plane node: token client %d ok (%d retries), %d failed; outages %v (longest %s)", o.OK, o.Retried, len(o.Failed), o.Outages, longest)
		if o.OK == 0 {
			t.Error("no request of the token client succeeded")
		}
		if longest > maxSingleAPIServerOutage {
			t.Errorf("an outage of %s, longer than %s", longest.Round(100*time.Millisecond), maxSingleAPIServerOutage)
		}
		for _, f := range o.Failed {
			// The single API server restarting is an outage; the workload unreachable is a failure.
			if strings.Contains(f, "fail web") {
				t.Errorf("workload: %s", f)
			}
		}
	})

	t.Run("the upgrade kept encryption at rest, the audit log and admission settings", func(t *testing.T) { full.StillHardened(t, "cp1") })

	t.Run("a second upgrade changes nothing; a downgrade is refused", func(t *testing.T) {
		upgradeAgainAndDowngrade(t, full, target, "cp1", from, fromDir)
	})

	t.Run("kubeadm after the upgrade: check-expiration, upgrade plan, upgrade node on a worker", func(t *testing.T) {
		out := full.Lab.Run(t, "cp1", "kubeadm-"+to+" certs check-expiration 2>&1")
		if containsAny(out, kubeadmFallback) {
			t.Errorf("kubeadm %s did not read the cluster's configuration:\n%s", to, out)
		}
		// With a version named kubeadm asks no release server (the lab has no internet).
		if out, err := full.Lab.SSH("", "cp1", "kubeadm-"+to+" upgrade plan "+to+" 2>&1"); err != nil || containsAny(out, kubeadmFallback) || !strings.Contains(out, "Cluster version: "+strings.TrimPrefix(to, "v")) {
			t.Errorf("kubeadm %s upgrade plan: %v\n%s", to, err, out)
		}
		// SystemVerification: this machine's hosts use cgroup v1, which kubeadm refuses from v1.35 unless told.
		out, err := full.Lab.SSH("", "w1", "kubeadm-"+to+" upgrade node --ignore-preflight-errors=SystemVerification 2>&1 && systemctl restart kubelet")
		if err != nil || containsAny(out, kubeadmFallback) {
			t.Fatalf("kubeadm %s upgrade node on w1: %v\n%s", to, err, out)
		}
		t.Logf("kubeadm upgrade node on w1:\n%s", tail(out, 15))
		full.MustK(t, "wait", "--for=condition=Ready", "node/w1", "--timeout=90s")
		full.ProbePodOn(t, "on-w1", "w1")
		// clusterctl's next run puts back what it manages and leaves the node working.
		full.Up(t)
		full.MustK(t, "wait", "--for=condition=Ready", "node/w1", "--timeout=90s")
	})

	t.Run("remove-node removes the node kubeadm joined", func(t *testing.T) {
		if _, stderr, code := full.Run(t, "remove-node", "--yes", "w2"); code != 0 {
			t.Fatalf("remove-node w2: exit %d\n%s", code, tail(stderr, 30))
		}
		if out, _ := full.K(t, "", "get", "node", "w2", "-o", "name"); out != "" {
			t.Errorf("node w2 still there: %s", out)
		}
		if out := full.Lab.Run(t, "w2", "ls /etc/kubernetes /var/lib/kubelet 2>/dev/null | grep -c . || true"); strings.TrimSpace(out) != "0" {
			t.Errorf("w2 keeps files of the cluster:\n%s", out)
		}
	})
}

// prepareForKubeadm makes host what an operator prepares for `kubeadm join`: containerd, runc, the CNI
// plugins, crictl and the kubelet with its systemd unit and kubeadm's drop-in, the kernel settings, and the
// images a worker runs (pause, kube-proxy) imported; all taken from model, a node clusterctl made (the
// artifacts' binaries, the lab's runtime configuration). Nothing of the cluster (no /etc/kubernetes, no
// kubelet configuration or credentials).
func prepareForKubeadm(t testing.TB, c *Cluster, model, host string) {
	t.Helper()
	paths := "usr/local/bin/kubelet usr/local/bin/containerd usr/local/bin/containerd-shim-runc-v2 usr/local/bin/ctr usr/local/bin/crictl " +
		"usr/local/sbin/runc opt/cni/bin etc/systemd/system/containerd.service etc/systemd/system/kubelet.service " +
		"etc/systemd/system/kubelet.service.d etc/containerd/config.toml etc/crictl.yaml etc/sysctl.d/99-kubernetes.conf " +
		"etc/modules-load.d/kubernetes.conf var/lib/clusterctl/images"
	pack := exec.Command("ssh", "-F", c.Lab.SSHConfig(), model, "tar -C / -cf - "+paths)
	unpack := exec.Command("ssh", "-F", c.Lab.SSHConfig(), host, "tar -C / -xf -")
	pipe, err := pack.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	unpack.Stdin = pipe
	var packErr, unpackErr strings.Builder
	pack.Stderr, unpack.Stderr = &packErr, &unpackErr
	if err := pack.Start(); err != nil {
		t.Fatal(err)
	}
	if err := unpack.Run(); err != nil {
		t.Fatalf("unpacking on %s: %v\n%s", host, err, unpackErr.String())
	}
	if err := pack.Wait(); err != nil {
		t.Fatalf("packing on %s: %v\n%s", model, err, packErr.String())
	}
	c.Lab.Run(t, host, "sysctl -q --system >/dev/null 2>&1; systemctl daemon-reload && systemctl enable -q containerd kubelet && systemctl restart containerd && "+
		"for f in /var/lib/clusterctl/images/*.tar; do ctr -n k8s.io images import \"$f\" >/dev/null || exit 1; done && rm -rf /var/lib/clusterctl")
}
