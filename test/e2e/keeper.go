package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// CheckKeptConnections checks that commands in a row share each host's login (the connection keeper):
// the shells of two `exec`s on host have the same sshd as their parent, and with --ssh-persist 0 each
// has a login of its own.
func CheckKeptConnections(t *testing.T, c *Cluster, host string) {
	t.Helper()
	sshd := func(extra ...string) string {
		t.Helper()
		// The inventory before "--": Cluster.Run puts it last, in the remote command.
		args := append([]string{"exec", "-i", c.Inventory, "--limit", host, "-o", "json"}, extra...)
		stdout, stderr, code := RunClusterctl(t, append(args, "--", "echo $PPID")...)
		for _, l := range strings.Split(stdout, "\n") {
			var e struct{ Type, Host, Stdout string }
			if json.Unmarshal([]byte(l), &e) == nil && e.Type == "exec" && e.Host == host && code == 0 {
				return strings.TrimSpace(e.Stdout)
			}
		}
		t.Fatalf("exec on %s: exit %d\n%s\n%s", host, code, stdout, tail(stderr, 10))
		return ""
	}
	// A command with no keeper running logs in itself and starts one: the first exec makes sure of it.
	sshd()
	first, second := sshd(), sshd()
	if first == "" || first != second {
		t.Errorf("two commands in a row logged in to %s twice (their shells' sshd: %s, %s), want one login kept", host, first, second)
	}
	a, b := sshd("--ssh-persist", "0"), sshd("--ssh-persist", "0")
	if a == b || a == first || b == first {
		t.Errorf("with --ssh-persist 0 the commands' shells' sshd: %s, %s (kept: %s), want a login each", a, b, first)
	}
	t.Logf("%s: two commands on one login (sshd %s); with --ssh-persist 0, sshd %s and %s", host, first, a, b)
}
