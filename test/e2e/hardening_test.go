package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Privileged labels namespace ns for Pod Security admission's privileged level: a test's Pods on the
// host's network or with its paths, which the cluster's default (baseline) refuses.
func (c *Cluster) Privileged(t testing.TB, ns string) {
	t.Helper()
	c.MustK(t, "label", "--overwrite", "namespace", ns, "pod-security.kubernetes.io/enforce=privileged")
}

// encryptionStatus is clusterctl encryption status -o json.
type encryptionStatus struct {
	Keys []struct {
		Name  string `json:"name"`
		Write bool   `json:"write"`
	} `json:"keys"`
	Resources []struct {
		Resource string         `json:"resource"`
		Objects  int            `json:"objects"`
		ByKey    map[string]int `json:"byKey"`
	} `json:"resources"`
	Stale int `json:"stale"`
}

// EncryptionStatus runs encryption status and returns its report and exit code.
func (c *Cluster) EncryptionStatus(t testing.TB) (encryptionStatus, int) {
	t.Helper()
	stdout, stderr, code := c.Run(t, "encryption", "status", "--output", "json")
	var st encryptionStatus
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &st); err != nil {
		t.Fatalf("encryption status: exit %d, %v\n%s\n%s", code, err, stdout, tail(stderr, 20))
	}
	return st, code
}

// storedPrefix is the beginning of an object's value in etcd, read on host.
func (c *Cluster) storedPrefix(t testing.TB, host, key string) string {
	t.Helper()
	out := c.Etcdctl(t, host, "get --print-value-only "+key+" | head -c 48")
	return strings.TrimSpace(out)
}

