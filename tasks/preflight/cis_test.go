package preflight

import (
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/tasks/facts"
)

// Preflight under profile cis: kernel settings a host cannot change, and an etcd user without its group
// (or the other way), are errors naming what to do; a host that can change them, or has both, passes.
func TestCISChecks(t *testing.T) {
	base := func() *facts.Facts {
		f := loadFacts(t)
		f.KernelSettings = map[string]string{"vm.overcommit_memory": "1", "vm.panic_on_oom": "0", "kernel.panic": "10",
			"kernel.panic_on_oops": "1", "kernel.keys.root_maxkeys": "1000000", "kernel.keys.root_maxbytes": "25000000"}
		f.Accounts = facts.Accounts{EtcdUID: -1, EtcdGID: -1, FreeSystemID: 999}
		return f
	}
	find := func(fs []Finding, check string) []string {
		var out []string
		for _, f := range fs {
			if f.Check == check {
				out = append(out, string(f.Severity)+": "+f.Message)
			}
		}
		return out
	}
	n := &Node{Set: SetInit, NodeName: "cp1", KubernetesVersion: "v1.37.2", APIServerPort: 6443, CIS: true}
	if got := append(find(Run(base(), n), "KernelDefaults"), find(Run(base(), n), "EtcdUser")...); len(got) != 0 {
		t.Errorf("a host with the settings and a free ID: %v", got)
	}
	f := base()
	f.KernelSettings["kernel.panic"] = "0"
	got := find(Run(f, n), "KernelDefaults")
	if len(got) != 1 || !strings.Contains(got[0], "error: kernel.panic is 0") || !strings.Contains(got[0], "sysctl -w kernel.panic=10") {
		t.Errorf("a read-only kernel.panic of 0: %v", got)
	}
	f.SysctlWritable = true
	if got := find(Run(f, n), "KernelDefaults"); len(got) != 0 {
		t.Errorf("a host that sets it itself: %v", got)
	}
	f.Accounts = facts.Accounts{EtcdUID: 998, EtcdGID: -1, FreeSystemID: 999}
	if got := find(Run(f, n), "EtcdUser"); len(got) != 1 || !strings.Contains(got[0], "a user etcd (998) but no group etcd") {
		t.Errorf("a user without its group: %v", got)
	}
	// A worker runs no etcd; without the profile nothing is checked.
	if got := find(Run(f, &Node{Set: SetJoin, NodeName: "w1", KubernetesVersion: "v1.37.2", CIS: true}), "EtcdUser"); len(got) != 0 {
		t.Errorf("a worker: %v", got)
	}
	f.KernelSettings["kernel.panic"] = "0"
	f.SysctlWritable = false
	n.CIS = false
	if got := append(find(Run(f, n), "KernelDefaults"), find(Run(f, n), "EtcdUser")...); len(got) != 0 {
		t.Errorf("without the profile: %v", got)
	}
}
