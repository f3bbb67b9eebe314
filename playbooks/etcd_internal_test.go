package playbooks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// A restore resumes only with the same snapshot onto the same members: every member of one new cluster
// must share its token, and a member restored for another member set must be restored again.
func TestLoadRestoreState(t *testing.T) {
	dir := t.TempDir()
	first, err := loadRestoreState(dir, "sum1", "cp1=https://10.0.0.1:2380")
	if err != nil || first.Token == "" || len(first.Restored) != 0 {
		t.Fatalf("a new restore: %+v, %v", first, err)
	}
	first.Restored = []string{"cp1"}
	data, _ := json.Marshal(first)
	if err := os.WriteFile(filepath.Join(dir, restoreStateFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := loadRestoreState(dir, "sum1", "cp1=https://10.0.0.1:2380")
	if err != nil || again.Token != first.Token || len(again.Restored) != 1 {
		t.Errorf("the same restore again: %+v, %v; want it resumed", again, err)
	}
	for _, c := range []struct{ sum, members string }{
		{"sum2", "cp1=https://10.0.0.1:2380"},
		{"sum1", "cp1=https://10.0.0.1:2380,cp2=https://10.0.0.2:2380"},
	} {
		other, err := loadRestoreState(dir, c.sum, c.members)
		if err != nil || other.Token == first.Token || len(other.Restored) != 0 || other.Members != c.members {
			t.Errorf("%+v: %+v, %v; want a new restore", c, other, err)
		}
	}
}
