package facts

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runScript runs a script under this machine's sh (dash on Debian, as on the hosts), skipping the test
// where a tool it needs is missing.
func runScript(t *testing.T, script string, tools ...string) []byte {
	t.Helper()
	for _, tool := range append([]string{"sh"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s here", tool)
		}
	}
	cmd := exec.Command("sh", "-s")
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return out
}

// The kernel settings come as the kernel has them, every digit: sh's read takes a byte per system call, and
// an integer sysctl read that way ends after its first (kernel.keys.root_maxkeys 1000000 read as 1).
func TestFactsScriptReadsKernelSettings(t *testing.T) {
	f, err := ParseFacts("here", runScript(t, factsScript("unix:///run/containerd/containerd.sock", false, Ask{}), "grep"))
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, p := range kernelSettingPaths() {
		b, err := os.ReadFile("/proc/sys/" + p)
		if err != nil {
			continue
		}
		read++
		name := strings.ReplaceAll(p, "/", ".")
		if want := strings.TrimSpace(string(b)); f.KernelSettings[name] != want {
			t.Errorf("%s: the facts say %q, the kernel %q", name, f.KernelSettings[name], want)
		}
	}
	if read == 0 {
		t.Skip("no kernel setting readable here")
	}
	if f.Hostname == "" || len(f.Listening) == 0 && fileHas("/proc/net/tcp", " 0A ") {
		t.Errorf("facts: hostname %q, listening %v", f.Hostname, f.Listening)
	}
}

// fileHas reports whether the file holds s.
func fileHas(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}
