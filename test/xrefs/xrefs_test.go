package main

import (
	"os/exec"
	"testing"
)

// The files of playbooks are layered: none refers to a file that refers back to it (see the package's
// documentation for the layers).
func TestPlaybooksLayered(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	refs, files, err := references("../../playbooks")
	if err != nil {
		t.Fatal(err)
	}
	for r, used := range refs {
		if back, ok := refs[[2]string{r[1], r[0]}]; ok && r[0] < r[1] {
			t.Errorf("%s and %s refer to each other: %s uses %s; %s uses %s", r[0], r[1], r[0], names(used), r[1], names(back))
		}
	}
	t.Logf("%d files, %d file-to-file references", files, len(refs))
}
