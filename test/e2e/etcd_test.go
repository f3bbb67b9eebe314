package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// etcdMember is one entry of `clusterctl etcd status -o json`.
type etcdMember struct {
	Host    string `json:"host"`
	Name    string `json:"name"`
	Member  bool   `json:"member"`
	Started bool   `json:"started"`
	Status  *struct {
		Leader   bool  `json:"leader"`
		Learner  bool  `json:"learner"`
		Healthy  bool  `json:"healthy"`
		DBSize   int64 `json:"dbSize"`
		Revision int64 `json:"revision"`
	} `json:"status"`
	Error     string `json:"error"`
	NotJoined bool   `json:"notJoined"`
}

// EtcdStatus runs `etcd status -o json` and returns its members and exit code.
func (c *Cluster) EtcdStatus(t testing.TB) ([]etcdMember, int) {
	t.Helper()
	stdout, stderr, code := c.Run(t, "etcd", "status", "-o", "json")
	var res struct {
		Type    string       `json:"type"`
		Members []etcdMember `json:"members"`
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &res); err != nil || res.Type != "etcd_status" {
		t.Fatalf("etcd status -o json: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, tail(stderr, 20))
	}
	return res.Members, code
}

// checkHealthy fails unless hosts are exactly the etcd members, each started, healthy and voting, one
// the leader.
func checkHealthy(t testing.TB, members []etcdMember, code int, hosts ...string) {
	t.Helper()
	leaders := 0
	var got []string
	for _, m := range members {
		got = append(got, m.Host)
		if !m.Member || !m.Started || m.Status == nil || !m.Status.Healthy || m.Status.Learner {
			t.Errorf("member %+v: not a started, healthy voting member (%s)", m, m.Error)
		} else if m.Status.Leader {
			leaders++
		}
	}
	if strings.Join(got, ",") != strings.Join(hosts, ",") || leaders != 1 || code != 0 {
		t.Errorf("etcd status: members on %v, %d leader(s), exit %d; want %v, one leader, exit 0", got, leaders, code, hosts)
	}
}

// Snapshot runs `etcd snapshot --out DIR -o json` into a new directory, checks what it reports against the
// file it made, and returns the file's path.
func (c *Cluster) Snapshot(t testing.TB) string {
	t.Helper()
	stdout, stderr, code := c.Run(t, "etcd", "snapshot", "--out", t.TempDir(), "-o", "json")
	var res struct {
		Status   string `json:"status"`
		File     string `json:"file"`
		Host     string `json:"host"`
		Revision int64  `json:"revision"`
		Size     int64  `json:"size"`
		SHA256   string `json:"sha256"`
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &res); err != nil || code != 0 || res.Status != "ok" {
		t.Fatalf("etcd snapshot: exit %d, %v\n%s\n%s", code, err, lastLine(stdout), tail(stderr, 20))
	}
	file := res.File
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Size() != res.Size || res.Revision <= 0 || res.SHA256 != sha256File(t, file) {
		t.Errorf("snapshot %s: mode %04o size %d; reported size %d, revision %d, sha256 %s", file, st.Mode().Perm(), st.Size(), res.Size, res.Revision, res.SHA256)
	}
	t.Logf("snapshot from %s: %d bytes at revision %d", res.Host, res.Size, res.Revision)
	return file
}

// ScheduledSnapshot has host's scheduled snapshot service take one now (as its timer does), checks what it
// left (a 0700 directory, 0600 snapshots, no more than keep), that etcd snapshots list shows it, and returns
// the --from of a restore from it: HOST:latest.
func (c *Cluster) ScheduledSnapshot(t testing.TB, host string) string {
	t.Helper()
	if out := c.Lab.Run(t, host, "systemctl is-active clusterctl-etcd-snapshot.timer; systemctl is-enabled clusterctl-etcd-snapshot.timer"); out != "active\nenabled\n" {
		t.Fatalf("%s's snapshot timer: %q, want active and enabled", host, out)
	}
	start := time.Now()
	c.Lab.Run(t, host, "systemctl start clusterctl-etcd-snapshot.service")
	t.Logf("%s's scheduled snapshot service: a snapshot taken and verified in %s:\n%s", host, time.Since(start).Round(10*time.Millisecond),
		c.Lab.Run(t, host, "journalctl -u clusterctl-etcd-snapshot.service -n 3 -o cat --no-pager"))
	if out := c.Lab.Run(t, host, "stat -c '%a %U' /var/lib/etcd-snapshots /var/lib/etcd-snapshots/etcd-snapshot-*.db | sort | uniq -c"); !strings.Contains(out, " 700 root\n") || !strings.Contains(out, " 600 root\n") {
		t.Errorf("modes of the snapshots' directory and files:\n%s", out)
	}
	stdout, stderr, code := c.Run(t, "etcd", "snapshots", "list", "-o", "json")
	var res struct {
		Members []struct {
			Host       string `json:"host"`
			Timer      string `json:"timer"`
			LastResult string `json:"lastResult"`
			Snapshots  []struct {
				Name string `json:"name"`
				Size int64  `json:"size"`
			} `json:"snapshots"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &res); err != nil || code != 0 || len(res.Members) == 0 {
		t.Fatalf("etcd snapshots list: exit %d, %v\n%s\n%s", code, err, stdout, tail(stderr, 20))
	}
	for _, m := range res.Members {
		if m.Host == host && (m.Timer != "active" || m.LastResult != "success" || len(m.Snapshots) == 0 || m.Snapshots[0].Size == 0) {
			t.Errorf("etcd snapshots list for %s: %+v", host, m)
		}
	}
	return host + ":latest"
}

// Restore runs `etcd restore --from FILE --yes` and fails the test unless it succeeds.
func (c *Cluster) Restore(t testing.TB, file string) {
	t.Helper()
	start := time.Now()
	stdout, stderr, code := c.Run(t, "etcd", "restore", "--from", file, "--yes")
	if code != 0 {
		c.controlPlaneState(t)
		t.Fatalf("etcd restore: exit %d\n%s\n%s", code, stdout, tail(stderr, 40))
	}
	t.Logf("restore in %s:\n%s", time.Since(start).Round(100*time.Millisecond), stdout)
}

// controlPlaneState logs, for a failure's diagnosis, what each control-plane host runs: its containers,
// the last lines of its newest etcd and API server containers, and its kubelet's (the lab is reset at the
// test's end).
func (c *Cluster) controlPlaneState(t testing.TB) {
	t.Helper()
	const script = `crictl ps -a 2>&1 | head -n 20
for n in etcd kube-apiserver; do
  id=$(crictl ps -a --name "^$n\$" -q 2>/dev/null | head -n 1)
  echo "== $n $id"
  [ -z "$id" ] || crictl logs --tail 25 "$id" 2>&1
done
echo "== kubelet"
journalctl -u kubelet -n 30 --no-pager 2>&1`
	for _, h := range c.Lab.Hosts {
		if !h.ControlPlane {
			continue
		}
		out, err := c.Lab.SSH("", h.Name, script)
		t.Logf("%s's control plane (%v):\n%s", h.Name, err, out)
	}
}

// NodesReady fails unless every Node is Ready and its kubelet renewed its Lease in the last 30 s.
func (c *Cluster) NodesReady(t testing.TB, want int) {
	t.Helper()
	out := c.MustK(t, "get", "nodes", "-o", "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{end}")
	if out != strings.Repeat("True", want) {
		t.Errorf("nodes Ready: %q, want %d", out, want)
	}
	renew := c.MustK(t, "get", "leases", "-n", "kube-node-lease", "-o", "jsonpath={range .items[*]}{.spec.renewTime}{\"\\n\"}{end}")
	for _, r := range strings.Fields(renew) {
		if at, err := time.Parse(time.RFC3339Nano, r); err != nil || time.Since(at) > 30*time.Second {
			t.Errorf("a node lease last renewed %s (%v)", r, err)
		}
	}
}

// snapshotRestore is the operator's backup and restore on a running cluster: a snapshot, a namespace
// deleted and another created, a restore: the first is back, the second gone, every node Ready, and the
// cluster schedules and runs new work (controllers and scheduler watch the restored store). The snapshot
// is streamed to the workstation (etcd snapshot), or with scheduled, taken by cp1's scheduled snapshot
// service and restored from cp1:latest.
func snapshotRestore(t *testing.T, c *Cluster, cps, workers []string, scheduled bool) {
	members, code := c.EtcdStatus(t)
	checkHealthy(t, members, code, cps...)
	c.MustK(t, "create", "namespace", "kept")
	c.MustK(t, "-n", "kept", "create", "configmap", "data", "--from-literal=k=before")
	var snap string
	if scheduled {
		snap = c.ScheduledSnapshot(t, "cp1")
	} else {
		before := map[string]string{}
		for _, h := range cps {
			before[h] = c.Hash(t, h)
		}
		snap = c.Snapshot(t)
		for _, h := range cps {
			if c.Hash(t, h) != before[h] {
				t.Errorf("the snapshot changed files on %s (it streams to the workstation)", h)
			}
		}
	}
	c.MustK(t, "delete", "namespace", "kept", "--wait=true", "--timeout=60s")
	c.MustK(t, "create", "namespace", "written-after")
	c.Restore(t, snap)
	if out := c.MustK(t, "-n", "kept", "get", "configmap", "data", "-o", "jsonpath={.data.k}"); out != "before" {
		t.Errorf("restored configmap: %q", out)
	}
	if _, err := c.K(t, "", "get", "namespace", "written-after"); err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Errorf("a namespace created after the snapshot survived the restore: %v", err)
	}
	c.NodesReady(t, len(c.Lab.Hosts))
	members, code = c.EtcdStatus(t)
	checkHealthy(t, members, code, cps...)
	for _, h := range cps {
		out := c.Lab.Run(t, h, "test -d /var/lib/etcd.before-restore && echo kept; ls /var/lib/clusterctl/etcd-restore 2>/dev/null; true")
		if strings.TrimSpace(out) != "kept" {
			t.Errorf("%s after the restore: %q, want the old data directory kept and no snapshot left", h, out)
		}
	}
	// New work after the restore: a Deployment (controller-manager), scheduled (scheduler), Running.
	c.LoadProbe(t, workers...)
	if _, err := c.K(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: after-restore, namespace: default}
spec:
  selector: {matchLabels: {app: after-restore}}
  template:
    metadata: {labels: {app: after-restore}}
    spec:
      containers: [{name: probe, image: `+ProbeImage+`, imagePullPolicy: Never, args: [serve]}]
`, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.K(t, "", "rollout", "status", "deployment/after-restore", "--timeout=120s"); err != nil {
		t.Error(err)
	}
}

// TestEtcdRestore takes a three-member stacked etcd through a backup and restore, then through the loss of
// two of its three control-plane hosts: quorum lost, restored onto the survivor, the others added back.
func TestEtcdRestore(t *testing.T) {
	longOnly(t, "restores onto one stacked member (TestUp) and from a backup archive (TestDualStack)")
	c := NewCluster(t, 4, 3) // cp1 cp2 cp3 w1
	c.Up(t)

	t.Run("snapshot, a namespace deleted, restore on all three: the namespace is back", func(t *testing.T) {
		snapshotRestore(t, c, []string{"cp1", "cp2", "cp3"}, []string{"w1"}, false)
	})

	survivor := c.Subset(t, "survivor", "cp1", "w1")
	var snap string
	t.Run("two of three control-plane hosts lost: restore onto the survivor", func(t *testing.T) {
		c.MustK(t, "create", "namespace", "before-loss")
		snap = c.Snapshot(t)
		// cp2 and cp3 are lost: reinstalled bare (reset wipes their etcd and kubelet); etcd on cp1 alone
		// has no quorum and the API cannot write.
		if _, stderr, code := c.Run(t, "reset", "--limit", "cp2,cp3", "--yes"); code != 0 {
			t.Fatalf("reset cp2 cp3: exit %d\n%s", code, tail(stderr, 20))
		}
		members, code := c.EtcdStatus(t)
		if code != 1 || len(members) != 3 || members[0].Status == nil || members[0].Status.Healthy {
			t.Errorf("etcd status without quorum: exit %d, %+v; want exit 1 and cp1 unhealthy", code, members)
		}
		// Refused, before anything is stopped, while the inventory names hosts that cannot take part.
		_, stderr, code := c.Run(t, "etcd", "restore", "--from", snap, "--yes")
		if code != 1 || !strings.Contains(stderr, "cp2: no etcd manifest") || !strings.Contains(stderr, "nothing was changed") {
			t.Errorf("restore onto reset hosts: exit %d, want 1 naming cp2's missing etcd manifest\n%s", code, tail(stderr, 10))
		}
		if out := c.Lab.Run(t, "cp1", "ls /etc/kubernetes/manifests"); !strings.Contains(out, "etcd.yaml") || !strings.Contains(out, "kube-apiserver.yaml") {
			t.Errorf("the refused restore touched cp1's manifests: %s", out)
		}
		survivor.Restore(t, snap)
		if _, err := c.K(t, "", "get", "namespace", "before-loss"); err != nil {
			t.Error(err)
		}
		members, code = survivor.EtcdStatus(t)
		checkHealthy(t, members, code, "cp1")
	})

	t.Run("the lost hosts added back: three members again", func(t *testing.T) {
		if _, stderr, code := c.Run(t, "add-node", "cp2", "cp3"); code != 0 {
			t.Fatalf("add-node cp2 cp3: exit %d\n%s", code, tail(stderr, 30))
		}
		members, code := c.EtcdStatus(t)
		checkHealthy(t, members, code, "cp1", "cp2", "cp3")
		c.NodesReady(t, 4)
		if _, err := c.K(t, "", "get", "namespace", "before-loss"); err != nil {
			t.Error(err)
		}
	})
}

func sha256File(t testing.TB, path string) string {
	t.Helper()
	sum := sha256.Sum256(readFile(t, path))
	return hex.EncodeToString(sum[:])
}
