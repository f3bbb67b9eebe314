package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestExitCodesAndOutput(t *testing.T) {
	const example = "../../inventory/examples/hosts.yaml"
	const kubespray = "../../inventory/examples/kubespray/inventory.ini"
	const bad = "../../inventory/testdata/bad/hosts-problems.yaml"
	// the keys the example names, so that it is valid without a warning
	home := t.TempDir()
	for _, key := range []string{"id_ed25519", "jump_ed25519", "gpu_ed25519"} {
		if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, ".ssh", key), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		stdout     []string
		stderr     []string
		noStderr   bool
		stdoutJSON bool
	}{
		{name: "valid native", args: []string{"inventory", "validate", "-i", example}, code: 0,
			stdout: []string{`valid native inventory: cluster "prod", Kubernetes v1.37.2, 5 hosts (3 control-plane, 2 workers, stacked etcd)`}, noStderr: true},
		{name: "valid kubespray ini", args: []string{"inventory", "validate", "-i", kubespray}, code: 0,
			stdout: []string{"valid ansible-ini inventory"}, stderr: []string{"notice: 3 variables clusterctl does not use"}},
		{name: "invalid", args: []string{"inventory", "validate", "-i", bad}, code: 2,
			stderr: []string{
				`hosts-problems.yaml:3:14: hosts.cp1.address: "10.0.0.300" is not a valid IPv4 address`,
				`hosts-problems.yaml:25:17: hosts.w3.taints[0].effect:`,
				"warning: hosts: 2 control-plane hosts",
				"inventory is invalid: 13 errors",
			}},
		{name: "invalid json", args: []string{"inventory", "validate", "-i", bad, "-o", "json"}, code: 2,
			stdout: []string{`{"type":"inventory_validation","status":"invalid",`, `"valid":false`, `"line":3,"column":14,"path":"hosts.cp1.address"`}, stdoutJSON: true},
		{name: "no inventory", args: []string{"inventory", "validate"}, code: 2, stderr: []string{"no inventory: give one with -i FILE"}},
		{name: "missing file", args: []string{"inventory", "validate", "-i", "nope.yaml"}, code: 2, stderr: []string{"inventory nope.yaml does not exist: give the path of your inventory with -i"}},
		{name: "unknown flag", args: []string{"inventory", "validate", "--frob"}, code: 2, stderr: []string{"unknown flag: --frob", "clusterctl inventory validate --help"}},
		{name: "bad output", args: []string{"inventory", "validate", "-i", example, "-o", "xml"}, code: 2, stderr: []string{`--output "xml" is not one of text, json`}},
		{name: "yaml only for show", args: []string{"inventory", "validate", "-i", example, "-o", "yaml"}, code: 2},
		{name: "bad forks", args: []string{"version", "--forks", "0"}, code: 2, stderr: []string{"--forks must be at least 1"}},
		{name: "show yaml", args: []string{"inventory", "show", "-i", kubespray, "-o", "yaml"}, code: 0,
			stdout: []string{"controlPlaneEndpoint: lb.example.com:8443", "- name: node6", "etcd_member_name"}},
		{name: "show json", args: []string{"inventory", "show", "-i", example, "-o", "json"}, code: 0,
			stdout: []string{`{"type":"inventory","status":"ok","apiVersion":"clusterctl/v1","kind":"Inventory","cluster":{`, `"format":"native"`, `"event-ttl":"2h"`}, stdoutJSON: true},
		{name: "show full", args: []string{"inventory", "show", "-i", example, "--full"}, code: 0,
			stdout: []string{"# The version of the file's schema, clusterctl/v1.\napiVersion: clusterctl/v1\n", "    podSubnet: 10.244.0.0/16\n", "    nodeName: cp1  # default\n"}},
		{name: "show full json", args: []string{"inventory", "show", "-i", example, "--full", "-o", "json"}, code: 2, stderr: []string{"--full writes YAML with comments"}},
		{name: "show invalid", args: []string{"inventory", "show", "-i", bad}, code: 2, stderr: []string{"inventory is invalid"}},
		{name: "version", args: []string{"version"}, code: 0, stdout: []string{"clusterctl dev (commit unknown)\nKubernetes v1.34 to v1.37, default v1.37.2; with v1.37.2 it installs etcd v3.7.0, CoreDNS v1.14.6", "containerd 2.2.1", "flannel v0.28.10, haproxy 3.2"}},
		{name: "--version", args: []string{"--version"}, code: 0, stdout: []string{"clusterctl dev (commit unknown)\n"}},
		{name: "version json", args: []string{"version", "-o", "json"}, code: 0, stdout: []string{`{"type":"version","status":"ok","version":"dev"`, `"components":{"kubernetes":"v1.37.2","etcd":"v3.7.0"`}, stdoutJSON: true},
		{name: "stray argument", args: []string{"version", "extra"}, code: 2},
		{name: "completion", args: []string{"completion", "bash"}, code: 0, stdout: []string{"__start_clusterctl"}},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, stderr: []string{`unknown command "frobnicate"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			if tc.noStderr && stderr != "" {
				t.Errorf("unexpected stderr: %s", stderr)
			}
			if tc.stdoutJSON && !json.Valid([]byte(stdout)) {
				t.Errorf("stdout is not JSON: %s", stdout)
			}
		})
	}
}

// Every command teaches by example.
func TestEveryCommandHasAnExample(t *testing.T) {
	var check func(c *cobra.Command)
	check = func(c *cobra.Command) {
		if c.Name() != "help" && !c.Hidden && c.Example == "" {
			t.Errorf("%s has no example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			check(sub)
		}
	}
	check(newRootCmd(&bytes.Buffer{}, &bytes.Buffer{}))
}

// render writes private keys: never through a symbolic link, never into a directory others can write to.
func TestRenderOutIsSafe(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "hosts.yaml")
	if err := os.WriteFile(inv, []byte("cluster: {name: c, certificates: {keyAlgorithm: ECDSA-P256}}\nhosts:\n  - {name: cp1, address: 10.10.0.11, roles: [control-plane]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if code, _, stderr := runCLI(t, "render", "-i", inv, "--out", out); code != 0 {
		t.Fatalf("fresh directory: %d %s", code, stderr)
	}
	// A link in place of a directory of the previous render.
	os.RemoveAll(filepath.Join(out, "cp1", "etc"))
	os.Symlink(filepath.Join(dir, "elsewhere"), filepath.Join(out, "cp1", "etc"))
	if code, _, stderr := runCLI(t, "render", "-i", inv, "--out", out); code != 2 || !strings.Contains(stderr, "is a symbolic link") {
		t.Errorf("a link inside --out: %d %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "elsewhere")); err == nil {
		t.Error("render wrote through the link")
	}
	link := filepath.Join(dir, "link")
	os.Symlink(out, link)
	if code, _, stderr := runCLI(t, "render", "-i", inv, "--out", link); code != 2 || !strings.Contains(stderr, "is a symbolic link") {
		t.Errorf("--out a link: %d %s", code, stderr)
	}
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if code, _, stderr := runCLI(t, "render", "-i", inv, "--out", open); code != 2 || !strings.Contains(stderr, "others can write into it") {
		t.Errorf("--out world-writable: %d %s", code, stderr)
	}
}

func TestMain(m *testing.M) {
	// The test binary runs as clusterctl itself when asked (for the signal test).
	if os.Getenv("CLUSTERCTL_TEST_AS_MAIN") == "1" {
		main()
	}
	// Commands run in this process would start this test binary as their connection keeper: they dial
	// each host themselves.
	startKeeper = func(string, string, string, time.Duration) error { return errors.New("no keeper in tests") }
	os.Exit(m.Run())
}

// SIGTERM ends a run that is busy with CPU-bound work (reading a large inventory) with exit code 130.
func TestSignalEndsBusyRun(t *testing.T) {
	var b strings.Builder
	b.WriteString("[kube_control_plane]\ncp1 ansible_host=10.1.0.1\n[kube_node]\n")
	for i := range 200000 {
		fmt.Fprintf(&b, "n%d ansible_host=10.%d.%d.%d\n", i, 2+i/62500, (i/250)%250, i%250+1)
	}
	inv := filepath.Join(t.TempDir(), "hosts.ini")
	if err := os.WriteFile(inv, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// What a start costs this binary (a -race build's package init alone is ~0.4 s of CPU here): the busy
	// child is signalled once it has spent twice that and 0.1 s more, past its start (where the signal
	// handling is set up first) and busy reading. A fixed sleep or a fixed CPU figure raced the start.
	start := exec.Command(os.Args[0], "version")
	start.Env = append(os.Environ(), "CLUSTERCTL_TEST_AS_MAIN=1")
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("version: %v\n%s", err, out)
	}
	startCPU := start.ProcessState.UserTime() + start.ProcessState.SystemTime()
	busy := int((2*startCPU + 100*time.Millisecond) / (10 * time.Millisecond)) // clock ticks of 10 ms

	cmd := exec.Command(os.Args[0], "inventory", "validate", "-i", inv)
	cmd.Env = append(os.Environ(), "CLUSTERCTL_TEST_AS_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for begun := time.Now(); cpuTicks(cmd.Process.Pid) < busy && time.Since(begun) < 30*time.Second; {
		time.Sleep(20 * time.Millisecond)
	}
	if cpuTicks(cmd.Process.Pid) < busy {
		t.Logf("the child did not reach %d ticks of CPU (start: %v)", busy, startCPU)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted || !strings.Contains(stderr.String(), interrupted) || strings.Contains(stderr.String(), "context canceled") {
		t.Errorf("after SIGTERM: %v, stderr %q; want exit code 130", err, stderr.String())
	}
}

// cpuTicks is a process's user and system CPU time, in clock ticks (/proc/PID/stat; 0 when unreadable).
func cpuTicks(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command (which may hold spaces) start after its closing parenthesis.
	_, rest, _ := strings.Cut(string(data), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return utime + stime
}

func TestWriteResultLine(t *testing.T) {
	var b bytes.Buffer
	refused := errors.New("refused")
	res := struct {
		From string `json:"from"`
	}{"v1.36.3"}
	if err := writeResultLine(&b, "upgrade_result", res, fmt.Errorf("%w: two minors", refused), refused, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"upgrade_result","status":"refused","error":"refused: two minors","from":"v1.36.3","duration_ms":1500}` + "\n"
	if b.String() != want {
		t.Errorf("got  %s\nwant %s", b.String(), want)
	}
	b.Reset()
	if err := writeResultLine(&b, "x", struct{}{}, nil, nil, 0); err != nil || b.String() != `{"type":"x","status":"ok","duration_ms":0}`+"\n" {
		t.Errorf("empty result: %q %v", b.String(), err)
	}
	b.Reset()
	var none *struct{ A int }
	if err := writeResultLine(&b, "x", none, errors.New("no member"), nil, 0); err != nil || b.String() != `{"type":"x","status":"failed","error":"no member","duration_ms":0}`+"\n" {
		t.Errorf("nil result: %q %v", b.String(), err)
	}
}

// An unreachable host's preflight error cannot be ignored (nothing is known of it, nothing can be put
// there): up refuses with exit 1 and says so, instead of crashing on the facts it never read (naming SSH
// itself is refused before: TestDocumentedErrors).
func TestUnreachableHostCannotBeIgnored(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "hosts.yaml")
	// Port 1 on loopback: the connection is refused at once.
	if err := os.WriteFile(inv, []byte("cluster: {name: c1}\nhosts:\n  - {name: cp1, address: 127.0.0.1, internalAddress: 10.0.0.1, roles: [control-plane], ssh: {port: 1}}\n  - {name: w1, address: 127.0.0.2, internalAddress: 10.0.0.2, roles: [worker], ssh: {port: 1}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ignore := range []string{"all", "Swap,Port-6443"} {
		code, stdout, stderr := runCLI(t, "up", "-i", inv, "--dry-run", "--ignore-preflight-errors="+ignore, "--ssh-accept-new")
		if code != 1 || !strings.Contains(stdout+stderr, "a host that cannot be reached cannot be set up") || strings.Contains(stdout+stderr, "--ignore-preflight-errors=SSH") {
			t.Errorf("--ignore-preflight-errors=%s: exit %d\nstdout: %s\nstderr: %s", ignore, code, stdout, stderr)
		}
	}
}

// An artifacts directory others may write to is refused with exit 2, naming it and the fix.
func TestUnsafeArtifactsDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "artifacts")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "artifacts", "pull", "--kubernetes-version", "v1.37.2", "--dir", dir)
	if code != 2 || !strings.Contains(stderr, dir) || !strings.Contains(stderr, "chmod go-w") {
		t.Errorf("exit %d, want 2 naming %s and the fix:\n%s", code, dir, stderr)
	}
}

