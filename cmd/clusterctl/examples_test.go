package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Every clusterctl command the CI example runs exists, with the flags it gives.
func TestCIExampleCommands(t *testing.T) {
	files, err := filepath.Glob("../../examples/ci/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CI example: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var wf struct {
			Jobs map[string]struct {
				Steps []struct {
					Name string `json:"name"`
					Run  string `json:"run"`
				} `json:"steps"`
			} `json:"jobs"`
		}
		if err := yaml.Unmarshal(data, &wf); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		n := 0
		for _, job := range wf.Jobs {
			for _, step := range job.Steps {
				for _, line := range strings.Split(step.Run, "\n") {
					line = strings.TrimSpace(line)
					if !strings.HasPrefix(line, "clusterctl ") {
						continue
					}
					if i := strings.Index(line, ">"); i > 0 {
						line = line[:i]
					}
					args := strings.Fields(line)[1:]
					root := newRootCmd(io.Discard, io.Discard)
					cmd, rest, err := root.Find(args)
					if err == nil {
						err = cmd.ParseFlags(rest)
					}
					if err != nil || cmd == root || cmd.RunE == nil {
						t.Errorf("%s: step %q: %q is not a clusterctl command line: %v", file, step.Name, line, err)
					}
					n++
				}
			}
		}
		if n < 4 {
			t.Errorf("%s: %d clusterctl commands, want the whole story (validate, pull, up, reset)", file, n)
		}
	}
}
