package e2e

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// CheckStatePull pulls the cluster's state into a new directory beside its inventory, as another
// workstation would, and checks it: the same CA hash, every file 0600 in a 0700 directory, an admin
// kubeconfig that works, nothing up would change from it, and a second pull into it refused. It returns
// the directory.
func CheckStatePull(t *testing.T, c *Cluster) string {
	dir := filepath.Join(filepath.Dir(c.Inventory), "pulled-state")
	stdout, stderr, code := c.Run(t, "state", "pull", "--state-dir", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("state pull: exit %d\n%s", code, tail(stderr, 20))
	}
	var res struct {
		Type, Status, CAHash string
		Files                int
		Drift                map[string]int
		NotJoined            []string
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &res); err != nil || res.Type != "state_pull_result" {
		t.Fatalf("state pull's result: %v: %s", err, lastLine(stdout))
	}
	t.Logf("state pull: %d files, not joined %v, drift %v", res.Files, res.NotJoined, res.Drift)
	if len(res.Drift) != 0 {
		t.Errorf("up from the pulled state would change %v", res.Drift)
	}
	hash, _, _ := c.Run(t, "certs", "ca-hash")
	if strings.TrimSpace(hash) != res.CAHash {
		t.Errorf("pulled CA %s, the cluster's %s", res.CAHash, strings.TrimSpace(hash))
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if want := fs.FileMode(0o600); d.IsDir() && info.Mode().Perm() != 0o700 || !d.IsDir() && info.Mode().Perm() != want {
			t.Errorf("%s has mode %v", p, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(c.Kubectl, "--kubeconfig", filepath.Join(dir, "admin.conf"), "get", "nodes", "-o", "name").CombinedOutput(); err != nil || !strings.Contains(string(out), "node/") {
		t.Errorf("kubectl with the pulled admin.conf: %v\n%s", err, out)
	}
	// The hosts' keys the pull trusted (the lab's known_hosts) are the new directory's own.
	if kh, err := os.ReadFile(filepath.Join(dir, "known_hosts")); err != nil || strings.Count(string(kh), "\n") < 2 {
		t.Errorf("the pulled directory's known_hosts: %v\n%s", err, kh)
	}
	if _, stderr, code := c.Run(t, "state", "pull", "--state-dir", dir); code != 2 || !strings.Contains(stderr, "is not empty") {
		t.Errorf("a second pull into the same directory: exit %d, want 2\n%s", code, tail(stderr, 5))
	}
	if _, err := os.Stat(filepath.Join(dir, "admin.conf")); err != nil {
		t.Errorf("the refused pull touched the directory: %v", err)
	}
	return dir
}
