package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/test/lab"
)

// benchResult is one check of kube-bench's JSON report.
type benchResult struct {
	ID     string `json:"test_number"`
	Desc   string `json:"test_desc"`
	Status string `json:"status"` // PASS, FAIL, WARN, INFO
	Scored bool   `json:"scored"`
	Actual string `json:"actual_value"`
	Reason string `json:"reason"`
}

type benchReport struct {
	Controls []struct {
		ID    string `json:"id"`
		Tests []struct {
			Results []benchResult `json:"results"`
		} `json:"tests"`
	} `json:"Controls"`
}

// KubeBench runs kube-bench (test/lab/kube-bench.sh) on host with the CIS Kubernetes Benchmark v1.12's
// checks of targets (master,etcd,controlplane,node on a control-plane node; node on a worker), and returns
// its results, section by section.
func (c *Cluster) KubeBench(t testing.TB, host, targets string) map[string][]benchResult {
	t.Helper()
	dir := lab.KubeBench(t)
	tarCmd := fmt.Sprintf("tar -C %s -cf - kube-bench cfg | ssh -F %s %s 'rm -rf /root/kube-bench && mkdir -p /root/kube-bench && tar -C /root/kube-bench -xf -'",
		shellQuote(dir), shellQuote(c.Lab.SSHConfig()), host)
	if out, err := exec.Command("bash", "-c", tarCmd).CombinedOutput(); err != nil {
		t.Fatalf("copying kube-bench to %s: %v\n%s", host, err, out)
	}
	out := c.Lab.Run(t, host, "/root/kube-bench/kube-bench run --config-dir /root/kube-bench/cfg --config /root/kube-bench/cfg/config.yaml --benchmark cis-1.12 --targets "+targets+" --json 2>/dev/null")
	var r benchReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("kube-bench on %s: %v\n%s", host, err, tail(out, 20))
	}
	sections := map[string][]benchResult{}
	for _, c := range r.Controls {
		for _, tt := range c.Tests {
			sections[c.ID] = append(sections[c.ID], tt.Results...)
		}
	}
	// Each target's section, with its checks (kube-bench leaves out a target whose programs it does not see).
	want := map[string]string{"master": "1", "etcd": "2", "controlplane": "3", "node": "4"}
	for _, target := range strings.Split(targets, ",") {
		if len(sections[want[target]]) == 0 {
			t.Fatalf("kube-bench on %s reported no checks of section %s (%s):\n%s", host, want[target], target, tail(out, 20))
		}
	}
	return sections
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// benchSummary is a line per section: how many automated (scored) checks passed and failed, how many manual
// ones passed, and the ids of those not passed.
func benchSummary(sections map[string][]benchResult) string {
	var ids []string
	for id := range sections {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var b strings.Builder
	for _, id := range ids {
		var pass, fail, mpass, mother int
		var not []string
		for _, r := range sections[id] {
			switch {
			case r.Scored && r.Status == "PASS":
				pass++
			case r.Scored:
				fail++
				not = append(not, r.ID+" "+r.Status)
			case r.Status == "PASS":
				mpass++
			default:
				mother++
				not = append(not, r.ID+" "+r.Status+" (manual)")
			}
		}
		fmt.Fprintf(&b, "section %s: automated %d passed, %d failed; manual %d passed, %d not: %s\n", id, pass, fail, mpass, mother, strings.Join(not, ", "))
	}
	return b.String()
}

// checkCIS runs kube-bench on a control-plane node and a worker of a cluster of profile cis: every automated
// check of the control-plane (1), etcd (2), control-plane configuration (3) and worker-node (4) sections
// passes. Besides, etcd runs as the etcd user with its data 0700 etcd:etcd, and a Pod that restricted
// refuses is refused in default.
func checkCIS(t *testing.T, c *Cluster, cp, worker string) {
	for host, targets := range map[string]string{cp: "master,etcd,controlplane,node", worker: "node"} {
		sections := c.KubeBench(t, host, targets)
		t.Logf("kube-bench on %s (%s):\n%s", host, targets, benchSummary(sections))
		for _, rs := range sections {
			for _, r := range rs {
				if r.Scored && r.Status != "PASS" {
					t.Errorf("%s: %s %s: %s (%s %s)", host, r.ID, r.Status, r.Desc, r.Actual, r.Reason)
				}
			}
		}
	}
	if out := c.Lab.Run(t, cp, "ps -o user= -C etcd; stat -c '%a %U:%G' /var/lib/etcd /etc/kubernetes/etcd-keys/server.key /etc/kubernetes/pki/etcd/server.key"); out != "etcd\n700 etcd:etcd\n600 etcd:etcd\n600 root:root\n" {
		t.Errorf("etcd's user, data and keys on %s:\n%s", cp, out)
	}
	_, err := c.K(t, "", "run", "cis-root", "-n", "default", "--image=registry.invalid/pause:1", "--restart=Never")
	if err == nil || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
		t.Errorf("a Pod restricted refuses, in default: %v", err)
	}
}
