package statedir

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A journal is written at every change, 0600, read back as it was written, and refused when it is of another
// kind; a nil journal records nothing.
func TestJournal(t *testing.T) {
	path := JournalPath(t.TempDir(), "upgrade")
	if j, err := OpenJournal[struct{ From string }](path, "upgrade"); j != nil || err != nil {
		t.Fatalf("no journal: %+v %v", j, err)
	}
	j := NewJournal[struct{ From string }](path, "upgrade", "v1.37.2", time.Now())
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("a new journal was written before its first change")
	}
	if err := j.Update(func(j *Journal[struct{ From string }]) { j.Data.From = "v1.36.3" }); err != nil {
		t.Fatal(err)
	}
	if err := j.Begin("cp1", "cp2"); err != nil {
		t.Fatal(err)
	}
	if err := j.MarkDone("control-plane/cp1", "cp1"); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("journal file: %v %v", info, err)
	}
	if dir, err := os.Stat(filepath.Dir(path)); err != nil || dir.Mode().Perm() != 0o700 {
		t.Errorf("journal directory: %v %v", dir, err)
	}
	back, err := OpenJournal[struct{ From string }](path, "upgrade")
	if err != nil || back.Key != "v1.37.2" || back.Data.From != "v1.36.3" || !back.IsDone("control-plane/cp1") ||
		back.IsCurrent("cp1") || !back.IsCurrent("cp2") || !slices.Equal(back.Done, []string{"control-plane/cp1"}) {
		t.Fatalf("read back: %+v %v", back, err)
	}
	if _, err := OpenJournal[struct{}](path, "etcd-restore"); err == nil || !strings.Contains(err.Error(), `"upgrade" run`) {
		t.Errorf("another kind: %v", err)
	}
	if err := back.Remove(); err != nil {
		t.Fatal(err)
	}
	if j, err := OpenJournal[struct{}](path, "upgrade"); j != nil || err != nil {
		t.Errorf("removed: %+v %v", j, err)
	}
	var none *Journal[struct{}]
	if none.IsDone("a") || none.Begin("a") != nil || none.MarkDone("a") != nil || none.Remove() != nil {
		t.Error("a nil journal is not empty and silent")
	}
}

// A record an earlier clusterctl kept for a run under way is refused, named, not ignored.
func TestCheckLegacy(t *testing.T) {
	old := filepath.Join(t.TempDir(), "upgrade.json")
	if err := CheckLegacy(old, "upgrade"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckLegacy(old, "upgrade"); err == nil || !strings.Contains(err.Error(), old) || !strings.Contains(err.Error(), "earlier clusterctl") {
		t.Errorf("an old record: %v", err)
	}
}
