// Package lab gives integration and end-to-end tests real hosts: VM-like systemd-nspawn containers that boot
// systemd and OpenSSH (see lab.sh beside this file), started for one test and removed after it.
package lab

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/artifacts"
)

// Options say what lab a test needs.
type Options struct {
	// Hosts is how many hosts to start (default 3).
	Hosts int
	// ControlPlanes is how many of them are control-plane hosts in the inventory (default 1).
	ControlPlanes int
	// Base starts hosts without the Kubernetes node layer (no containerd): lighter and faster.
	Base bool
	// Bare starts hosts as fresh VMs to become nodes: the base layer alone (systemd, OpenSSH, sudo,
	// iproute2, iptables; no containerd, runc, CNI plugins, haproxy), clusterctl installing the rest.
	Bare bool
	// Release is the hosts' Debian release: bookworm (12, the default) or trixie (13; bare hosts only).
	Release string
	// VM starts QEMU virtual machines (Debian 13, bare, a kernel of their own, emulated CPU: vm.sh) in
	// place of containers.
	VM bool
	// Subnets spreads the hosts over that many subnets joined by a router (lab.sh up --subnets): nodes
	// reach each other only through a gateway. 0 or 1: one subnet.
	Subnets int
	// IP is the hosts' address families (lab.sh up --ip): "" or "4", "dual" (hosts.yaml a dual-stack
	// cluster, each host with both addresses), or "6".
	IP string
}

// Host is one lab host.
type Host struct {
	Name         string
	Address      string
	ControlPlane bool // its inventory role
}

// Lab is a running lab: its hosts and the files to reach them.
type Lab struct {
	Name  string
	Dir   string
	Hosts []Host
}

// Inventory is the clusterctl inventory of the lab (first hosts control-plane, the rest workers).
func (l *Lab) Inventory() string { return filepath.Join(l.Dir, "hosts.yaml") }

// SSHConfig is a file for ssh -F: every host by name, with strict host-key checking.
func (l *Lab) SSHConfig() string { return filepath.Join(l.Dir, "ssh_config") }

// KnownHosts holds every host's key, by name and address.
func (l *Lab) KnownHosts() string { return filepath.Join(l.Dir, "known_hosts") }

// Key is the private key that logs in as root and as the sudo user "lab" on every host.
func (l *Lab) Key() string { return filepath.Join(l.Dir, "id_ed25519") }

// User is the non-root login with password-less sudo on every host.
const User = "lab"

// Script is the path of lab.sh.
func Script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "lab.sh")
}

// Unavailable says why this machine cannot run a lab, or "" when it can.
func Unavailable() string {
	switch {
	case os.Getenv("CLUSTERCTL_LAB") == "off":
		return "disabled by CLUSTERCTL_LAB=off"
	case os.Geteuid() != 0:
		return "needs root (systemd-nspawn, bridges and cgroups)"
	}
	if _, err := exec.LookPath("systemd-nspawn"); err != nil {
		return "systemd-nspawn is not installed (test/lab/deps.sh installs it)"
	}
	if err := exec.Command("unshare", "--mount", "--propagation", "private", "true").Run(); err != nil {
		return "mount namespaces are not available: " + err.Error()
	}
	return ""
}

// Start brings up a lab for the test and removes it when the test ends. It skips the test, saying why, when
// the machine cannot run a lab.
func Start(t testing.TB, opts Options) *Lab {
	t.Helper()
	if reason := Unavailable(); reason != "" {
		t.Skip("lab: " + reason)
	}
	if opts.Hosts == 0 {
		opts.Hosts = 3
	}
	if opts.ControlPlanes == 0 {
		opts.ControlPlanes = 1
	}
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	l := &Lab{Name: "t" + hex.EncodeToString(b), Dir: t.TempDir()}
	layer := "node"
	switch {
	case opts.Base:
		layer = "base"
	case opts.Bare:
		layer = "bare"
	}
	t.Cleanup(func() {
		if out, err := exec.Command(Script(), "down", "--name", l.Name).CombinedOutput(); err != nil {
			t.Errorf("lab down: %v\n%s", err, out)
		}
	})
	args := []string{"up", "--name", l.Name, "--dir", l.Dir, "--hosts", fmt.Sprint(opts.Hosts),
		"--control-planes", fmt.Sprint(opts.ControlPlanes), "--layer", layer, "--release", cmp.Or(opts.Release, "bookworm")}
	if opts.Subnets > 1 {
		args = append(args, "--subnets", fmt.Sprint(opts.Subnets))
	}
	if opts.IP != "" {
		args = append(args, "--ip", opts.IP)
	}
	if opts.VM {
		if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
			t.Skip("lab: qemu-system-x86_64 is not installed (test/lab/deps.sh --vm installs it)")
		}
		args = append(args, "--vm")
	}
	cmd := exec.Command(Script(), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	t.Logf("lab %s: %s", l.Name, strings.TrimSpace(lastLine(out)))
	inv, diags, err := inventory.Load(l.Inventory())
	if err != nil {
		t.Fatal(err)
	}
	if err := diags.Err(); err != nil {
		t.Fatalf("the lab's inventory is invalid: %v", err)
	}
	for _, h := range inv.Hosts {
		l.Hosts = append(l.Hosts, Host{Name: h.Name, Address: h.Address, ControlPlane: h.Has(inventory.RoleControlPlane)})
	}
	return l
}

