package preflight

import (
	"fmt"
	"slices"

	"github.com/clusterctl/clusterctl/tasks/facts"
)

// The host itself: what clusterctl can run on, and what it is tested on.
var (
	// testedOS are the distributions (os-release ID and VERSION_ID) clusterctl's tests run on: the lab's
	// hosts (Debian 12) and the VM tier (Debian 13).
	testedOS = map[string][]string{"debian": {"12", "13"}}
	// expectedOS are distributions with systemd, cgroup v2 and a kernel recent enough, expected to work but
	// not tested.
	expectedOS = []string{"ubuntu", "rhel", "rocky", "almalinux", "centos", "fedora", "debian"}
)

func hostChecks() []Checker {
	return []Checker{{Name: "InitSystem", Check: checkInit}, {Name: "Architecture", Check: checkArch}, {Name: "Distribution", Check: checkDistribution}}
}

// checkInit: the kubelet, containerd and clusterctl's own units are systemd units.
func checkInit(f *facts.Facts, _ *Node) ([]string, []string) {
	if f.Init == "" || f.Init == "systemd" {
		return nil, nil
	}
	return nil, []string{fmt.Sprintf("PID 1 is %s, not systemd: clusterctl runs the kubelet and containerd as systemd units", f.Init)}
}

// checkArch: the artifacts are for amd64 and arm64.
func checkArch(f *facts.Facts, _ *Node) ([]string, []string) {
	if f.Arch == "" || f.Arch == "amd64" || f.Arch == "arm64" {
		return nil, nil
	}
	return nil, []string{fmt.Sprintf("the host is %s: clusterctl has artifacts for amd64 and arm64 only", f.Arch)}
}

// checkDistribution warns of a distribution clusterctl is not tested on.
func checkDistribution(f *facts.Facts, _ *Node) ([]string, []string) {
	if f.OS == "" || slices.Contains(testedOS[f.OS], f.OSVersion) {
		return nil, nil
	}
	name := f.OSPretty
	if name == "" {
		name = f.OS + " " + f.OSVersion
	}
	if slices.Contains(expectedOS, f.OS) {
		return []string{fmt.Sprintf("%s is expected to work but not tested (tested: Debian 12 and 13)", name)}, nil
	}
	return []string{fmt.Sprintf("%s is not a distribution clusterctl knows: it needs systemd, cgroup v2 and a kernel of 4.19 or later (tested: Debian 12 and 13)", name)}, nil
}
