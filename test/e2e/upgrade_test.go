package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/tasks/etcdmember"
	"github.com/clusterctl/clusterctl/test/lab"
)

// upgradeResult is the part of `clusterctl upgrade --output json`'s result the tests read.
type upgradeResult struct {
	Type, Status, Error string
	From, To            string
	Resumed             bool
	Order               []string
	ControlPlanes       []struct {
		Name       string
		DurationMS int64 `json:"duration_ms"`
	}
	Kubelets []struct {
		Name       string
		DurationMS int64 `json:"duration_ms"`
	}
	Nodes      []struct{ Name, Version string }
	Preflight  json.RawMessage
	RolledBack []string
	Path       []string
	Hops       []upgradeResult
	Phases     []struct {
		Name       string
		DurationMS int64 `json:"duration_ms"`
	}
	Readiness []struct{ Severity, Check, Object, Message string }
	Backup    *struct {
		File string
		Size int64
	}
}

// backupKept checks that an upgrade took its etcd snapshot into the state directory, 0600, whole (its
// integrity hash checks) and holding a store (a revision).
func backupKept(t *testing.T, c *Cluster, r upgradeResult) {
	t.Helper()
	if r.Backup == nil || filepath.Dir(r.Backup.File) != filepath.Join(c.StateDir, "runs") {
		t.Fatalf("the upgrade's etcd snapshot: %+v (want one under %s)", r.Backup, filepath.Join(c.StateDir, "runs"))
	}
	st, err := os.Stat(r.Backup.File)
	if err != nil || st.Mode().Perm() != 0o600 || st.Size() != r.Backup.Size || st.Size() < 1<<20 {
		t.Errorf("the snapshot %s: %v %v (result says %d bytes)", r.Backup.File, st, err, r.Backup.Size)
	}
	if _, _, err := etcdmember.VerifySnapshot(r.Backup.File); err != nil {
		t.Errorf("the snapshot's integrity: %v", err)
	}
	rev, err := etcdmember.SnapshotRevision(r.Backup.File)
	if err != nil || rev == 0 {
		t.Errorf("the snapshot's revision: %d %v", rev, err)
	}
	t.Logf("etcd snapshot before the upgrade: %s, %d bytes, revision %d", r.Backup.File, r.Backup.Size, rev)
}

// upgradeBlockedByPDB puts a one-replica Deployment on node under a PodDisruptionBudget that allows no
// disruption: the upgrade's dry run exits 1 naming the budget (its readiness report's blocker), and
// --force names what it overrides; the budget and the Deployment are removed after.
func upgradeBlockedByPDB(t *testing.T, c *Cluster, target []string, node, pauseImage string) {
	t.Helper()
	objs := `apiVersion: apps/v1
kind: Deployment
metadata: {name: guarded, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: guarded}}
  template:
    metadata: {labels: {app: guarded}}
    spec:
      nodeSelector: {kubernetes.io/hostname: ` + node + `}
      containers: [{name: pause, image: "` + pauseImage + `", imagePullPolicy: Never,
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}, runAsNonRoot: true, runAsUser: 65535, seccompProfile: {type: RuntimeDefault}}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: guarded, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: guarded}}
`
	if _, err := c.K(t, objs, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.K(t, objs, "delete", "--wait", "-f", "-") }()
	c.MustWait(t, "deployment/guarded", "condition=Available", 2*time.Minute)
	// the budget's status follows the Pod: wait until it says no disruption is allowed
	deadline := time.Now().Add(time.Minute)
	for c.MustK(t, "get", "pdb", "guarded", "-o", "jsonpath={.status.currentHealthy}/{.status.disruptionsAllowed}") != "1/0" {
		if time.Now().After(deadline) {
			t.Fatal("the PodDisruptionBudget's status never said 1 healthy, 0 disruptions allowed")
		}
		time.Sleep(time.Second)
	}
	r, stderr, code := c.upgrade(t, append(target, "--dry-run")...)
	if code != 1 || !strings.Contains(r.Error, "PodDisruptionBudget default/guarded: allows no disruption") || !strings.Contains(r.Error, "Pod guarded-") {
		t.Fatalf("dry run with a blocking budget: exit %d, error %q\n%s", code, r.Error, tail(stderr, 20))
	}
	found := false
	for _, f := range r.Readiness {
		found = found || f.Severity == "blocker" && f.Check == "pdb" && f.Object == "PodDisruptionBudget default/guarded"
	}
	if !found {
		t.Errorf("the readiness report lacks the budget: %+v", r.Readiness)
	}
	t.Logf("dry run refused: %s", r.Error)
	r, _, code = c.upgrade(t, append(target, "--dry-run", "--force")...)
	if code != 0 || len(r.Order) == 0 {
		t.Errorf("dry run with --force: exit %d, %s", code, r.Error)
	}
}