// ControlPlanes counts the lab's control-plane hosts.
func (l *Lab) ControlPlanes() int {
	n := 0
	for _, h := range l.Hosts {
		if h.ControlPlane {
			n++
		}
	}
	return n
}

// NetNS is the network namespace of a running lab host (/proc/PID/ns/net of its init), for tools of this
// machine to look into it: nsenter --net=NETNS nft list tables.
func (l *Lab) NetNS(t testing.TB, host string) string {
	t.Helper()
	root := os.Getenv("CLUSTERCTL_LAB_STATE")
	if root == "" {
		root = "/var/lib/clusterctl-lab"
	}
	pid, err := os.ReadFile(filepath.Join(root, "labs", l.Name, "hosts", host, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	// The pid is systemd-nspawn's; the host's init is its child.
	out, err := exec.Command("pgrep", "-P", strings.TrimSpace(string(pid))).Output()
	if err != nil {
		t.Fatalf("%s: the host's init: %v", host, err)
	}
	return "/proc/" + strings.Fields(string(out))[0] + "/ns/net"
}

// Timings is what lab.sh measured bringing the lab up (prepare_ms=... boot_to_ssh_ms=...).
func (l *Lab) Timings(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(l.Dir, "timings"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// SSH runs a command on a host with the system's ssh client as user ("" for root) and returns its output.
func (l *Lab) SSH(user, host, command string) (string, error) {
	args := []string{"-F", l.SSHConfig()}
	if user != "" {
		args = append(args, "-l", user)
	}
	args = append(args, host, command)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("ssh", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("ssh %s@%s %q: %w: %s", user, host, command, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Run runs a command as root on a host and fails the test if it fails.
func (l *Lab) Run(t testing.TB, host, command string) string {
	t.Helper()
	out, err := l.SSH("", host, command)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// KubernetesVersion is the version the lab builds, runs and pins; UpgradeFrom is the one a minor version
// below it that upgrade tests start from (the Makefile's K8S_VERSION and K8S_UPGRADE_FROM).
const (
	KubernetesVersion = "v1.37.2"
	UpgradeFrom       = "v1.36.3"
	// MinorsFrom is two minor versions below: the multi-minor upgrade test starts from it (make test-long
	// builds its artifacts; the Makefile's K8S_MINORS_FROM).
	MinorsFrom = "v1.35.4"
)

// KubeadmOnly are the other versions clusterctl accepts (v1.34 so that clusters made before can be upgraded,
// v1.35): the lab builds their kubeadm alone (build-k8s.sh --kubeadm; the Makefile's K8S_KUBEADM_ONLY) to
// check it decodes what clusterctl writes, and runs no cluster of them.
var KubeadmOnly = []string{"v1.34.4", "v1.35.4"}

// ArtifactsDir is where artifacts.sh leaves the artifacts of a version.
func ArtifactsDir(version string) string {
	cache := os.Getenv("CLUSTERCTL_LAB_CACHE")
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = filepath.Join(os.Getenv("HOME"), ".cache")
		}
		cache = filepath.Join(base, "clusterctl-lab")
	}
	return filepath.Join(cache, version)
}

// Artifacts returns the verified artifacts directory of the lab's Kubernetes version. Building it takes
// ~20 minutes once (make artifacts, which make test runs first), so a test skips, saying so, when it is not
// there.
func Artifacts(t testing.TB) (string, *artifacts.Manifest) {
	t.Helper()
	return ArtifactsOf(t, KubernetesVersion)
}

// ArtifactsOf is Artifacts for another version the lab builds (UpgradeFrom).
func ArtifactsOf(t testing.TB, version string) (string, *artifacts.Manifest) {
	t.Helper()
	dir := ArtifactsDir(version)
	m, err := artifacts.Load(dir)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("no Kubernetes %s artifacts in %s: `make artifacts` builds them (~10-20 min each, once)", version, dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(dir); err != nil {
		t.Fatalf("artifacts in %s do not match their manifest:\n%v", dir, err)
	}
	return dir, m
}

// Kill powers a host off at once: every process in its cgroups is killed (a node failure). The lab's
// cleanup still removes it.
func (l *Lab) Kill(t testing.TB, host string) {
	t.Helper()
	if out, err := exec.Command(Script(), "kill", "--name", l.Name, host).CombinedOutput(); err != nil {
		t.Fatalf("lab kill %s: %v\n%s", host, err, out)
	}
}

// Start switches hosts that lost power (Kill) on again: they boot from their disks with their addresses.
// It returns once each answers on SSH with a boot ID other than the one it had before (bootIDs, read
// before Kill; a host missing from it only has to answer).
func (l *Lab) Start(t testing.TB, bootIDs map[string]string, hosts ...string) {
	t.Helper()
	if out, err := exec.Command(Script(), append([]string{"start", "--name", l.Name}, hosts...)...).CombinedOutput(); err != nil {
		t.Fatalf("lab start %v: %v\n%s", hosts, err, out)
	}
	l.waitBoot(t, bootIDs, hosts)
}

// Reboot has each host reboot itself, as a machine does (its systemd stops its units, then the host boots
// again from its disk, with its addresses), all at once, and returns once each answers on SSH with a new
// boot ID.
func (l *Lab) Reboot(t testing.TB, hosts ...string) {
	t.Helper()
	ids := l.BootIDs(t, hosts...)
	if out, err := exec.Command(Script(), append([]string{"reboot", "--name", l.Name}, hosts...)...).CombinedOutput(); err != nil {
		t.Fatalf("lab reboot %v: %v\n%s", hosts, err, out)
	}
	l.waitBoot(t, ids, hosts)
}

// BootIDs are the hosts' boot IDs (/proc/sys/kernel/random/boot_id: new at every boot).
func (l *Lab) BootIDs(t testing.TB, hosts ...string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, h := range hosts {
		ids[h] = strings.TrimSpace(l.Run(t, h, "cat /proc/sys/kernel/random/boot_id"))
	}
	return ids
}

// waitBoot waits (3 minutes at most) until each host answers on SSH with a boot ID other than ids'.
func (l *Lab) waitBoot(t testing.TB, ids map[string]string, hosts []string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for _, h := range hosts {
		for {
			// A host that does not answer yet: each attempt given 3 s, not ssh's default of minutes.
			out, err := exec.Command("ssh", "-F", l.SSHConfig(), "-o", "ConnectTimeout=3", h, "cat /proc/sys/kernel/random/boot_id").Output()
			if id := strings.TrimSpace(string(out)); err == nil && id != "" && id != ids[h] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s has not booted again within 3 minutes (ssh: %v)", h, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// Link cuts (up false) or restores a host's link to the lab's bridge: its packets are lost, as with a cut
// cable, while it runs on. The lab's cleanup removes the link with the host either way.
func (l *Lab) Link(t testing.TB, host string, up bool) {
	t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	if out, err := exec.Command(Script(), "link", "--name", l.Name, host, state).CombinedOutput(); err != nil {
		t.Fatalf("lab link %s %s: %v\n%s", host, state, err, out)
	}
}

// Kubeadm is kubeadm of a version the lab builds (build-k8s.sh puts it beside the artifacts, outside them:
// clusterctl does not deliver it); the test is skipped, saying so, when it has not been built.
func Kubeadm(t testing.TB, version string) string {
	t.Helper()
	p := filepath.Join(ArtifactsDir(version), "tools", "linux-"+runtime.GOARCH, "kubeadm")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("no kubeadm %s in %s: `make artifacts` builds it (test/lab/build-k8s.sh)", version, filepath.Dir(p))
	}
	return p
}

// Conformance is the directory conformance.sh makes for a version: bin/linux-<arch>/{e2e.test,ginkgo} and
// images/ (the images the [Conformance] tests run, packed offline, and images.txt listing them). The test
// is skipped, saying so, when it has not been built.
func Conformance(t testing.TB, version string) string {
	t.Helper()
	dir := filepath.Join(ArtifactsDir(version), "conformance")
	for _, p := range []string{"bin/linux-" + runtime.GOARCH + "/e2e.test", "bin/linux-" + runtime.GOARCH + "/ginkgo", "images/images.txt"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Skipf("no conformance suite for %s in %s: test/lab/conformance.sh builds it (~15 min once)", version, dir)
		}
	}
	return dir
}
