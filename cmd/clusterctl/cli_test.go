package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// Every command's --help works, exits 0 and says what the command is.
func TestEveryCommandHelp(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		args := append(slices.Clone(strings.Fields(c.CommandPath())[1:]), "--help")
		code, stdout, stderr := runCLI(t, args...)
		about, _, _ := strings.Cut(c.Long, "\n")
		if about == "" {
			about = c.Short
		}
		if code != 0 || !strings.Contains(stdout, "Usage:") || !strings.Contains(stdout, about) || stderr != "" {
			t.Errorf("%s --help: exit %d, stderr %q, stdout lacks usage or %q", c.CommandPath(), code, stderr, about)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(&bytes.Buffer{}, &bytes.Buffer{}))
}

// lab inventories for the error paths: hosts on loopback ports that refuse connections.
func unreachableInventory(t *testing.T) (dir, inv string) {
	t.Helper()
	dir = t.TempDir()
	inv = filepath.Join(dir, "hosts.yaml")
	if err := os.WriteFile(inv, []byte("cluster: {name: c1}\nhosts:\n  - {name: cp1, address: 127.0.0.1, internalAddress: 10.0.0.1, roles: [control-plane], ssh: {port: 1}}\n  - {name: w1, address: 127.0.0.2, internalAddress: 10.0.0.2, roles: [worker], ssh: {port: 1}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, inv
}

// The error paths a new user meets: each exits with the code the help documents, in one sentence that
// names the flag or argument, and leaves no state directory behind.
func TestDocumentedErrors(t *testing.T) {
	dir, inv := unreachableInventory(t)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	future := filepath.Join(dir, "future.yaml")
	if err := os.WriteFile(future, []byte("apiVersion: clusterctl/v9\nhosts: [{name: cp1, address: 10.0.0.1, roles: [control-plane]}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		line string
	}{
		{[]string{"up", "-i", inv, "--dry-run"}, 1, "a host that cannot be reached cannot be set up"},
		{[]string{"inventory", "migrate", "-i", inv, "--in-place", "--out", filepath.Join(dir, "x.yaml")}, 2, "--in-place and --out: give one"},
		{[]string{"inventory", "migrate", "-i", future}, 2, `apiVersion "clusterctl/v9" is not a version of hosts.yaml this clusterctl knows`},
		{[]string{"inventory", "validate", "-i", future}, 2, `apiVersion: "clusterctl/v9" is not a version of hosts.yaml this clusterctl reads (clusterctl/v1): a newer clusterctl wrote it`},
		{[]string{"up", "-i", inv, "--dry-run", "--ignore-preflight-errors=SSH"}, 2, "--ignore-preflight-errors: SSH is never ignored"},
		{[]string{"up", "-i", inv, "--dry-run", "--ignore-preflight-errors=Swap,Nope"}, 2, `--ignore-preflight-errors: "Nope" is no preflight check; the checks: all, `},
		{[]string{"artifacts", "pull", "--parallel", "0"}, 2, "--parallel must be at least 1, got 0"},
		{[]string{"artifacts", "pull", "--arch", "s390x"}, 2, `--arch "s390x": the architectures clusterctl pulls for are amd64 and arm64`},
		{[]string{"up", "-i", inv, "--connect-timeout", "0s"}, 2, "--connect-timeout must be longer than 0, got 0s"},
		{[]string{"up", "-i", inv, "--max-clock-skew", "-1s"}, 2, "--max-clock-skew must be 0 or longer, got -1s"},
		{[]string{"preflight", "-i", inv, "--forks", "-1"}, 2, "--forks must be at least 1, got -1"},
		{[]string{"up", "-i", inv, "--dry-run", "--ignore-preflight-errors=all"}, 1, "a host that cannot be reached cannot be set up"},
		{[]string{"remove-node", "-i", inv, "w1", "--yes"}, 2, `no cluster "c1" has been built from this workstation`},
		{[]string{"add-node", "-i", inv, "w9"}, 2, "add-node: w9 is not a host of " + inv + " (hosts: cp1, w1)"},
		{[]string{"add-node", "-i", inv, "w1", "--ignore-preflight-errors=all"}, 2, `no cluster "c1" has been built`},
		{[]string{"add-node", "-i", inv, "w1", "--limit", "w1"}, 2, "add-node takes the hosts to add as arguments, not --limit"},
		{[]string{"remove-node", "-i", inv}, 2, "clusterctl remove-node needs the names of the hosts to remove: clusterctl remove-node -i hosts.yaml w3 --dry-run"},
		{[]string{"etcd", "snapshott", "-i", inv}, 2, `unknown command "snapshott" for "clusterctl etcd"; did you mean "snapshot"?`},
		{[]string{"certs", "check-expiraton"}, 2, `unknown command "check-expiraton" for "clusterctl certs"; did you mean "check-expiration"?`},
		{[]string{"inventory", "vaildate"}, 2, `unknown command "vaildate" for "clusterctl inventory"; did you mean "validate"?`},
		{[]string{"artifacts", "pul"}, 2, `unknown command "pul" for "clusterctl artifacts"; did you mean "pull"?`},
		{[]string{"etcd", "snapshots", "lst"}, 2, `unknown command "lst" for "clusterctl etcd snapshots"; did you mean "list"?`},
		{[]string{"completion", "bsh"}, 2, `unknown command "bsh" for "clusterctl completion"; did you mean "bash"?`},
		{[]string{"upp"}, 2, `unknown command "upp" for "clusterctl"; did you mean "up"?`},
		{[]string{"etcd", "frobnicate"}, 2, `unknown command "frobnicate" for "clusterctl etcd" (its commands: `},
		{[]string{"up", "-i", inv, "extra"}, 2, `clusterctl up takes no arguments, got "extra"`},
		{[]string{"exec", "-i", inv}, 2, "clusterctl exec needs the command to run on the hosts"},
		{[]string{"upgrade", "-i", inv, "--to", "banana"}, 2, `--to "banana" is not a Kubernetes version: give one such as v1.37.2`},
		{[]string{"upgrade", "-i", inv, "--dry-run"}, 2, `no cluster "c1" has been built`},
		{[]string{"upgrade", "-i", inv, "--max-unavailable", "0"}, 2, "--max-unavailable must be at least 1"},
		{[]string{"certs", "rotate", "-i", inv, "--max-unavailable", "0"}, 2, "--max-unavailable must be at least 1"},
		{[]string{"up", "-i", inv, "--max-unavailable", "0"}, 2, "--max-unavailable must be at least 1"},
		{[]string{"certs", "rotate", "-i", inv, "--yes"}, 2, `no cluster "c1" has been built`},
		{[]string{"certs", "ca-hash", "-i", inv}, 2, `no state directory for cluster "c1"`},
		{[]string{"etcd", "snapshot", "-i", inv}, 2, `no cluster "c1" has been built`},
		{[]string{"etcd", "restore", "-i", inv}, 2, "--from FILE or HOST:latest is required"},
		{[]string{"etcd", "restore", "-i", inv, "--from", "nosuch:latest"}, 2, "nosuch is not an etcd host of the inventory"},
		{[]string{"etcd", "restore", "-i", inv, "--from", "nosuch.db"}, 2, "--from nosuch.db: no such file: give a snapshot file (clusterctl etcd snapshot -i FILE makes one)"},
		{[]string{"artifacts", "list"}, 2, "holds no artifacts (no manifest.json): fill it with clusterctl artifacts pull --kubernetes-version v1.37.2 --dir"},
		{[]string{"artifacts", "list", "--dir", empty}, 2, empty + " holds no artifacts"},
		{[]string{"artifacts", "list", empty}, 2, "takes the directory as --dir " + empty + ", not as an argument"},
		{[]string{"artifacts", "verify", "--kubernetes-version", "banana"}, 2, `--kubernetes-version: "banana" is not a Kubernetes version`},
		{[]string{"render", "-i", inv}, 2, "render needs --out DIR"},
		{[]string{"init", "--hosts", "CP_2=10.0.0.1"}, 2, `--hosts "CP_2=10.0.0.1": "CP_2" is not a host name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit (such as cp2)` + "\n"},
		{[]string{"init", "--hosts", "10.0.0.1", "--kubernetes-version", "v1.33.0"}, 2, "--kubernetes-version v1.33.0: version v1.33.0 is not supported"},
		{[]string{"up", "-i", inv, "--frob"}, 2, "unknown flag: --frob (see 'clusterctl up --help')"},
		{[]string{"up", "--node-timeout", "soon"}, 2, `invalid argument "soon" for "--node-timeout" flag: time: invalid duration "soon" (see 'clusterctl up --help')` + "\n"},
		{[]string{"up"}, 2, "no inventory: give one with -i FILE"},
		{[]string{"preflight", "-i", inv}, 1, "a host that cannot be reached cannot be set up"},
		{[]string{"exec", "-i", inv, "--", "true"}, 1, "cannot connect to 127.0.0.1:1"},
		{[]string{"reset", "-i", inv, "--dry-run"}, 1, "what reset would change on cp1, w1 is unknown: the dry run could not read them"},
		{[]string{"version", "extra"}, 2, `clusterctl version takes no arguments, got "extra"`},
		{[]string{"--version"}, 0, "clusterctl dev (commit "},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(stdout+stderr, tc.line) {
				t.Errorf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", code, tc.code, tc.line, stdout, stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, ".clusterctl")); err == nil {
				t.Errorf("a state directory was left in %s", dir)
				_ = os.RemoveAll(filepath.Join(dir, ".clusterctl"))
			}
		})
	}
}

// Any command line ends with an exit code the help documents and a message, never a panic; a usage
// error (2) is one line. Commands that pass their validation stop before the network (noNetwork).
func FuzzCommandLine(f *testing.F) {
	noNetwork = true
	f.Cleanup(func() { noNetwork = false })
	dir := f.TempDir()
	inv := filepath.Join(dir, "hosts.yaml")
	if err := os.WriteFile(inv, []byte("cluster: {name: c1}\nhosts:\n  - {name: cp1, address: 127.0.0.1, internalAddress: 10.0.0.1, roles: [control-plane]}\n  - {name: w1, address: 127.0.0.2, internalAddress: 10.0.0.2, roles: [worker]}\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		"up -i HOSTS --dry-run", "add-node -i HOSTS w1", "remove-node -i HOSTS w9 --yes", "upgrade -i HOSTS --to v1.99",
		"render -i HOSTS --out OUT", "artifacts list --dir OUT", "artifacts pull --kubernetes-version v1.37.2 --arch s390x",
		"etcd restore -i HOSTS --from HOSTS --yes", "certs check-expiration --fail-within 1x", "inventory show -i HOSTS -o yaml",
		"reset -i HOSTS --limit w1,,w2", "exec -i HOSTS -- true", "preflight -i HOSTS --forks -1", "completion fish", "--help",
		"up --max-clock-skew=-1s -i HOSTS", "certs rotate -i HOSTS --ca --only apiserver",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if !utf8.ValidString(line) {
			return
		}
		// What a command line writes lands in the test's directory: its files, a kubeconfig merged into,
		// caches.
		t.Chdir(dir)
		t.Setenv("HOME", dir)
		t.Setenv("KUBECONFIG", filepath.Join(dir, "kubeconfig"))
		t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
		line = strings.ReplaceAll(line, "HOSTS", inv)
		line = strings.ReplaceAll(line, "OUT", filepath.Join(dir, "out"))
		var out, errb bytes.Buffer
		code := run(context.Background(), strings.Fields(line), &out, &errb)
		stderr := errb.String()
		switch {
		case strings.Contains(stderr, "internal error"):
			t.Fatalf("%q: %s", line, stderr)
		case code != exitOK && code != exitFailed && code != exitUsage:
			t.Fatalf("%q: exit %d", line, code)
		case code == exitUsage && !strings.HasPrefix(stderr, "clusterctl: ") && !strings.Contains(stderr, "\nclusterctl: "):
			t.Fatalf("%q: exit 2 without a message: %q", line, stderr)
		}
	})
}

// Shell completion offers the inventory's host names (those not given yet) and each command's outputs.
func TestCompletion(t *testing.T) {
	_, inv := unreachableInventory(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "add-node", "-i", inv, "cp1", ""}, []string{"w1"}},
		{[]string{"__complete", "remove-node", "-i", inv, ""}, []string{"cp1", "w1"}},
		{[]string{"__complete", "up", "-i", inv, "--limit", "w1,"}, []string{"w1,cp1"}},
		{[]string{"__complete", "inventory", "show", "-o", ""}, []string{"text", "yaml", "json"}},
		{[]string{"__complete", "up", "-o", ""}, []string{"text", "json"}},
	} {
		code, stdout, _ := runCLI(t, tc.args...)
		var got []string
		for _, l := range strings.Split(stdout, "\n") {
			if l != "" && !strings.HasPrefix(l, ":") && !strings.HasPrefix(l, "Completion ended") {
				got = append(got, l)
			}
		}
		if code != 0 || strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%v: exit %d, %v; want %v", tc.args, code, got, tc.want)
		}
	}
}

