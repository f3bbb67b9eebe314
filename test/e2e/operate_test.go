package e2e

import (
	"bufio"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestOperateUp runs up as CI and operators do: a dry run that touches nothing, an up killed during the push
// and finished by a re-run, a no-op re-run that restarts nothing, a re-run that moves kube-proxy to
// nftables, reset, and ups killed while waiting for the
// API server and during the joins, each finished by a re-run; then a CA rotation killed and resumed, and a
// power cut of every host at once, from which the cluster comes back by itself.
func TestOperateUp(t *testing.T) {
	c := NewCluster(t, 3, 1)
	hosts := []string{"cp1", "w1", "w2"}
	hashes := func() map[string]string {
		out := map[string]string{}
		for _, h := range hosts {
			out[h] = c.Hash(t, h)
		}
		return out
	}
	dryRun := func(t *testing.T) int {
		before := hashes()
		stdout, stderr, code := c.Run(t, "up", "--dry-run", "--output", "json")
		if code != 0 {
			t.Fatalf("dry run: exit %d\n%s", code, stderr)
		}
		var changes int
		var found bool
		sc := bufio.NewScanner(strings.NewReader(stdout))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var r struct {
				Type string `json:"type"`
				Plan []struct {
					Host    string            `json:"host"`
					Files   []json.RawMessage `json:"files"`
					Actions []string          `json:"actions"`
				} `json:"plan"`
			}
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("not JSON: %v: %s", err, sc.Text())
			}
			if r.Type == "up_result" {
				found = true
				for _, p := range r.Plan {
					changes += len(p.Files) + len(p.Actions)
				}
			}
		}
		if !found {
			t.Fatal("no up_result line")
		}
		after := hashes()
		for _, h := range hosts {
			if before[h] != after[h] {
				t.Errorf("the dry run changed files under /etc or /var/lib on %s", h)
			}
		}
		return changes
	}
	healthy := func(t *testing.T, res *UpResult) {
		if len(res.Nodes) != 3 {
			t.Fatalf("%d nodes, want 3", len(res.Nodes))
		}
		for _, n := range res.Nodes {
			if !n.Ready {
				t.Errorf("node %s is not Ready", n.Name)
			}
		}
		// up returns once the control plane answers and works (the controller-manager signed and allocated,
		// the scheduler placed CoreDNS), as kubeadm init does; the control plane's mirror Pods may lag: the
		// kubelet makes one at its next sync of the static Pod (its first probe result, up to 10 s after
		// its start) and reports its phase at its status manager's next round (every 10 s).
		var out string
		allRunning := func() bool {
			out = c.MustK(t, "get", "pods", "-n", "kube-system", "-o", "jsonpath={range .items[*]}{.metadata.name} {.status.phase}{\"\\n\"}{end}")
			return strings.Count(out, " Running") == strings.Count(out, "\n") && strings.Count(out, "\n") >= 9
		}
		ok := allRunning()
		for end := time.Now().Add(30 * time.Second); !ok && time.Now().Before(end); ok = allRunning() {
			time.Sleep(time.Second)
		}
		if !ok {
			t.Errorf("kube-system pods not all Running 30 s after up:\n%s", out)
		}
	}

	// Files and rules of the hosts' own, made before clusterctl came: reset must leave them as they were.
	const own = `printf '# the host own containerd configuration\nversion = 2\n' >/etc/containerd/config.toml
printf '# the host own\nvm.swappiness = 10\n' >/etc/sysctl.d/99-kubernetes.conf
iptables -N FOREIGN && iptables -A FOREIGN -s 10.9.0.0/16 -j ACCEPT && iptables -A INPUT -m comment --comment KUBE-lookalike -j FOREIGN
nft add table inet foreign && nft add chain inet foreign input '{ type filter hook input priority 10; }'`
	const ownState = `sha256sum /etc/containerd/config.toml /etc/sysctl.d/99-kubernetes.conf; iptables-save -t filter | grep -E 'FOREIGN|lookalike'; nft list table inet foreign`
	ownBefore := map[string]string{}
	for _, h := range hosts {
		c.Lab.Run(t, h, own)
		ownBefore[h] = c.Lab.Run(t, h, ownState)
	}

	t.Run("dry run on bare hosts", func(t *testing.T) {
		if n := dryRun(t); n < 30 {
			t.Errorf("the plan lists %d changes for bare hosts; want every file, image and service", n)
		}
	})
	t.Run("up killed during the push, then re-run", func(t *testing.T) {
		c.UpKilled(t, "push", 3*time.Second)
		healthy(t, c.Up(t))
	})
	t.Run("dry run on the running cluster", func(t *testing.T) {
		if n := dryRun(t); n != 0 {
			t.Errorf("the plan lists %d changes for a healthy cluster", n)
		}
	})
	t.Run("a second up changes nothing and restarts nothing", func(t *testing.T) {
		starts := func() string {
			var b strings.Builder
			for _, h := range hosts {
				b.WriteString(c.Lab.Run(t, h, "systemctl show -p ActiveEnterTimestampMonotonic kubelet containerd"))
			}
			b.WriteString(c.MustK(t, "get", "pods", "-n", "kube-system", "-o",
				"jsonpath={range .items[*]}{.metadata.name} {.status.containerStatuses[0].state.running.startedAt} {.status.containerStatuses[0].restartCount}{\"\\n\"}{end}"))
			return b.String()
		}
		before := starts()
		stdout, stderr, code := c.Run(t, "up", "--output", "json")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		sc := bufio.NewScanner(strings.NewReader(stdout))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e struct{ Type, Play, Host, Status, Message string }
			_ = json.Unmarshal(sc.Bytes(), &e)
			if e.Type == "host_done" && e.Status != "ok" {
				t.Errorf("play %s on %s: %s", e.Play, e.Host, e.Status)
			}
			if e.Type == "message" && e.Play == "bootstrap" && !strings.Contains(e.Message, " 0 changed") {
				t.Errorf("API objects changed: %s", e.Message)
			}
		}
		if after := starts(); after != before {
			t.Errorf("something restarted:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
	t.Run("a re-run with kubeProxy.mode nftables moves kube-proxy to nftables on every node, the iptables mode's rules gone", func(t *testing.T) {
		c.AddSettings(t, "  kubeProxy:\n    mode: nftables\n")
		healthy(t, c.Up(t))
		// kube-proxy's Pods roll (their configuration changed); each new one programs the table kube-proxy
		// and removes the iptables mode's chains as it starts.
		const state = `nft list table ip kube-proxy 2>/dev/null | grep -c '10.96.0.1 . tcp . 443'; iptables-save | grep -cE '^:KUBE-(SERVICES|NODEPORTS|SVC-|SEP-)'; true`
		for _, h := range hosts {
			var out string
			for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
				if out = strings.Join(strings.Fields(c.Lab.Run(t, h, state)), " "); out == "1 0" || time.Now().After(deadline) {
					break
				}
			}
			if out != "1 0" {
				t.Errorf("%s: the kubernetes Service in kube-proxy's nftables table, and the iptables mode's chains: %q, want \"1 0\"", h, out)
			}
		}
		if mode := c.MustK(t, "get", "configmap", "-n", "kube-system", "kube-proxy", "-o", "jsonpath={.data.config\\.conf}"); !strings.Contains(mode, "mode: nftables") {
			t.Errorf("kube-proxy's configuration:\n%s", mode)
		}
	})
	t.Run("labels, taints and kubelet settings of the cluster and a group: set by up where they apply, taken off when the inventory drops them", func(t *testing.T) {
		NodeSettingsReconciled(t, c, "cp1", []string{"w1", "w2"})
	})
	t.Run("reset leaves nothing of ours", func(t *testing.T) {
		if _, stderr, code := c.Run(t, "reset", "--yes"); code != 0 {
			t.Fatalf("reset: exit %d\n%s", code, stderr)
		}
		for _, h := range hosts {
			out, _ := c.Lab.SSH("", h, `pgrep -x kubelet; ctr -n k8s.io containers ls -q; grep -E ' /var/lib/kubelet|/run/netns/cni-' /proc/mounts; `+
				`systemctl list-units --all --plain --no-legend | grep -E 'kubelet|kubepods|clusterctl'; iptables-save | grep -E '^:KUBE-|-[jg] KUBE-'; `+
				`nft list tables | grep -w kube-proxy; `+
				`ip -o link show cni0 2>/dev/null; ip route | grep ' via .*10\.244\.|^10\.244\.'; `+
				`ls -d /etc/kubernetes /var/lib/kubelet /var/lib/etcd /etc/cni/net.d/10-clusterctl-bridge.conflist /usr/local/bin/kubelet 2>/dev/null; true`)
			if strings.TrimSpace(out) != "" {
				t.Errorf("%s after reset:\n%s", h, out)
			}
			if got := c.Lab.Run(t, h, ownState); got != ownBefore[h] {
				t.Errorf("%s: the host's own files and rules after up and reset:\n%s\nbefore up:\n%s", h, got, ownBefore[h])
			}
		}
	})
	t.Run("reset touches only this cluster's hosts", func(t *testing.T) {
		// No mark: nothing of clusterctl's, left alone.
		c.Lab.Run(t, "w1", "mkdir -p /var/lib/etcd/foreign")
		if _, stderr, code := c.Run(t, "reset", "--yes"); code != 0 {
			t.Fatalf("reset of unmarked hosts: exit %d\n%s", code, stderr)
		}
		if out, _ := c.Lab.SSH("", "w1", "ls -d /var/lib/etcd/foreign"); strings.TrimSpace(out) != "/var/lib/etcd/foreign" {
			t.Errorf("reset removed what an unmarked host had: %q", out)
		}
		// Another cluster's mark: refused, named.
		c.Lab.Run(t, "w1", "mkdir -p /etc/kubernetes && echo 'cluster=other ca=sha256:00' >/etc/kubernetes/clusterctl-cluster")
		_, stderr, code := c.Run(t, "reset", "--yes")
		if code != 1 || !regexp.MustCompile(`(?m)\bw1: .*not a host of this cluster`).MatchString(stderr) || !strings.Contains(stderr, `"cluster=other ca=sha256:00"`) {
			t.Errorf("reset of another cluster's host: exit %d\n%s", code, stderr)
		}
		if out, _ := c.Lab.SSH("", "w1", "ls -d /var/lib/etcd/foreign"); strings.TrimSpace(out) != "/var/lib/etcd/foreign" {
			t.Errorf("reset removed what another cluster's host had: %q", out)
		}
		// --force resets it all the same.
		if _, stderr, code := c.Run(t, "reset", "--yes", "--force"); code != 0 {
			t.Fatalf("reset --force: exit %d\n%s", code, stderr)
		}
		if out, _ := c.Lab.SSH("", "w1", "ls -d /var/lib/etcd /etc/kubernetes/clusterctl-cluster 2>/dev/null; true"); strings.TrimSpace(out) != "" {
			t.Errorf("reset --force left %q", out)
		}
	})
	t.Run("up killed while waiting for the API server, then re-run", func(t *testing.T) {
		c.UpKilled(t, "wait-api", time.Second)
		healthy(t, c.Up(t))
	})
	t.Run("up killed during the joins, then re-run", func(t *testing.T) {
		if _, stderr, code := c.Run(t, "reset", "--yes"); code != 0 {
			t.Fatalf("reset: exit %d\n%s", code, stderr)
		}
		c.UpKilled(t, "join", 0)
		healthy(t, c.Up(t))
	})
	t.Run("certs rotate --ca, killed during the reissue stage and resumed: the new CA everywhere; the workload and a token client kept working", func(t *testing.T) {
		c.KeepSecret(t)
		RotateCAKilled(t, c, hosts)
	})
	t.Run("reboot --if-needed patches and reboots only the host that asks for it, its hooks inside its drain window", func(t *testing.T) {
		RebootIfNeeded(t, c, "w2", "cp1", "w1")
	})
	t.Run("a power cut: every host off at once, then on: the cluster comes back by itself", func(t *testing.T) {
		PowerCycle(t, c, hosts)
		healthy(t, &UpResult{Nodes: readyNodes(t, c)})
	})
	t.Run("the CA rotation, the reboots and the power cut kept encryption at rest, the audit log and admission settings", func(t *testing.T) {
		c.StillHardened(t, "cp1")
	})
}