// checkHardened checks a cluster made with cluster.security's defaults, on its first control-plane node
// cp and a worker: Secrets encrypted in etcd and the key on control-plane nodes only, the audit log,
// Pod Security admission's baseline, profiling off, private directories; then a Secret written in clear
// (as before encryption) found by encryption status, stored encrypted by the next up, and with every
// other stored under a new key by encryption rotate.
func checkHardened(t *testing.T, c *Cluster, cp, worker string) {
	c.MustK(t, "create", "secret", "generic", "e2e-secret", "-n", "default", "--from-literal=password=e2e-plain-text")
	t.Run("a Secret is stored encrypted with secretbox; the key is on control-plane nodes only", func(t *testing.T) {
		got := c.storedPrefix(t, cp, "/registry/secrets/default/e2e-secret")
		t.Logf("e2e-secret in etcd: %q", got)
		if !strings.HasPrefix(got, "k8s:enc:secretbox:v1:key-") {
			t.Errorf("etcd holds the Secret as %q, want k8s:enc:secretbox:v1:key-...", got)
		}
		if out := c.Etcdctl(t, cp, "get /registry/secrets/default/e2e-secret | grep -c e2e-plain-text; true"); strings.TrimSpace(out) != "0" {
			t.Errorf("the Secret's value is in etcd in clear")
		}
		if out := c.Lab.Run(t, cp, "stat -c '%a %U %n' /var/lib/etcd /etc/kubernetes/apiserver /etc/kubernetes/apiserver/* /var/log/kubernetes/audit"); strings.Count(out, "700 root")+strings.Count(out, "600 root") != strings.Count(out, "\n") {
			t.Errorf("%s's private directories and files:\n%s", cp, out)
		}
		if out := c.Lab.Run(t, worker, "ls /etc/kubernetes/apiserver /var/log/kubernetes/audit 2>&1; true"); !strings.Contains(out, "No such file") {
			t.Errorf("%s has the API server's configuration:\n%s", worker, out)
		}
		if st, code := c.EncryptionStatus(t); code != 0 || st.Stale != 0 || len(st.Keys) != 1 || st.Resources[0].Objects == 0 {
			t.Errorf("encryption status: exit %d, %+v", code, st)
		}
	})

	t.Run("the audit log records who read and wrote a Secret, never its data", func(t *testing.T) {
		c.MustK(t, "get", "secret", "e2e-secret", "-n", "default", "-o", "name")
		var out string
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
			out = c.Lab.Run(t, cp, "grep -h '\"name\":\"e2e-secret\"' /var/log/kubernetes/audit/audit.log | grep -o '\"verb\":\"[a-z]*\"' | sort -u; true")
			if strings.Contains(out, `"verb":"create"`) && strings.Contains(out, `"verb":"get"`) {
				break
			}
		}
		t.Logf("the audit log's lines for kubectl create secret:\n%s", c.Lab.Run(t, cp, "grep -h '\"verb\":\"create\"' /var/log/kubernetes/audit/audit.log | grep '\"name\":\"e2e-secret\"'; true"))
		if !strings.Contains(out, `"verb":"create"`) || !strings.Contains(out, `"verb":"get"`) {
			t.Errorf("the audit log's events of e2e-secret: %q, want its create and get", out)
		}
		if n := c.Lab.Run(t, cp, "grep -c -e e2e-plain-text -e ZTJlLXBsYWluLXRleHQ -e requestObject /var/log/kubernetes/audit/audit.log; true"); strings.TrimSpace(n) != "0" {
			t.Errorf("the audit log holds request bodies or the Secret's data (%s lines)", strings.TrimSpace(n))
		}
	})

	t.Run("Pod Security baseline refuses a Pod on the host's network in default; profiling is off", func(t *testing.T) {
		pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"e2e-hostnet","namespace":"default"},"spec":{"hostNetwork":true,"containers":[{"name":"c","image":"` + ProbeImage + `"}]}}`
		out, err := c.K(t, pod, "apply", "-f", "-")
		if err == nil || !strings.Contains(err.Error(), `violates PodSecurity "baseline:latest"`) {
			t.Errorf("a hostNetwork Pod in default: %v %s", err, out)
		}
		if out, err := c.K(t, "", "get", "--raw", "/debug/pprof/"); err == nil {
			t.Errorf("the API server serves /debug/pprof/:\n%.200s", out)
		}
		if out := c.Lab.Run(t, cp, "grep -l -e '--profiling=false' /etc/kubernetes/manifests/*.yaml | sort"); strings.Count(out, "\n") != 3 {
			t.Errorf("manifests with --profiling=false:\n%s", out)
		}
	})

	t.Run("a Secret written in clear is found, and encryption rotate stores every one under a new key", func(t *testing.T) {
		// What a Secret of a cluster made before encryption looks like in etcd: the API server reads
		// JSON as well as protobuf.
		legacy := `{"kind":"Secret","apiVersion":"v1","metadata":{"name":"e2e-legacy","namespace":"default","uid":"5c2f1a9e-0000-4000-8000-000000000001","creationTimestamp":"2026-01-01T00:00:00Z"},"data":{"k":"b2xkLXZhbHVl"},"type":"Opaque"}`
		c.Etcdctl(t, cp, "put /registry/secrets/default/e2e-legacy '"+legacy+"'")
		if got := c.MustK(t, "get", "secret", "e2e-legacy", "-n", "default", "-o", "jsonpath={.data.k}"); got != "b2xkLXZhbHVl" {
			t.Fatalf("the Secret written in clear reads %q", got)
		}
		stale, code := c.EncryptionStatus(t)
		if code != 1 || stale.Stale != 1 || stale.Resources[0].ByKey["(clear)"] != 1 {
			t.Errorf("encryption status with a Secret in clear: exit %d, %+v", code, stale)
		}
		t.Logf("e2e-legacy in etcd before up: %q", c.storedPrefix(t, cp, "/registry/secrets/default/e2e-legacy"))
		// up's encryption step stores it again, under the write key.
		c.Up(t)
		before, code := c.EncryptionStatus(t)
		old := before.Keys[0].Name
		got := c.storedPrefix(t, cp, "/registry/secrets/default/e2e-legacy")
		t.Logf("e2e-legacy in etcd after up: %q", got)
		if code != 0 || before.Stale != 0 || !strings.HasPrefix(got, "k8s:enc:secretbox:v1:"+old+":") {
			t.Errorf("after up: encryption status exit %d, %+v; e2e-legacy stored as %q", code, before, got)
		}
		keysFile := filepath.Join(c.StateDir, "encryption-keys.json")
		keysBefore, err := os.ReadFile(keysFile)
		if err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := c.Run(t, "encryption", "rotate", "--dry-run")
		if want := fmt.Sprintf("dry run: %d object(s) would be stored again; would retire %s;", before.Resources[0].Objects, old); code != 0 ||
			!strings.Contains(stdout, want) || !strings.Contains(stdout, "read     skipped: one control-plane node") {
			t.Errorf("encryption rotate --dry-run: exit %d, want %q\n%s\n%s", code, want, stdout, tail(stderr, 20))
		}
		if now, _ := os.ReadFile(keysFile); !bytes.Equal(now, keysBefore) {
			t.Errorf("encryption rotate --dry-run changed %s", keysFile)
		}
		snapshot := c.Snapshot(t) // its Secrets under the key the rotation retires
		stdout, stderr, code = c.Run(t, "encryption", "rotate", "--yes")
		if code != 0 {
			t.Fatalf("encryption rotate: exit %d\n%s\n%s", code, stdout, tail(stderr, 30))
		}
		after, code := c.EncryptionStatus(t)
		if code != 0 || len(after.Keys) != 1 || after.Keys[0].Name == old || after.Stale != 0 ||
			after.Resources[0].ByKey[after.Keys[0].Name] != after.Resources[0].Objects {
			t.Errorf("encryption status after the rotation: exit %d, %+v (old key %s)\n%s", code, after, old, stdout)
		}
		for _, key := range []string{"/registry/secrets/default/e2e-legacy", "/registry/secrets/default/e2e-secret"} {
			got := c.storedPrefix(t, cp, key)
			t.Logf("%s in etcd after encryption rotate: %q", key, got)
			if !strings.HasPrefix(got, "k8s:enc:secretbox:v1:"+after.Keys[0].Name+":") {
				t.Errorf("%s is stored as %q after the rotation", key, got)
			}
		}
		t.Logf("encryption rotate:\n%s", stdout)
		if got := c.MustK(t, "get", "secret", "e2e-secret", "-n", "default", "-o", "jsonpath={.data.password}"); got != "ZTJlLXBsYWluLXRleHQ=" {
			t.Errorf("e2e-secret reads %q after the rotation", got)
		}
		if out := c.Lab.Run(t, cp, "grep -c "+old+" /etc/kubernetes/apiserver/encryption-config.yaml; true"); strings.TrimSpace(out) != "0" {
			t.Errorf("the retired key is still in %s's encryption configuration", cp)
		}
		// A restore of the snapshot taken before is refused before anything stops: no API server could
		// read its Secrets.
		if stdout, stderr, code := c.Run(t, "etcd", "restore", "--from", snapshot, "--dry-run"); code != 1 || !strings.Contains(stderr, "under "+old+", a key") {
			t.Errorf("etcd restore of a snapshot from before the rotation: exit %d, want 1 naming key %s\n%s\n%s", code, old, stdout, tail(stderr, 10))
		}
		keys, err := os.ReadFile(keysFile)
		if err != nil || strings.Contains(string(keys), old) {
			t.Errorf("the state directory's keys still hold %s (%v)", old, err)
		}
	})
	c.MustK(t, "delete", "secret", "e2e-secret", "e2e-legacy", "-n", "default")
}

// keptSecret is the Secret KeepSecret writes and StillHardened reads back.
const keptSecret = "e2e-kept"

// KeepSecret writes a Secret before an operation that must keep the cluster's hardening (an upgrade, a
// CA rotation, a reboot), for StillHardened to check after it.
func (c *Cluster) KeepSecret(t testing.TB) {
	t.Helper()
	if _, err := c.K(t, "", "get", "secret", keptSecret, "-n", "default", "-o", "name"); err == nil {
		return
	}
	c.MustK(t, "create", "secret", "generic", keptSecret, "-n", "default", "--from-literal=kept=e2e-kept-value")
}

// StillHardened checks, after an operation, that control-plane node cp's API server still encrypts,
// audits and admits as up set it, and that KeepSecret's Secret reads back and is stored encrypted.
func (c *Cluster) StillHardened(t testing.TB, cp string) {
	t.Helper()
	manifest := c.Lab.Run(t, cp, "cat /etc/kubernetes/manifests/kube-apiserver.yaml")
	for _, flag := range []string{"--encryption-provider-config=", "--audit-policy-file=", "--audit-log-path=", "--admission-control-config-file=", "--profiling=false"} {
		if !strings.Contains(manifest, flag) {
			t.Errorf("%s's API server has lost %s", cp, flag)
		}
	}
	if got := c.MustK(t, "get", "secret", keptSecret, "-n", "default", "-o", "jsonpath={.data.kept}"); got != "ZTJlLWtlcHQtdmFsdWU=" {
		t.Errorf("%s reads %q", keptSecret, got)
	}
	if got := c.storedPrefix(t, cp, "/registry/secrets/default/"+keptSecret); !strings.HasPrefix(got, "k8s:enc:secretbox:v1:") {
		t.Errorf("%s is stored as %q", keptSecret, got)
	}
	if n := c.Lab.Run(t, cp, "grep -c '\"name\":\""+keptSecret+"\"' /var/log/kubernetes/audit/audit.log; true"); strings.TrimSpace(n) == "0" {
		t.Errorf("%s's audit log has no event of %s", cp, keptSecret)
	}
}

// atoi is s as a number, -1 when it is not one.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
