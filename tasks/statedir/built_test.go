package statedir

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestBuilt(t *testing.T) {
	dir := t.TempDir()
	touch := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := IsBuilt(dir, "learned.json"); ok || err != nil {
		t.Errorf("an empty directory: %v %v", ok, err)
	}
	touch("admin.conf") // what render leaves
	if ok, _ := IsBuilt(dir, "learned.json"); ok {
		t.Error("admin.conf alone (render's) counts as a cluster")
	}
	touch("learned.json") // a state directory up made before the record
	if ok, _ := IsBuilt(dir, "learned.json"); !ok {
		t.Error("a state directory from before the record is not recognised")
	}
	dir = t.TempDir()
	first := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	if err := MarkBuilt(dir, "lab", first); err != nil {
		t.Fatal(err)
	}
	if err := MarkBuilt(dir, "lab", first.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ok, err := IsBuilt(dir, "learned.json"); !ok || err != nil {
		t.Errorf("after MarkBuilt: %v %v", ok, err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, BuiltFile))
	if want := `{"name":"lab","builtAt":"2026-12-03T09:00:00Z"}` + "\n"; string(data) != want {
		t.Errorf("record %q, want %q (the first kept)", data, want)
	}
	if st, _ := os.Stat(filepath.Join(dir, BuiltFile)); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
}
