package transport

import (
	"os"
	"path/filepath"
	"testing"
)

// The keeper runs in another directory: a command sends it its keys' paths as it would read them.
func TestKeeperGetsAbsoluteKeyPaths(t *testing.T) {
	wd, _ := os.Getwd()
	home, _ := os.UserHomeDir()
	got := absoluteKeys(Target{IdentityFiles: []string{"keys/id", "~/.ssh/id"}, Bastions: []Hop{{IdentityFiles: []string{"b"}}}})
	want := []string{filepath.Join(wd, "keys/id"), filepath.Join(home, ".ssh/id"), filepath.Join(wd, "b")}
	if got.IdentityFiles[0] != want[0] || got.IdentityFiles[1] != want[1] || got.Bastions[0].IdentityFiles[0] != want[2] {
		t.Errorf("got %v and %v, want %v", got.IdentityFiles, got.Bastions[0].IdentityFiles, want)
	}
}
