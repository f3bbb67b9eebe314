package facts

import (
	"strconv"
	"strings"

	"github.com/clusterctl/clusterctl/tasks/kubelet"
)

// Accounts are the host's etcd user and group, which profile cis runs etcd as, and the system ID they get
// when setup makes them.
type Accounts struct {
	// EtcdUID and EtcdGID are the IDs of the user and the group named etcd; -1: the host has none.
	EtcdUID int `json:"etcdUID"`
	EtcdGID int `json:"etcdGID"`
	// FreeSystemID is the highest ID from 100 to 999 that no user and no group has (0: none is free).
	FreeSystemID int `json:"freeSystemID,omitempty"`
}

func (a *Accounts) parse(key, val string) {
	n, err := strconv.Atoi(val)
	if err != nil || n < 0 || n > 1<<31-2 {
		return
	}
	switch key {
	case "etcd_user":
		a.EtcdUID = n
	case "etcd_group":
		a.EtcdGID = n
	case "free_system_id":
		if n >= 100 && n <= 999 {
			a.FreeSystemID = n
		}
	}
}

// EtcdIDs are the user and group IDs etcd runs as on the host under profile cis: the etcd user's and
// group's, or the free system ID for setup to make both with. ok is false when the host has only one of
// them, or neither and no free system ID.
func (a Accounts) EtcdIDs() (uid, gid int, ok bool) {
	switch {
	case a.EtcdUID >= 0 && a.EtcdGID >= 0:
		return a.EtcdUID, a.EtcdGID, true
	case a.EtcdUID < 0 && a.EtcdGID < 0 && a.FreeSystemID > 0:
		return a.FreeSystemID, a.FreeSystemID, true
	}
	return -1, -1, false
}

// kernelSettingPaths are the kernel settings kubelets protecting the kernel's defaults check, as paths
// under /proc/sys.
func kernelSettingPaths() []string {
	var out []string
	for _, s := range kubelet.KernelDefaults {
		out = append(out, strings.ReplaceAll(s.Name, ".", "/"))
	}
	return out
}

// kernelSetting records one kernel setting the facts script read (by its /proc/sys path), if it is one of
// kubelet.KernelDefaults and its value a number.
func (f *Facts) kernelSetting(p, v string) {
	name := strings.ReplaceAll(p, "/", ".")
	for _, s := range kubelet.KernelDefaults {
		if s.Name != name {
			continue
		}
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			v = ""
		}
		if f.KernelSettings == nil {
			f.KernelSettings = map[string]string{}
		}
		f.KernelSettings[name] = v
	}
}