var update = flag.Bool("update", false, "rewrite docs/cli.md from the commands")

// docs/cli.md is the commands' own description: regenerate it with -update when a command or flag changes.
func TestCLIReference(t *testing.T) {
	const file = "../../docs/cli.md"
	want := cliReference(newRootCmd(&bytes.Buffer{}, &bytes.Buffer{}))
	if *update {
		if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not what the commands say: go test ./cmd/clusterctl -run TestCLIReference -update", file)
	}
}

// An interrupted run says so in one sentence, exits 130, and marks no host unreachable for it: here
// interrupted while it connects to a host that accepts and never answers.
func TestInterruptedRun(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	inv := filepath.Join(t.TempDir(), "hosts.yaml")
	if err := os.WriteFile(inv, []byte(fmt.Sprintf("cluster: {name: c1}\nhosts:\n  - {name: cp1, address: 127.0.0.1, internalAddress: 10.0.0.1, roles: [control-plane], ssh: {port: %d}}\n", port)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"preflight", "-i", inv}, &out, &errb)
	all := out.String() + errb.String()
	if code != exitInterrupted || !strings.Contains(errb.String(), "clusterctl: "+interrupted) || strings.Contains(all, "context canceled") ||
		strings.Contains(all, "deadline exceeded") || strings.Contains(all, "UNREACHABLE") {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, out.String(), errb.String())
	}
}