// One vocabulary: every command that changes hosts has --dry-run; the same flag means the same everywhere.
func TestVocabulary(t *testing.T) {
	root := newRootCmd(&bytes.Buffer{}, &bytes.Buffer{})
	for _, path := range []string{"up", "add-node", "remove-node", "reset", "upgrade", "certs rotate", "etcd restore"} {
		c, _, err := root.Find(strings.Fields(path))
		if err != nil || c.Flags().Lookup("dry-run") == nil {
			t.Errorf("%s has no --dry-run", path)
		}
	}
	defaults := map[string]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Deprecated != "" || f.Name == "out" || f.Name == "dir" {
				return // --out and --dir name what each command writes or reads: their defaults differ
			}
			if d, ok := defaults[f.Name]; ok && d != f.DefValue && f.Name != "api-timeout" {
				t.Errorf("--%s defaults to %q on %s and %q elsewhere", f.Name, f.DefValue, c.CommandPath(), d)
			}
			defaults[f.Name] = f.DefValue
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if _, ok := defaults["timeout"]; ok {
		t.Error("a command still has --timeout (the vocabulary is --node-timeout)")
	}
}

// render writes the PKI and kubeconfigs into the state directory, but never makes it look as if a cluster
// existed: after it, the commands that operate a cluster refuse as before any; a bad --out is refused
// before anything is written.
func TestRenderBuildsNoCluster(t *testing.T) {
	dir, inv := unreachableInventory(t)
	state := filepath.Join(dir, ".clusterctl")
	if code, _, stderr := runCLI(t, "render", "-i", inv, "--out", "/proc/clusterctl-render"); code != 2 || !strings.Contains(stderr, "/proc/clusterctl-render") {
		t.Fatalf("render --out /proc/...: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("render with a bad --out wrote a state directory: %v", err)
	}
	if code, _, stderr := runCLI(t, "render", "-i", inv, "--out", filepath.Join(dir, "out")); code != 0 {
		t.Fatalf("render: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{{"kubeconfig"}, {"etcd", "status"}, {"add-node", "w1"}, {"certs", "rotate", "--yes"}} {
		code, stdout, stderr := runCLI(t, append(args, "-i", inv)...)
		if code != 2 || !strings.Contains(stderr, `no cluster "c1" has been built from this workstation`) || strings.Contains(stdout, "client-certificate-data") {
			t.Errorf("%s after render: exit %d\nstdout: %.200s\nstderr: %s", strings.Join(args, " "), code, stdout, stderr)
		}
	}
}

// A host that cannot be reached is named once per line, with the system's words and the tries made; a
// play left without hosts is not reported as done.
func TestUnreachableSaidOnce(t *testing.T) {
	_, inv := unreachableInventory(t)
	_, stdout, stderr := runCLI(t, "up", "-i", inv, "--dry-run", "--connect-timeout", "1s")
	all := stdout + stderr
	for _, line := range strings.Split(all, "\n") {
		if strings.Count(line, "cp1") > 1 || strings.Contains(line, "dial tcp") {
			t.Errorf("a line says cp1 twice, or the dialer's own words: %q", line)
		}
	}
	if !strings.Contains(all, "cannot connect to 127.0.0.1:1: connection refused (") || strings.Contains(all, "facts: 0 host(s)") {
		t.Errorf("output:\n%s", all)
	}
}

// With every host unreachable, check-expiration's JSON lists them with why (not "certificates": null),
// and ca-hash prints JSON with -o json.
func TestJSONWithUnreachableHosts(t *testing.T) {
	dir, inv := unreachableInventory(t)
	if code, _, stderr := runCLI(t, "render", "-i", inv, "--out", filepath.Join(dir, "out")); code != 0 {
		t.Fatalf("render: %d %s", code, stderr)
	}
	if err := statedir.MarkBuilt(filepath.Join(dir, ".clusterctl", "c1"), "c1", time.Now()); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "certs", "check-expiration", "-i", inv, "-o", "json", "--connect-timeout", "1s")
	var r struct {
		Type         string
		Certificates []json.RawMessage
		Unread       []struct{ Host, Status, Error string }
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || code != 1 || r.Type != "certificates" || r.Certificates == nil ||
		len(r.Unread) != 2 || r.Unread[0].Status != "unreachable" || !strings.Contains(r.Unread[0].Error, "cannot connect") {
		t.Errorf("exit %d, %v\nstdout: %s\nstderr: %s", code, err, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "certs", "ca-hash", "-i", inv, "-o", "json")
	if code != 0 || !strings.HasPrefix(stdout, `{"type":"ca_hash","status":"ok","ca":`) || !strings.Contains(stdout, `"caHash":"sha256:`) {
		t.Errorf("ca-hash -o json: exit %d %s", code, stdout)
	}
}

// -o json: a command stopped before its result (a bad inventory) still prints one JSON line with the error.
func TestJSONErrorLine(t *testing.T) {
	inv := filepath.Join(t.TempDir(), "hosts.yaml")
	if err := os.WriteFile(inv, []byte("cluster: {name: c1}\nhosts:\n  - {name: cp1, address: 999.1.1.1, roles: [control-plane]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := runCLI(t, "up", "-i", inv, "-o", "json")
	var r struct{ Type, Status, Error string }
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || code != 2 || r.Type != "error" || r.Status != "invalid" || !strings.Contains(r.Error, "hosts.cp1.address") {
		t.Errorf("exit %d, %v: %q", code, err, stdout)
	}
}
