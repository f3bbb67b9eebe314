// Package integration runs clusterctl's transport and preflight against real OpenSSH servers on lab hosts.
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/preflight"
	"github.com/clusterctl/clusterctl/test/lab"
	"github.com/clusterctl/clusterctl/transport"
)

func env(t *testing.T, l *lab.Lab, edit func(*inventory.Inventory)) *playbooks.Env {
	t.Helper()
	return envWith(t, l, edit, transport.Options{})
}

// envWith is env with the dialer's options (the lab's known_hosts and no ssh_config are filled in).
func envWith(t *testing.T, l *lab.Lab, edit func(*inventory.Inventory), opts transport.Options) *playbooks.Env {
	t.Helper()
	inv, diags, err := inventory.Load(l.Inventory())
	if err != nil || diags.HasErrors() {
		t.Fatalf("%v %v", err, diags.Err())
	}
	if edit != nil {
		edit(inv)
	}
	opts.ClusterKnownHosts, opts.KnownHosts, opts.SSHConfig = l.KnownHosts(), []string{}, "none"
	d, err := transport.NewDialer(opts)
	if err != nil {
		t.Fatal(err)
	}
	hosts, _ := inv.Limit(nil)
	e := playbooks.NewEnv(playbooks.EnvConfig{Inv: inv, Hosts: hosts, Dialer: d, Forks: 10})
	t.Cleanup(e.Close)
	return e
}