// PreflightText is the preflight report as JSON text.
func (r upgradeResult) PreflightText() string { return string(r.Preflight) }

func (c *Cluster) upgrade(t testing.TB, args ...string) (upgradeResult, string, int) {
	t.Helper()
	stdout, stderr, code := c.Run(t, append([]string{"upgrade", "--output", "json"}, args...)...)
	var r upgradeResult
	if err := json.Unmarshal([]byte(lastLine(stdout)), &r); err != nil || r.Type != "upgrade_result" {
		t.Fatalf("upgrade: exit %d, no result (%v)\n%s\n%s", code, err, tail(stderr, 30), tail(stdout, 10))
	}
	return r, stderr, code
}

// TestUpgrade upgrades three control-plane nodes (node-local proxies) and a worker from the lab's previous
// minor version while a workload behind a Service and a token client run, and a client uses w1's
// node-local proxy throughout; the upgrade is killed in the middle of the control-plane roll and the same
// command finishes it.
func TestUpgrade(t *testing.T) {
	longOnly(t, "the upgrade of one control-plane node and two workers, its refusals, dry run and second run (TestKubeadm)")
	fromDir, fromM := lab.ArtifactsOf(t, lab.UpgradeFrom)
	toDir, toM := lab.Artifacts(t)
	from, to := fromM.KubernetesVersion, toM.KubernetesVersion
	c := newCluster(t, lab.Options{Hosts: 4, ControlPlanes: 3}, fromDir, from, "") // cp1 cp2 cp3 w1
	c.Up(t)
	all := []string{"cp1", "cp2", "cp3", "w1"}
	c.LoadProbe(t, all...)
	StartMovingClients(t, c)
	target := []string{"--to", to, "--artifacts", toDir}

	t.Run("refused before anything changes: kubelets before the control plane", func(t *testing.T) {
		upgradeRefusesKubeletsFirst(t, c, target, "w1", from)
	})

	t.Run("dry run: the plan, nothing changed", func(t *testing.T) {
		upgradeDryRun(t, c, target, from, to, "cp3", "w1 (workers batch 1 of 1): cordon, drain")
	})

	t.Run("a control-plane node whose new API server fails is put back, then the one rolled before", func(t *testing.T) {
		upgradeRolledBack(t, c, target, from, "cp2")
	})

	stopProxy := StartProxyClient(t, c, "w1")
	t.Run("killed during the control-plane roll, the same command finishes", func(t *testing.T) {
		c.RunKilled(t, "control-plane", 25*time.Second, append([]string{"upgrade", "--yes"}, target...)...)
		if _, err := os.Stat(filepath.Join(c.StateDir, "runs", "upgrade.json")); err != nil {
			t.Fatalf("no record of the killed upgrade: %v", err)
		}
		start := time.Now()
		r, stderr, code := c.upgrade(t, append(target, "--yes")...)
		if code != 0 {
			t.Fatalf("resumed upgrade: exit %d: %s\n%s", code, r.Error, tail(stderr, 40))
		}
		if !r.Resumed || r.From != from {
			t.Errorf("result: %+v", r)
		}
		t.Logf("resumed upgrade done in %s: control planes %+v, kubelets %+v", time.Since(start).Round(time.Second), r.ControlPlanes, r.Kubelets)
		if _, err := os.Stat(filepath.Join(c.StateDir, "runs", "upgrade.json")); !os.IsNotExist(err) {
			t.Errorf("the record of the upgrade is still there: %v", err)
		}
	})
	ok, failed := stopProxy()

	t.Run("every node, static Pod and add-on at the new version", func(t *testing.T) {
		if out := c.MustK(t, "get", "nodes", "-o", "jsonpath={range .items[*]}{.status.nodeInfo.kubeletVersion} {.spec.unschedulable}{\"\\n\"}{end}"); out != strings.Repeat(to+" \n", 4) {
			t.Errorf("kubelets (version, unschedulable):\n%s", out)
		}
		images := c.MustK(t, "-n", "kube-system", "get", "pods", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.containers[0].image}{\"\\n\"}{end}")
		for _, line := range strings.Split(strings.TrimSpace(images), "\n") {
			name, image, _ := strings.Cut(line, " ")
			var want string
			switch {
			case strings.HasPrefix(name, "etcd-"):
				want = ":" + strings.TrimPrefix(toM.EtcdVersion, "v") + "-0"
			case strings.HasPrefix(name, "coredns-"):
				want = ":" + toM.CoreDNSVersion
			case strings.HasPrefix(name, "kube-"):
				want = ":" + to
			default:
				continue
			}
			// by tag and digest: the image the new version's artifacts hold, nothing else under its tag
			if !strings.Contains(image, want+"@sha256:") {
				t.Errorf("%s runs %s, want %s@sha256:...", name, image, want)
			}
		}
		if cm := c.MustK(t, "-n", "kube-system", "get", "cm", "kubeadm-config", "-o", "jsonpath={.data.ClusterConfiguration}"); !strings.Contains(cm, "kubernetesVersion: "+to) {
			t.Errorf("kubeadm-config: %s", cm)
		}
		for _, h := range []string{"cp1", "w1"} {
			if out := c.Lab.Run(t, h, "kubelet --version"); !strings.Contains(out, to) {
				t.Errorf("%s: kubelet --version: %s", h, out)
			}
		}
	})

	t.Run("no failed request through w1's node-local proxy, none for the workload", func(t *testing.T) {
		t.Logf("through w1's node-local proxy: %d requests ok, %d failed", ok, len(failed))
		if ok == 0 || len(failed) > 0 {
			t.Errorf("requests failed through w1's proxy during the upgrade:\n%s", strings.Join(firstTen(failed), "\n"))
			t.Logf("w1's node-local proxy (backends up and down):\n%s", ProxyLog(t, c, "w1"))
		}
		time.Sleep(3 * time.Second)
		o := ClientOutcomes(t, c, all...)
		t.Logf("token client and workload during the upgrade: %d ok (%d retries), %d failed; outages %v", o.OK, o.Retried, len(o.Failed), o.Outages)
		if o.OK == 0 || len(o.Failed) > 0 {
			t.Errorf("the token client or the workload failed during the upgrade:\n%s", strings.Join(firstTen(o.Failed), "\n"))
		}
	})

	t.Run("a second run changes nothing; a downgrade is refused", func(t *testing.T) {
		upgradeAgainAndDowngrade(t, c, target, "cp2", from, fromDir)
	})
}

