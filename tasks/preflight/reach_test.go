package preflight

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The probe's address reaches bash as an argument, never as part of its script: a fake timeout on PATH
// prints the words it was given.
func TestProbeCommandKeepsTheAddressAnArgument(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "timeout"), []byte("#!/bin/sh\nprintf '%s\\n' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, ip := range []string{"10.0.0.1", "fe80::1%;touch${IFS}/x", "1.2.3.4'; reboot; '", "$(id)"} {
		cmd := exec.Command("sh", "-c", ProbeCommand(ip, 6443))
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		out, err := cmd.Output()
		want := strings.Join([]string{"5", "bash", "-c", `exec 3<>"/dev/tcp/$1/$2"`, "probe", ip, "6443"}, "\n") + "\n"
		if err != nil || string(out) != want {
			t.Errorf("%q: the command %q gave the words\n%s(%v), want\n%s", ip, ProbeCommand(ip, 6443), out, err, want)
		}
	}
}
