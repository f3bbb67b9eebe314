package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
)

// CheckBackupRestore takes an encrypted backup of the cluster, deletes a ConfigMap, restores etcd from
// the archive (it is back, every node Ready), and rebuilds a state directory from the archive alone (the
// same CA). A backup without a recipient is refused.
func CheckBackupRestore(t *testing.T, c *Cluster) {
	dir := t.TempDir()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	idFile := filepath.Join(dir, "ops.key")
	if err := os.WriteFile(idFile, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "backups")
	if _, stderr, code := c.Run(t, "backup", "--out", out); code != 2 || !strings.Contains(stderr, "--unencrypted") {
		t.Errorf("backup without a recipient: exit %d, want 2\n%s", code, tail(stderr, 5))
	}
	c.MustK(t, "create", "configmap", "backed-up", "--from-literal=k=before")
	start := time.Now()
	stdout, stderr, code := c.Run(t, "backup", "--out", out, "--recipient", id.Recipient().String(), "-o", "json")
	if code != 0 {
		t.Fatalf("backup: exit %d\n%s", code, tail(stderr, 20))
	}
	var res struct {
		File      string
		Size      int64
		Encrypted bool
		Revision  int64
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &res); err != nil || !res.Encrypted || !strings.HasSuffix(res.File, ".tar.gz.age") {
		t.Fatalf("backup's result: %v: %s", err, lastLine(stdout))
	}
	t.Logf("backup: %s, %d bytes, revision %d, in %s", filepath.Base(res.File), res.Size, res.Revision, time.Since(start).Round(10*time.Millisecond))
	data, err := os.ReadFile(res.File)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(res.File); st.Mode().Perm() != 0o600 || bytes.Contains(data, []byte("PRIVATE KEY")) {
		t.Errorf("the archive: mode %v, or a key in clear", st.Mode().Perm())
	}
	c.MustK(t, "delete", "configmap", "backed-up")
	if _, stderr, code := c.Run(t, "etcd", "restore", "--from", res.File, "--yes"); code != 2 || !strings.Contains(stderr, "--identity") {
		t.Errorf("restore from an encrypted archive without --identity: exit %d, want 2\n%s", code, tail(stderr, 5))
	}
	start = time.Now()
	if stdout, stderr, code := c.Run(t, "etcd", "restore", "--from", res.File, "--identity", idFile, "--yes"); code != 0 {
		t.Fatalf("etcd restore --from the archive: exit %d\n%s\n%s", code, stdout, tail(stderr, 30))
	}
	t.Logf("etcd restore from the archive in %s", time.Since(start).Round(100*time.Millisecond))
	if v := c.MustK(t, "get", "configmap", "backed-up", "-o", "jsonpath={.data.k}"); v != "before" {
		t.Errorf("the ConfigMap after the restore: %q", v)
	}
	c.NodesReady(t, len(c.Lab.Hosts))
	state := filepath.Join(dir, "state")
	if _, stderr, code := c.Run(t, "state", "pull", "--from", res.File, "--identity", idFile, "--state-dir", state); code != 0 {
		t.Fatalf("state pull --from the archive: exit %d\n%s", code, tail(stderr, 10))
	}
	if a, b := readFile(t, filepath.Join(c.StateDir, "pki", "ca.key")), readFile(t, filepath.Join(state, "pki", "ca.key")); !bytes.Equal(a, b) {
		t.Error("the state directory from the archive holds another CA key")
	}
}
