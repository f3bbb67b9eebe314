package lab

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/test/lab/image"
)

// TestSelftest is `make lab-selftest`: three hosts boot systemd to "running", take SSH with strict host-key
// checking as root and as a sudo user, accept an SFTP upload, start a unit with systemctl enable --now, and
// run a container from an imported image with containerd.
func TestSelftest(t *testing.T) {
	l := Start(t, Options{Hosts: 3})
	if len(l.Hosts) != 3 {
		t.Fatalf("got %d hosts, want 3", len(l.Hosts))
	}

	t.Run("systemd running and root login", func(t *testing.T) {
		forEachHost(t, l, func(h Host) error {
			out, err := l.SSH("", h.Name, "systemctl is-system-running --wait; hostname")
			if err != nil {
				return err
			}
			if want := "running\n" + h.Name + "\n"; out != want {
				return fmt.Errorf("%s: got %q, want %q", h.Name, out, want)
			}
			return nil
		})
	})

	t.Run("sudo user", func(t *testing.T) {
		forEachHost(t, l, func(h Host) error {
			out, err := l.SSH(User, h.Name, "id -un; sudo -n id -u")
			if err != nil {
				return err
			}
			if out != User+"\n0\n" {
				return fmt.Errorf("%s: got %q", h.Name, out)
			}
			return nil
		})
	})

	t.Run("unknown host key is refused", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "known_hosts")
		data, err := os.ReadFile(l.KnownHosts())
		if err != nil {
			t.Fatal(err)
		}
		// Give cp1's names the key of another host: ssh must refuse to connect.
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		other := strings.Fields(lines[1])
		lines[0] = strings.Fields(lines[0])[0] + " " + other[1] + " " + other[2]
		if err := os.WriteFile(bad, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("ssh", "-F", l.SSHConfig(), "-o", "UserKnownHostsFile="+bad, l.Hosts[0].Name, "true").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "HOST IDENTIFICATION HAS CHANGED") {
			t.Fatalf("ssh with a wrong host key: err=%v, output:\n%s", err, out)
		}
	})

	t.Run("sftp upload", func(t *testing.T) {
		local := filepath.Join(t.TempDir(), "payload")
		payload := []byte(strings.Repeat("clusterctl lab payload\n", 4096))
		if err := os.WriteFile(local, payload, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(payload)
		forEachHost(t, l, func(h Host) error {
			if err := sftpPut(l, User, h.Name, local, "/tmp/payload"); err != nil {
				return err
			}
			out, err := l.SSH("", h.Name, "sha256sum /tmp/payload; stat -c %U /tmp/payload")
			if err != nil {
				return err
			}
			if want := hex.EncodeToString(sum[:]) + "  /tmp/payload\n" + User + "\n"; out != want {
				return fmt.Errorf("%s: got %q, want %q", h.Name, out, want)
			}
			return nil
		})
	})

	t.Run("systemctl enable --now", func(t *testing.T) {
		unit := "[Unit]\nDescription=lab selftest\n[Service]\nExecStart=/bin/sleep infinity\n[Install]\nWantedBy=multi-user.target\n"
		forEachHost(t, l, func(h Host) error {
			out, err := l.SSH("", h.Name, fmt.Sprintf("cat > /etc/systemd/system/lab-selftest.service <<'EOF'\n%sEOF\n"+
				"systemctl daemon-reload && systemctl enable --now lab-selftest.service 2>/dev/null && "+
				"systemctl is-active lab-selftest.service && systemctl is-enabled lab-selftest.service", unit))
			if err != nil {
				return err
			}
			if out != "active\nenabled\n" {
				return fmt.Errorf("%s: got %q", h.Name, out)
			}
			return nil
		})
	})

	t.Run("containerd runs an imported image", func(t *testing.T) {
		tar := helloImage(t)
		forEachHost(t, l, func(h Host) error {
			if err := sftpPut(l, "", h.Name, tar, "/tmp/hello.tar"); err != nil {
				return err
			}
			out, err := l.SSH("", h.Name, "ctr -n k8s.io images import /tmp/hello.tar >/dev/null && "+
				"ctr -n k8s.io run --rm clusterctl.local/lab/hello:selftest hello-selftest /hello")
			if err != nil {
				return err
			}
			if out != "hello from a lab container\n" {
				return fmt.Errorf("%s: got %q", h.Name, out)
			}
			return nil
		})
	})

	t.Run("a host reboots itself, and one that lost power is switched on: each boots again from its disk", func(t *testing.T) {
		cp1, w1 := l.Hosts[0].Name, l.Hosts[1].Name
		// A file on the disk, one in /run (a tmpfs: gone after a boot), and a unit enabled above (it starts
		// at boot).
		for _, h := range []string{cp1, w1} {
			l.Run(t, h, "echo kept >/var/tmp/lab-disk; echo gone >/run/lab-run")
		}
		start := time.Now()
		l.Reboot(t, cp1)
		t.Logf("%s rebooted: SSH again after %s", cp1, time.Since(start).Round(100*time.Millisecond))
		ids := l.BootIDs(t, w1)
		l.Kill(t, w1)
		start = time.Now()
		l.Start(t, ids, w1)
		t.Logf("%s switched on after losing power: SSH again after %s", w1, time.Since(start).Round(100*time.Millisecond))
		for _, h := range []string{cp1, w1} {
			out := l.Run(t, h, "systemctl is-system-running --wait; cat /var/tmp/lab-disk; cat /run/lab-run 2>/dev/null; systemctl is-active lab-selftest; ip -4 -o addr show host0 | awk '{print $4}'")
			if want := "running\nkept\nactive\n" + addressOf(l, h) + "/24\n"; out != want {
				t.Errorf("%s after its boot: %q, want %q", h, out, want)
			}
		}
	})
}

// addressOf is a lab host's address.
func addressOf(l *Lab, host string) string {
	for _, h := range l.Hosts {
		if h.Name == host {
			return h.Address
		}
	}
	return ""
}

// forEachHost runs f on every host at once and reports each failure.
func forEachHost(t *testing.T, l *Lab, f func(Host) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(l.Hosts))
	for i, h := range l.Hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(h)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func sftpPut(l *Lab, user, host, local, remote string) error {
	args := []string{"-F", l.SSHConfig(), "-b", "-"}
	if user != "" {
		args = append(args, "-o", "User="+user)
	}
	cmd := exec.Command("sftp", append(args, host)...)
	cmd.Stdin = strings.NewReader(fmt.Sprintf("put %s %s\n", local, remote))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sftp put to %s: %w: %s", host, err, out)
	}
	return nil
}

// helloImage builds testdata/hello as a static binary and packs it as an image tarball.
func helloImage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "hello")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/hello")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building hello: %v\n%s", err, out)
	}
	tar := filepath.Join(dir, "hello.tar")
	_, err := image.Write(tar, "clusterctl.local/lab/hello:selftest",
		[]image.File{{Path: "/hello", Source: bin}}, image.Config{Entrypoint: []string{"/hello"}, Arch: runtime.GOARCH})
	if err != nil {
		t.Fatal(err)
	}
	return tar
}