// upgradeRolledBack makes failing's new API server fail (an inventory for the upgrade whose API server
// mounts a file that only the other control-plane nodes have, as a File hostPath: the kubelet never starts
// its Pod there) and checks that the upgrade puts failing back, then the control-plane node rolled before
// it, exits 1 saying so, and leaves every static Pod and kubelet at from, the journal and the kept files
// gone, its snapshot kept; and that no request through w1's node-local proxy failed meanwhile.
func upgradeRolledBack(t *testing.T, c *Cluster, target []string, from, failing string) {
	t.Helper()
	const probe = "/etc/clusterctl-e2e-rollback-probe"
	for _, h := range []string{"cp1", "cp2", "cp3"} {
		if h != failing {
			c.Lab.Run(t, h, "touch "+probe)
		}
	}
	sabotaged := c.Variant(t, "rollback", `  apiServer:
    extraVolumes:
      - {name: e2e-probe, hostPath: `+probe+`, mountPath: `+probe+`, readOnly: true, pathType: File}
`)
	stop := StartProxyClient(t, c, "w1")
	start := time.Now()
	r, stderr, code := sabotaged.upgrade(t, append(target, "--yes", "--node-timeout", "2m")...)
	took := time.Since(start)
	ok, failed := stop()
	if code != 1 || !strings.Contains(r.Error, "upgrade rolled back") || !strings.Contains(r.Error, failing+":") {
		t.Fatalf("upgrade with %s's API server failing: exit %d, %s: %s\n%s", failing, code, r.Status, r.Error, tail(stderr, 40))
	}
	t.Logf("rolled back in %s: %s", took.Round(time.Second), r.Error)
	if strings.Join(r.RolledBack, ",") != failing+",cp1" {
		t.Errorf("rolled back %v, want %s then cp1", r.RolledBack, failing)
	}
	for _, p := range r.Phases {
		t.Logf("phase %s: %.1fs", p.Name, float64(p.DurationMS)/1000)
	}
	images := c.MustK(t, "-n", "kube-system", "get", "pods", "-l", "tier=control-plane", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.containers[0].image} {.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}")
	for _, line := range strings.Split(strings.TrimSpace(images), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || strings.HasPrefix(f[0], "kube-") && !strings.Contains(f[1], ":"+from) || f[2] != "True" {
			t.Errorf("after the rollback: %s", line)
		}
	}
	if out := c.MustK(t, "get", "nodes", "-o", "jsonpath={range .items[*]}{.status.nodeInfo.kubeletVersion} {.spec.unschedulable}{\"\\n\"}{end}"); out != strings.Repeat(from+" \n", 4) {
		t.Errorf("kubelets after the rollback (version, unschedulable):\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(c.StateDir, "runs", "upgrade.json")); !os.IsNotExist(err) {
		t.Errorf("the journal of the rolled back upgrade is still there: %v", err)
	}
	if r.Backup == nil {
		t.Error("no etcd snapshot taken before the upgrade")
	} else if _, err := os.Stat(r.Backup.File); err != nil {
		t.Errorf("the snapshot taken before: %v", err)
	}
	for _, h := range []string{"cp1", failing} {
		if out := c.Lab.Run(t, h, "ls -A /var/lib/clusterctl/rollback 2>/dev/null; true"); strings.TrimSpace(out) != "" {
			t.Errorf("%s still keeps files for a rollback: %s", h, out)
		}
	}
	t.Logf("through w1's node-local proxy during the failed upgrade and its rollback: %d requests ok, %d failed", ok, len(failed))
	if ok == 0 || len(failed) > 0 {
		t.Errorf("requests failed through w1's proxy:\n%s", strings.Join(firstTen(failed), "\n"))
		t.Logf("w1's node-local proxy (backends up and down):\n%s", ProxyLog(t, c, "w1"))
	}
	r, _, code = c.upgrade(t, "--rollback", "--yes")
	if code != 1 || !strings.Contains(r.Error, "no upgrade is under way") {
		t.Errorf("upgrade --rollback with nothing under way: exit %d, %s", code, r.Error)
	}
}

// Variant writes an inventory beside the cluster's with settings (YAML lines indented by two spaces) added
// to its cluster section, and returns a Cluster that uses it (same hosts, same state directory).
func (c *Cluster) Variant(t testing.TB, name, settings string) *Cluster {
	t.Helper()
	v := *c
	v.Inventory = filepath.Join(filepath.Dir(c.Inventory), name+".yaml")
	data, err := os.ReadFile(c.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(v.Inventory, data, 0o644); err != nil {
		t.Fatal(err)
	}
	v.AddSettings(t, settings)
	return &v
}

// upgradeRefusesKubeletsFirst checks that an upgrade of worker's kubelet alone (--limit), before the control
// plane, is refused and changes nothing.
func upgradeRefusesKubeletsFirst(t *testing.T, c *Cluster, target []string, worker, from string) {
	t.Helper()
	r, stderr, code := c.upgrade(t, append(target, "--yes", "--limit", worker)...)
	if code != 1 || r.Status != "refused" || !strings.Contains(r.Error, "newer than an API server") {
		t.Fatalf("upgrade --limit %s before the control plane: exit %d, %s: %s\n%s", worker, code, r.Status, r.Error, tail(stderr, 10))
	}
	if v := c.MustK(t, "get", "node", worker, "-o", "jsonpath={.status.nodeInfo.kubeletVersion}"); v != from {
		t.Errorf("%s's kubelet: %s", worker, v)
	}
}

// upgradeDryRun checks an upgrade's dry run: the plan goes through etcd and the API server of every
// control-plane node (lastCP the last), then the add-ons, then the kubelets (a step of which is worker), and
// nothing is recorded.
func upgradeDryRun(t *testing.T, c *Cluster, target []string, from, to, lastCP, worker string) {
	t.Helper()
	r, _, code := c.upgrade(t, append(target, "--dry-run")...)
	if code != 0 || r.From != from || r.To != to {
		t.Fatalf("dry run: exit %d, %+v", code, r)
	}
	plan := strings.Join(r.Order, "\n")
	t.Logf("plan:\n%s", plan)
	for _, want := range []string{"cp1: etcd", lastCP + ": kube-apiserver", "add-ons: kube-proxy", worker} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan lacks %q", want)
		}
	}
	if strings.Index(plan, lastCP+": kube-apiserver") > strings.Index(plan, "add-ons") || strings.Index(plan, "add-ons") > strings.Index(plan, "cp1: cordon") {
		t.Errorf("the plan's order is not control planes, add-ons, kubelets")
	}
	if _, err := os.Stat(filepath.Join(c.StateDir, "runs", "upgrade.json")); !os.IsNotExist(err) {
		t.Errorf("a dry run recorded an upgrade: %v", err)
	}
}

