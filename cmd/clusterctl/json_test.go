package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// jsonArgs are the arguments each command is run with in TestJSONConvention, beyond -i and -o json: its
// positional arguments and required flags. Commands that need none are absent.
func jsonArgs(dir string) map[string][]string {
	return map[string][]string{
		"add-node":           {"w1"},
		"remove-node":        {"w1", "--yes"},
		"reset":              {"--yes"},
		"reboot":             {"--yes"},
		"upgrade":            {"--yes"},
		"certs rotate":       {"--yes"},
		"encryption rotate":  {"--yes"},
		"etcd restore":       {"--from", filepath.Join(dir, "none.db"), "--yes"},
		"etcd snapshot":      {"--out", filepath.Join(dir, "snapshots")},
		"backup":             {"--out", filepath.Join(dir, "backups"), "--unencrypted"},
		"exec":               {"--", "true"},
		"init":               {"--hosts", "cp1=10.0.0.5", "--out", filepath.Join(dir, "init.yaml")},
		"kubeconfig user":    {"alice"},
		"render":             {"--out", filepath.Join(dir, "rendered")},
		"artifacts pull":     {"--arch", "s390x"}, // refused before any download: no network in unit tests
		"artifacts list":     {"--dir", filepath.Join(dir, "artifacts")},
		"artifacts verify":   {"--dir", filepath.Join(dir, "artifacts")},
		"inventory validate": {},
		"inventory migrate":  {"--out", filepath.Join(dir, "migrated.yaml")},
	}
}

// Every command with -o json follows docs/cli.md's convention: stdout is JSON lines, each an object with a
// type, and the last one the command's result, with a status; whatever the command met (here hosts that
// refuse connections, a state directory of a cluster that does not answer).
func TestJSONConvention(t *testing.T) {
	dir, inv := unreachableInventory(t)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	t.Setenv("HOME", dir)
	if err := os.Mkdir(filepath.Join(dir, "artifacts"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "artifacts", "manifest.json"), []byte(`{"kubernetesVersion":"v1.37.2","files":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "render", "-i", inv, "--out", filepath.Join(dir, "out")); code != 0 {
		t.Fatalf("render: %d %s", code, stderr)
	}
	if err := statedir.MarkBuilt(filepath.Join(dir, ".clusterctl", "c1"), "c1", time.Now()); err != nil {
		t.Fatal(err)
	}
	extra := jsonArgs(dir)
	var paths []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			// a group only prints its help; kubeconfig and kubeconfig user are commands with subcommands
			if path := strings.TrimPrefix(sub.CommandPath(), "clusterctl "); sub.Runnable() && (!sub.HasSubCommands() || path == "kubeconfig" || path == "kubeconfig user") {
				paths = append(paths, path)
			}
			walk(sub)
		}
	}
	walk(newRootCmd(nil, nil))
	if len(paths) < 29 {
		t.Fatalf("only %d commands found: %v", len(paths), paths)
	}
	// All at once: most wait out their connection tries to hosts that refuse.
	type outcome struct {
		args           []string
		code           int
		stdout, stderr string
	}
	results := make([]outcome, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		args := append(strings.Fields(p), "-o", "json")
		if p != "version" && p != "init" && !strings.HasPrefix(p, "artifacts") {
			args = append(args, "-i", inv)
		}
		if findFlag(p, "connect-timeout") {
			args = append(args, "--connect-timeout", "1s")
		}
		args = append(args, extra[p]...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out, errb bytes.Buffer
			code := run(context.Background(), args, &out, &errb)
			results[i] = outcome{args, code, out.String(), errb.String()}
		}()
	}
	wg.Wait()
	for _, r := range results {
		args, code, stdout, stderr := r.args, r.code, r.stdout, r.stderr
		if stdout == "" {
			t.Errorf("%v: exit %d, nothing on stdout\nstderr: %s", args, code, stderr)
			continue
		}
		lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		for i, l := range lines {
			var obj map[string]any
			if err := json.Unmarshal([]byte(l), &obj); err != nil {
				t.Errorf("%v: exit %d, line %d is not a JSON object: %v\n%s", args, code, i+1, err, l)
				break
			}
			if typ, _ := obj["type"].(string); typ == "" {
				t.Errorf("%v: line %d has no type: %s", args, i+1, l)
			}
			status, _ := obj["status"].(string)
			if i == len(lines)-1 && !slices.Contains([]string{"ok", "failed", "refused", "invalid", "interrupted"}, status) {
				t.Errorf("%v: exit %d, the last line has no status of the convention: %s\nstderr: %s", args, code, l, stderr)
			}
			if i == len(lines)-1 && (status == "ok") != (code == 0) {
				t.Errorf("%v: exit %d with status %q", args, code, status)
			}
		}
	}
}

// findFlag reports whether the command at path has the flag.
func findFlag(path, name string) bool {
	c, _, err := newRootCmd(nil, nil).Find(strings.Fields(path))
	return err == nil && c.Flags().Lookup(name) != nil
}