func TestTransportOnRealSSH(t *testing.T) {
	l := lab.Start(t, lab.Options{Hosts: 3})
	ctx := context.Background()

	t.Run("root: commands, uploads, reads", func(t *testing.T) {
		e := env(t, l, nil)
		if _, err := playbooks.Connect(ctx, e, e.Hosts, 0); err != nil {
			t.Fatal(err)
		}
		c := e.Conn("w1")
		res, err := c.Run(ctx, "id -u; hostname", nil)
		if err != nil || string(res.Stdout) != "0\nw1\n" {
			t.Fatalf("%q %v", res.Stdout, err)
		}
		_, err = c.Run(ctx, "ls /nonexistent", nil)
		var ce *transport.CommandError
		if !errors.As(err, &ce) || ce.ExitCode != 2 || !strings.Contains(ce.Stderr, "No such file") || ce.Host != "w1" {
			t.Fatalf("failed command: %v", err)
		}
		files := []transport.File{
			{Path: "/etc/kubernetes/pki/ca.key", Data: []byte("key"), Mode: 0o600},
			{Path: "/var/lib/clusterctl-test/owned", Data: []byte("lab's"), Mode: 0o640, UID: 1000, GID: 1000},
		}
		changed, err := c.Put(ctx, files)
		if err != nil || !changed[0] || !changed[1] {
			t.Fatalf("first put: %v %v", changed, err)
		}
		out := l.Run(t, "w1", "stat -c '%a %U %G' /etc/kubernetes/pki/ca.key /var/lib/clusterctl-test/owned; cat /var/lib/clusterctl-test/owned")
		if out != "600 root root\n640 lab lab\nlab's" {
			t.Errorf("remote files: %q", out)
		}
		if changed, err = c.Put(ctx, files); err != nil || changed[0] || changed[1] {
			t.Errorf("second put changed %v, %v", changed, err)
		}
		got, err := c.Get(ctx, "/etc/kubernetes/pki/ca.key")
		if err != nil || string(got) != "key" {
			t.Errorf("Get: %q %v", got, err)
		}
		privateUntilChmod(t, ctx, l, c, "w1")
	})

	t.Run("non-root user with sudo", func(t *testing.T) {
		e := env(t, l, func(inv *inventory.Inventory) { inv.SSH.User = lab.User })
		if _, err := playbooks.Connect(ctx, e, e.Hosts, 0); err != nil {
			t.Fatal(err)
		}
		c := e.Conn("w2")
		res, err := c.Run(ctx, "id -u; echo $SUDO_USER", nil)
		if err != nil || string(res.Stdout) != "0\nlab\n" {
			t.Fatalf("become: %q %v", res.Stdout, err)
		}
		// SFTP through sudo sftp-server: a root-owned file in a root-only directory.
		if _, err := c.Put(ctx, []transport.File{{Path: "/root/secret", Data: []byte("s"), Mode: 0o600}}); err != nil {
			t.Fatal(err)
		}
		if out := l.Run(t, "w2", "stat -c '%a %U' /root/secret"); out != "600 root\n" {
			t.Errorf("file written through sudo: %q", out)
		}
		privateUntilChmod(t, ctx, l, c, "w2")
		// Without become, the same user is refused by the remote side: the error names the host and command.
		no := false
		e2 := env(t, l, func(inv *inventory.Inventory) { inv.SSH.User = lab.User; inv.SSH.Become = &no })
		if _, err := playbooks.Connect(ctx, e2, e2.Hosts[2:], 0); err != nil {
			t.Fatal(err)
		}
		_, err = e2.Conn("w2").Run(ctx, "cat /root/secret", nil)
		if err == nil || !strings.Contains(err.Error(), `w2: command "cat /root/secret" failed`) || !strings.Contains(err.Error(), "Permission denied") {
			t.Errorf("unprivileged read: %v", err)
		}
	})

	t.Run("bastion", func(t *testing.T) {
		cp1 := l.Hosts[0]
		e := env(t, l, func(inv *inventory.Inventory) {
			inv.SSH.Bastions = []inventory.Bastion{{Address: cp1.Address, User: "root"}}
		})
		if _, err := playbooks.Connect(ctx, e, e.Hosts[1:], 0); err != nil {
			t.Fatal(err)
		}
		// The target sees the connection coming from the bastion, not from the workstation.
		res, err := e.Conn("w1").Run(ctx, "echo $SSH_CLIENT", nil)
		if err != nil || !strings.HasPrefix(string(res.Stdout), cp1.Address+" ") {
			t.Errorf("SSH_CLIENT through the bastion: %q %v", res.Stdout, err)
		}
	})

	t.Run("cancel ends the remote command", func(t *testing.T) {
		e := env(t, l, nil)
		if _, err := playbooks.Connect(ctx, e, e.Hosts[:1], 0); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err := e.Conn("cp1").Run(cctx, "sleep 313", nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v", err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			out, _ := l.SSH("", "cp1", "pgrep -fx 'sleep 313' || true")
			if strings.TrimSpace(out) == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("remote command still running: %s", out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("changed host key is refused", func(t *testing.T) {
		l.Run(t, "w2", "rm /etc/ssh/ssh_host_ed25519_key* && ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key && systemctl restart ssh")
		e := env(t, l, nil)
		results, _ := playbooks.Connect(ctx, e, e.Hosts, 1)
		for _, r := range results {
			var hk *transport.HostKeyError
			switch r.Host {
			case "w2":
				if r.Status != transport.StatusUnreachable || !errors.As(r.Err, &hk) || !strings.Contains(r.Err.Error(), "HOST KEY MISMATCH") {
					t.Errorf("w2 with a new key: %s %v", r.Status, r.Err)
				}
			default:
				if r.Err != nil {
					t.Errorf("%s: %v", r.Host, r.Err)
				}
			}
		}
	})
}

func TestPreflightOnLabHosts(t *testing.T) {
	l := lab.Start(t, lab.Options{Hosts: 3})
	ctx := context.Background()

	e := env(t, l, nil)
	report, err := playbooks.Preflight(ctx, e, playbooks.PreflightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if report.Failed() {
		t.Fatalf("fresh hosts fail preflight: %+v", report)
	}
	for _, h := range report.Hosts {
		if h.Facts == nil || h.Facts.Hostname != h.Name || h.Facts.OS != "debian" || !h.Facts.CRISocket {
			t.Errorf("%s facts: %+v", h.Name, h.Facts)
		}
	}
	// Nothing of the probes is left listening.
	if out := l.Run(t, "cp1", "ss -Hltn sport = :6443 | wc -l"); strings.TrimSpace(out) != "0" {
		t.Errorf("a test listener is left on cp1:6443: %s", out)
	}

	// A host that listens on 6443 fails Port-6443, naming that host, while the others pass; a non-empty
	// manifests directory on a worker fails DirAvailable--etc-kubernetes-manifests; a host whose clock is a
	// minute ahead fails ClockSkew. Lab hosts share this machine's clock (no time namespace moves the
	// wall clock), so w1's is read through a date(1) ahead of the real one, first in root's PATH.
	l.Run(t, "cp1", "systemd-run --unit=squat6443 socat TCP-LISTEN:6443,fork,reuseaddr SYSTEM:true && sleep 0.5")
	l.Run(t, "w2", "mkdir -p /etc/kubernetes/manifests && echo x > /etc/kubernetes/manifests/stray.yaml")
	l.Run(t, "w1", `printf '%s\n' '#!/bin/sh' 'if [ "$1" = +%s.%N ]; then /bin/date +%s.%N | awk '"'"'{ printf "%.9f\n", $1 + 60 }'"'"'; else exec /bin/date "$@"; fi' >/usr/local/bin/date && chmod 755 /usr/local/bin/date && date +%s.%N`)
	t.Cleanup(func() { _, _ = l.SSH("", "w1", "rm -f /usr/local/bin/date") })
	bin := buildCLI(t)
	cmd := exec.Command(bin, "preflight", "-i", l.Inventory(), "--state-dir", filepath.Join(t.TempDir(), "state"), "-o", "json", "--ssh-config", "none")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("clusterctl preflight: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var final struct {
		Type  string                    `json:"type"`
		Hosts []playbooks.PreflightHost `json:"hosts"`
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	for _, line := range lines {
		var probe map[string]any
		if err := json.Unmarshal([]byte(line), &probe); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &final); err != nil || final.Type != "preflight_report" {
		t.Fatalf("last line: %s (%v)", lines[len(lines)-1], err)
	}
	errorsOf := func(host string) []string {
		var out []string
		for _, h := range final.Hosts {
			if h.Name == host {
				for _, f := range h.Findings {
					if f.Severity == preflight.SevError {
						out = append(out, f.Check)
					}
				}
			}
		}
		return out
	}
	if got := errorsOf("cp1"); len(got) != 1 || got[0] != "Port-6443" {
		t.Errorf("cp1 errors: %v", got)
	}
	if got := errorsOf("w1"); len(got) != 1 || got[0] != "ClockSkew" {
		t.Errorf("w1 errors: %v", got)
	}
	// The message names the skew measured and its uncertainty (half the round trip that read the clock).
	for _, h := range final.Hosts {
		for _, f := range h.Findings {
			if f.Check == "ClockSkew" {
				t.Logf("%s: %s", h.Name, f.Message)
				if !strings.Contains(f.Message, "(±") || !strings.Contains(f.Message, "more than 5s") {
					t.Errorf("the ClockSkew error does not name the skew, its uncertainty and the limit: %s", f.Message)
				}
			}
		}
	}
	if got := errorsOf("w2"); len(got) != 1 || got[0] != "DirAvailable--etc-kubernetes-manifests" {
		t.Errorf("w2 errors: %v", got)
	}

	// Ignoring both lets the run pass.
	cmd = exec.Command(bin, "preflight", "-i", l.Inventory(), "--state-dir", filepath.Join(t.TempDir(), "state"), "--ssh-config", "none",
		"--ignore-preflight-errors=Port-6443,DirAvailable--etc-kubernetes-manifests,ClockSkew")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "[IGNORED Port-6443]") {
		t.Errorf("with ignores: %v\n%s", err, out)
	}
}

var cliPath string

// buildCLI builds clusterctl once per test binary.
func buildCLI(t *testing.T) string {
	t.Helper()
	if cliPath != "" {
		return cliPath
	}
	dir, err := os.MkdirTemp("", "clusterctl-bin")
	if err != nil {
		t.Fatal(err)
	}
	cliPath = filepath.Join(dir, "clusterctl")
	out, err := exec.Command("go", "build", "-o", cliPath, "github.com/clusterctl/clusterctl/cmd/clusterctl").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return cliPath
}

// privateUntilChmod checks that sftp-server runs with umask 077 (what it creates with default attributes,
// as an upload's temporary file is before its chmod, is 0600) and that Put gives the directories it creates
// their final mode (0755) rather than one that depends on that umask.
func privateUntilChmod(t *testing.T, ctx context.Context, l *lab.Lab, c *transport.Conn, host string) {
	t.Helper()
	client, err := c.SFTP(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := client.Create("/var/tmp/clusterctl-umask")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := c.Put(ctx, []transport.File{{Path: "/var/lib/clusterctl-dirs/a/b/file", Data: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	out := l.Run(t, host, "stat -c '%a' /var/tmp/clusterctl-umask /var/lib/clusterctl-dirs /var/lib/clusterctl-dirs/a/b /var/lib/clusterctl-dirs/a/b/file; rm -rf /var/tmp/clusterctl-umask /var/lib/clusterctl-dirs")
	if out != "600\n755\n755\n644\n" {
		t.Errorf("%s: modes of a file sftp-server created, the directories Put made, the file: %q, want 600, 755, 755, 644", host, out)
	}
}
