package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// resetSysctls are the kernel settings up changes whose values before it a test keeps: reset puts them back.
// (bridge-nf-call-* exist only once br_netfilter is loaded, which up does and reset leaves, as kubeadm does.)
const resetSysctls = "net.ipv4.ip_forward"

// Sysctls reads resetSysctls on a host, before up.
func Sysctls(t testing.TB, c *Cluster, host string) string {
	t.Helper()
	return strings.TrimSpace(c.Lab.Run(t, host, "sysctl "+resetSysctls))
}

// leftoverPaths are what up makes on a host, and the kubelet, the runtime and the CNI plugins write there:
// after reset none may be left.
var leftoverPaths = []string{
	"/etc/kubernetes", "/var/lib/kubelet", "/var/lib/etcd", "/var/lib/clusterctl", "/etc/containerd", "/etc/cni",
	"/opt/cni", "/var/lib/cni", "/var/log/pods", "/var/log/containers", "/run/containerd",
	"/etc/systemd/system/kubelet.service", "/etc/systemd/system/containerd.service",
	"/etc/systemd/system/clusterctl-pod-routes.service", "/etc/systemd/networkd.conf.d/clusterctl.conf",
	"/etc/sysctl.d/99-kubernetes.conf", "/etc/modules-load.d/kubernetes.conf", "/etc/crictl.yaml",
	"/var/log/kubernetes",
}

// ResetLeftovers lists what reset left of the cluster on a host: processes of the runtime, the kubelet and
// the Pods; units; files; kernel settings other than before (Sysctls before up). Empty: nothing.
func ResetLeftovers(t testing.TB, c *Cluster, host, sysctlsBefore string) string {
	t.Helper()
	script := `ps -e -o comm= | grep -E '^(containerd|containerd-shim|kubelet|etcd|kube-|coredns|pause|probe)' | sed 's/^/process: /'
systemctl list-unit-files --no-legend 'kubelet*' 'containerd*' 'clusterctl-*' etcd.service 2>/dev/null | sed 's/^/unit file: /'
systemctl list-units --no-legend --plain --state=active 'kubepods*' 'kubelet*' 'containerd*' 'clusterctl-*' 'run-containerd*' 2>/dev/null | sed 's/^/active unit: /'
ip link show cni0 >/dev/null 2>&1 && echo "link: cni0"
ip rule show priority 32700 | sed 's/^/rule: /'
for p in /etc/systemd/network/*.network.d /etc/NetworkManager/dispatcher.d/50-clusterctl-pod-routes /etc/network/if-up.d/clusterctl-pod-routes; do
  [ -e "$p" ] || [ -L "$p" ] && echo "path: $p"; done
for p in ` + strings.Join(leftoverPaths, " ") + `; do [ -e "$p" ] && { echo "path: $p"; find "$p" -mindepth 1 -maxdepth 3 | head -5 | sed 's/^/  holding /'; }; done
true`
	out := strings.TrimSpace(c.Lab.Run(t, host, script))
	if now := Sysctls(t, c, host); now != sysctlsBefore {
		out = strings.TrimSpace(out + "\nsysctl: " + now + " (before up: " + sysctlsBefore + ")")
	}
	return out
}

// appendFile appends text to a file, creating it (0600) when missing.
func appendFile(t testing.TB, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes a file of the test (0600).
func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// dirDigest is a digest of every file under dir (path, mode, content): equal digests, same files.
func dirDigest(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v %d\n", p, info.Mode(), len(data))
		h.Write(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
