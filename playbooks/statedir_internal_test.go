package playbooks

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// A state directory is made 0700; one that would be made under a directory others may write to is refused
// and not left behind; one that others may read is refused.
func TestEnsureStateDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "clusterctl", "lab")
	if err := EnsureStateDir(dir); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("made %v %v", st, err)
	}
	wide := filepath.Join(root, "wide")
	os.Mkdir(wide, 0o777)
	os.Chmod(wide, 0o777)
	if err := EnsureStateDir(filepath.Join(wide, "lab")); !errors.Is(err, statedir.ErrUntrusted) {
		t.Errorf("under a world-writable directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(wide, "lab")); err == nil {
		t.Error("the refused state directory was left behind")
	}
	os.Chmod(dir, 0o750)
	if err := EnsureStateDir(dir); err == nil {
		t.Error("a state directory others may enter was accepted")
	}
}
