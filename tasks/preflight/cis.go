package preflight

import (
	"fmt"

	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/kubelet"
)

// cisChecks are profile cis's: the kernel settings its kubelets protect (on hosts with a kubelet), and the
// etcd user (on hosts with an etcd member).
func cisChecks(n *Node) []Checker {
	var out []Checker
	if n.Set != SetEtcd {
		out = append(out, Checker{Name: "KernelDefaults", Check: checkKernelDefaults})
	}
	if n.runsEtcd() {
		out = append(out, Checker{Name: "EtcdUser", Check: checkEtcdUser})
	}
	return out
}

// checkKernelDefaults: a kubelet protecting the kernel's defaults does not start when one of its settings
// differs. Setup sets them; a host that cannot (a container, whose /proc/sys is read-only) must have them.
func checkKernelDefaults(f *facts.Facts, _ *Node) ([]string, []string) {
	var errs []string
	for _, s := range kubelet.KernelDefaults {
		v, ok := f.KernelSettings[s.Name]
		switch {
		case !ok || v == "":
			errs = append(errs, fmt.Sprintf("%s cannot be read: profile cis has the kubelet protect the kernel's defaults, which needs %s = %s", s.Name, s.Name, s.Value))
		case v != s.Value && !f.SysctlWritable:
			errs = append(errs, fmt.Sprintf("%s is %s and this host cannot change it (/proc/sys is read-only: a container?); profile cis has the kubelet protect the kernel's defaults, which needs %s: set it on the machine that runs the host (sysctl -w %s=%s)", s.Name, v, s.Value, s.Name, s.Value))
		}
	}
	return nil, errs
}

// checkEtcdUser: profile cis runs etcd as the user and group etcd, which setup makes when the host has
// neither.
func checkEtcdUser(f *facts.Facts, _ *Node) ([]string, []string) {
	if _, _, ok := f.Accounts.EtcdIDs(); ok {
		return nil, nil
	}
	a := f.Accounts
	switch {
	case a.EtcdUID >= 0:
		return nil, []string{fmt.Sprintf("the host has a user etcd (%d) but no group etcd: profile cis runs etcd as etcd:etcd; add the group (groupadd --system etcd) or remove the user", a.EtcdUID)}
	case a.EtcdGID >= 0:
		return nil, []string{fmt.Sprintf("the host has a group etcd (%d) but no user etcd: profile cis runs etcd as etcd:etcd; add the user (useradd --system --gid etcd --no-create-home --shell /usr/sbin/nologin etcd) or remove the group", a.EtcdGID)}
	}
	return nil, []string{"no system ID from 100 to 999 is free for the etcd user and group profile cis runs etcd as: make them (useradd --system --user-group --no-create-home --shell /usr/sbin/nologin etcd)"}
}