// upgradeAgainAndDowngrade checks, after an upgrade, that the same upgrade again changes nothing (host's
// files the same) and that going back to from is refused by preflight.
func upgradeAgainAndDowngrade(t *testing.T, c *Cluster, target []string, host, from, fromDir string) {
	t.Helper()
	before := c.Hash(t, host)
	r, stderr, code := c.upgrade(t, append(target, "--yes")...)
	if code != 0 || len(r.ControlPlanes)+len(r.Kubelets) != 0 {
		t.Errorf("second upgrade: exit %d, %+v\n%s", code, r, tail(stderr, 20))
	}
	if after := c.Hash(t, host); after != before {
		t.Errorf("a second upgrade changed %s's files", host)
	}
	// Preflight finds the kubelets newer than the target first (kubeadm's KubeletVersion check).
	r, _, code = c.upgrade(t, "--to", from, "--artifacts", fromDir, "--yes")
	if code != 1 || !strings.Contains(r.Error, "preflight found errors") || !strings.Contains(r.PreflightText(), "the kubelet version is higher than the control plane version") {
		t.Errorf("downgrade: exit %d, %s: %s; preflight %s", code, r.Status, r.Error, r.PreflightText())
	}
}

// StartMovingClients starts, as StartClients does, a workload (two replicas behind a Service, a
// PodDisruptionBudget keeping one) and a token client, free to run on any node (control-plane ones too),
// so that drains move them and they keep serving.
func StartMovingClients(t testing.TB, c *Cluster) {
	t.Helper()
	startClients(t, c, `tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]`,
		`topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: web}}}]`, "")
	if _, err := c.K(t, `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
`, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// startClients starts the workload (two replicas of "probe serve" behind the Service web, Ready by a
// readiness probe) and the token client ("probe api", logging to /var/log/probe on its node), placed by
// placement (a line of their Pod specs), the workload's Pods also by spread, its Deployment updated by
// strategy (a line of its spec; "" is the default rolling update); it waits until the client has
// succeeded and empties its log.
func startClients(t testing.TB, c *Cluster, placement, spread, strategy string) {
	t.Helper()
	c.Privileged(t, "default") // the token client logs to a host path
	readiness := ", readinessProbe: {httpGet: {port: 8080}, periodSeconds: 1}"
	if _, err := c.K(t, `apiVersion: v1
kind: ServiceAccount
metadata: {name: sa-client, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: sa-client, namespace: default}
rules: [{apiGroups: [""], resources: [configmaps], resourceNames: [kube-root-ca.crt], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: sa-client, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: sa-client}
subjects: [{kind: ServiceAccount, name: sa-client, namespace: default}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  `+strategy+`
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      `+placement+`
      `+spread+`
      containers: [{name: probe, image: `+ProbeImage+`, imagePullPolicy: Never, args: [serve]`+readiness+`}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{port: 8080}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: sa-client, namespace: default}
spec:
  replicas: 1
  strategy: {rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}
  selector: {matchLabels: {app: sa-client}}
  template:
    metadata: {labels: {app: sa-client}}
    spec:
      serviceAccountName: sa-client
      `+placement+`
      containers:
      - name: probe
        image: `+ProbeImage+`
        imagePullPolicy: Never
        args: [api, 200ms, web, /log/$(POD_NAME).log]
        env: [{name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
        volumeMounts: [{name: log, mountPath: /log}]
      volumes: [{name: log, hostPath: {path: /var/log/probe, type: DirectoryOrCreate}}]
`, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	c.MustK(t, "rollout", "status", "deploy/web", "deploy/sa-client", "--timeout=90s")
	deadline := time.Now().Add(60 * time.Second)
	for {
		node := c.MustK(t, "get", "pods", "-l", "app=sa-client", "-o", "jsonpath={.items[0].spec.nodeName}")
		if node != "" && strings.Contains(c.Lab.Run(t, node, "cat /var/log/probe/*.log 2>/dev/null | tail -1; true"), " ok") {
			c.Lab.Run(t, node, "truncate -s0 /var/log/probe/*.log")
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the token client has not succeeded on %q", node)
		}
		time.Sleep(time.Second)
	}
}

// TestUpgradeMinors upgrades a 1+1 cluster two minor versions in one run (lab.MinorsFrom to the lab's
// version, through lab.UpgradeFrom, each with its artifacts given): the dry run shows the path; the run
// does each hop whole (its snapshot, its control plane, its kubelets) before the next, and ends with every
// Node and static Pod at the target.
func TestUpgradeMinors(t *testing.T) {
	longOnly(t, "the upgrade of one minor version (TestKubeadm)")
	oldDir, oldM := lab.ArtifactsOf(t, lab.MinorsFrom)
	midDir, midM := lab.ArtifactsOf(t, lab.UpgradeFrom)
	toDir, toM := lab.Artifacts(t)
	old, mid, to := oldM.KubernetesVersion, midM.KubernetesVersion, toM.KubernetesVersion
	c := newCluster(t, lab.Options{Hosts: 2, ControlPlanes: 1}, oldDir, old, "")
	c.Up(t)
	target := []string{"--to", to, "--artifacts", midDir, "--artifacts", toDir}
	path := strings.Join([]string{old, mid, to}, " ")

	r, stderr, code := c.upgrade(t, append(target, "--dry-run")...)
	if code != 0 || strings.Join(r.Path, " ") != path || !strings.Contains(strings.Join(r.Order, "\n"), "then to "+to) {
		t.Fatalf("dry run of %s: exit %d, path %v, order %v: %s\n%s", path, code, r.Path, r.Order, r.Error, tail(stderr, 20))
	}
	t.Logf("dry run: path %v, %d steps of the first hop", r.Path, len(r.Order))

	start := time.Now()
	r, stderr, code = c.upgrade(t, append(target, "--yes")...)
	if code != 0 {
		t.Fatalf("upgrade %s: exit %d: %s\n%s", path, code, r.Error, tail(stderr, 40))
	}
	t.Logf("upgraded %s in %s", path, time.Since(start).Round(time.Second))
	if strings.Join(r.Path, " ") != path || len(r.Hops) != 2 || r.From != old || r.To != to {
		t.Fatalf("result: path %v, %d hops, from %s to %s", r.Path, len(r.Hops), r.From, r.To)
	}
	for i, h := range r.Hops {
		if want := [][2]string{{old, mid}, {mid, to}}[i]; h.From != want[0] || h.To != want[1] {
			t.Errorf("hop %d: %s to %s, want %s to %s", i+1, h.From, h.To, want[0], want[1])
		}
		if h.Backup == nil {
			t.Errorf("hop %d took no etcd snapshot", i+1)
		}
		var phases []string
		for _, p := range h.Phases {
			phases = append(phases, fmt.Sprintf("%s %.1fs", p.Name, float64(p.DurationMS)/1000))
		}
		t.Logf("hop %d (%s to %s): %s", i+1, h.From, h.To, strings.Join(phases, ", "))
	}
	if out := c.MustK(t, "get", "nodes", "-o", "jsonpath={range .items[*]}{.status.nodeInfo.kubeletVersion} {.spec.unschedulable}{\"\\n\"}{end}"); out != strings.Repeat(to+" \n", 2) {
		t.Errorf("kubelets (version, unschedulable):\n%s", out)
	}
	images := c.MustK(t, "-n", "kube-system", "get", "pods", "-l", "tier=control-plane", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.containers[0].image}{\"\\n\"}{end}")
	for _, line := range strings.Split(strings.TrimSpace(images), "\n") {
		if name, image, _ := strings.Cut(line, " "); strings.HasPrefix(name, "kube-") && !strings.Contains(image, ":"+to+"@sha256:") {
			t.Errorf("%s runs %s, want %s", name, image, to)
		}
	}
	if _, err := os.Stat(filepath.Join(c.StateDir, "runs", "upgrade.json")); !os.IsNotExist(err) {
		t.Errorf("the record of the upgrade is still there: %v", err)
	}
}
