package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
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

var update = flag.Bool("update", false, "rewrite playbooks/testdata/steps.golden")

// Each playbook's steps and what of the run's plan each reads, as playbooks/testdata/steps.golden says: a
// step that starts reading another part of the plan (or stops) changes the file, for review.
func TestPlaybookSteps(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	got, err := stepReads("../../playbooks")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join("..", "..", "playbooks", "testdata", "steps.golden")
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (go test ./test/xrefs -run TestPlaybookSteps -update writes it)", err)
	}
	if string(want) != got {
		t.Errorf("the playbooks' steps or what they read differ from %s (-update rewrites it; review the diff):\n%s", file, got)
	}
}
