package transport

import (
	"strings"
	"testing"
)

// A command is named in the -vv log by its program, a script by its opening comment: never by its data.
func TestCommandLabel(t *testing.T) {
	long := "# " + strings.Repeat("x", 100)
	for _, c := range []struct {
		command, stdin, want string
	}{
		{"sh -s", "# Managed by clusterctl: (re)start the pod routes unit\nset -e\nip route add 10.0.0.0/8\n", "sh -s: # Managed by clusterctl: (re)start the pod routes unit"},
		{"sh -s", "set -e\necho secret\n", "sh -s"},
		{"sh -s", long, "sh -s: " + long[:maxLabel] + "…"},
		{"cat /proc/sys/kernel/random/boot_id\nif [ -e /run/reboot-required ]; then", "", "cat"},
		{"  systemctl --no-block reboot", "", "systemctl"},
		{"kubectl --token abc get nodes", "", "kubectl"},
		{"TOKEN=abc\tkubeadm join", "", "TOKEN=…"},
		{"sh -s", "# " + strings.Repeat("x", maxLabel-3) + "é and more", "sh -s: # " + strings.Repeat("x", maxLabel-3) + "…"}, // not half of é
	} {
		if got := commandLabel(c.command, []byte(c.stdin)); got != c.want {
			t.Errorf("commandLabel(%q, %q) = %q, want %q", c.command, c.stdin, got, c.want)
		}
	}
}
