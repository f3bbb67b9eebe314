package main

import (
	"flag"
	"go/types"
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

// Playbooks run no command on a host themselves: a command is a task's, a typed function in tasks/ that
// builds it from fixed text and validates what the host answers (docs/architecture.md). This fails on a
// call of Run (or Start) on a transport connection, or on the interfaces tasks take for one, in playbooks.
func TestPlaybooksRunNoCommands(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	p, err := load("../../playbooks")
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/clusterctl/clusterctl/"
	for sel, s := range p.info.Selections {
		if name := sel.Sel.Name; name != "Run" && name != "Start" {
			continue
		}
		recv := s.Recv()
		if ptr, ok := recv.(*types.Pointer); ok {
			recv = ptr.Elem()
		}
		named, ok := recv.(*types.Named)
		if !ok || named.Obj().Pkg() == nil {
			continue
		}
		switch named.Obj().Pkg().Path() + "." + named.Obj().Name() {
		case module + "transport.Conn", module + "tasks.Runner", module + "tasks/apply.Host", module + "tasks/snapshots.Runner":
			t.Errorf("%s: a playbook runs a command on a connection (%s.%s): make it a task's function", p.fset.Position(sel.Pos()), named.Obj().Name(), sel.Sel.Name)
		}
	}
}
