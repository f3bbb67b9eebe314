package preflight

import (
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
)

// Severity of a preflight finding.
type Severity string

// Severities, as kubeadm gives them.
const (
	SevError   Severity = "error"
	SevWarning Severity = "warning"
)

// Finding is what one check found on one host (or across hosts).
type Finding struct {
	Host     string   `json:"host"`
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
	// Ignored is an error the user chose to ignore (--ignore-preflight-errors); it no longer fails the run.
	Ignored bool `json:"ignored,omitempty"`
}

// CheckSet is which of kubeadm's sets of checks applies to a host.
type CheckSet string

// The sets: kubeadm init (the first control-plane host), kubeadm join --control-plane, kubeadm join; and
// a host that only runs an external etcd member (what kubeadm's external-etcd guide asks of those hosts).
const (
	SetInit             CheckSet = "init"
	SetControlPlaneJoin CheckSet = "control-plane-join"
	SetJoin             CheckSet = "join"
	SetEtcd             CheckSet = "etcd"
)

// Node is what checks need to know of a host beyond its facts.
type Node struct {
	Set               CheckSet
	NodeName          string
	KubernetesVersion string // v1.37.2
	APIServerPort     int
	CRISocket         string
	ServiceSubnet     string
	PodSubnet         string
	// APIHost is the address nodes reach the API server at (HTTPProxy check).
	APIHost string
	// InstallsRuntime: clusterctl installs containerd on the host; the CRI check then does not ask for
	// a running one.
	InstallsRuntime bool
	// AllowCgroupV1: the inventory sets the kubelet's failCgroupV1 to false.
	AllowCgroupV1 bool
	// NFTablesProxy: kube-proxy runs in nftables mode (cluster.kubeProxy.mode).
	NFTablesProxy bool
	// ExternalEtcd: the cluster's etcd runs as units on its etcd hosts; EtcdMember: this host is one.
	// Stacked, every control-plane host runs a member.
	ExternalEtcd, EtcdMember bool
	// CIS: the cluster follows profile cis (cisChecks).
	CIS bool
}

// runsEtcd reports whether the host runs an etcd member: its ports and data directory must be free.
func (n *Node) runsEtcd() bool {
	if n.ExternalEtcd || n.Set == SetEtcd {
		return n.EtcdMember || n.Set == SetEtcd
	}
	return n.Set != SetJoin
}

// Checker is one named check, as kubeadm's preflight.Checker: it returns warnings and errors separately.
type Checker struct {
	Name  string
	Check func(f *facts.Facts, n *Node) (warnings, errors []string)
	// Needs is what the check reads that the facts script looks for only when asked: files, directories
	// and commands. Declared here, beside the check: Asks gathers every check's for the script.
	Needs facts.Ask
}

const (
	controlPlaneCPUs  = 2
	controlPlaneMemMB = 1700
)

// Checks returns the checks of a set, in kubeadm's order. They follow kubeadm's preflight package of the
// supported Kubernetes versions, with its check names (usable with --ignore-preflight-errors) and
// severities, with these differences: ip_forward and br_netfilter are warnings, because clusterctl up sets
// them itself (kubeadm leaves that to the user); conntrack is not required (kube-proxy ≥ 1.32 does not run
// it); the CRI check reads the socket of the inventory's runtime.
func Checks(set CheckSet, apiPort int, etcd bool) []Checker {
	var checks []Checker
	if set == SetEtcd {
		checks = append(checks, Checker{Name: "IsPrivilegedUser", Check: checkPrivileged}, Checker{Name: "Hostname", Check: checkHostname}, required("sha256sum"))
		return append(checks, etcdChecks()...)
	}
	switch set {
	case SetInit, SetControlPlaneJoin:
		checks = append(checks,
			Checker{Name: "NumCPU", Check: checkNumCPU},
			Checker{Name: "Mem", Check: checkMem},
			Checker{Name: "Firewalld", Check: checkFirewalld},
			portCheck(apiPort), portCheck(kubeadm.PortScheduler), portCheck(kubeadm.PortControllerManager),
			fileAvailable(kubeadm.Manifest("kube-apiserver")),
			fileAvailable(kubeadm.Manifest("kube-controller-manager")),
			fileAvailable(kubeadm.Manifest("kube-scheduler")),
			fileAvailable(kubeadm.Manifest("etcd")),
			Checker{Name: "HTTPProxy", Check: checkHTTPProxy},
			Checker{Name: "HTTPProxyCIDR", Check: checkHTTPProxyCIDR},
		)
		if set == SetControlPlaneJoin {
			checks = append(checks, dirAvailable(kubeadm.ManifestsDir),
				fileAvailable(kubeadm.KubeletKubeconfig), fileAvailable(kubeadm.BootstrapKubeconfig))
		}
	case SetJoin:
		// DirAvailable--etc-kubernetes-manifests is in the seed documents' join set; current kubeadm dropped it,
		// but a joining node with static Pod manifests already in place is not what anyone wants.
		checks = append(checks,
			dirAvailable(kubeadm.ManifestsDir),
			fileAvailable(kubeadm.KubeletKubeconfig),
			fileAvailable(kubeadm.BootstrapKubeconfig),
		)
	}
	checks = append(checks, commonChecks()...)
	checks = append(checks, hostChecks()...)
	if set == SetJoin {
		checks = append(checks, fileAvailable(kubeadm.CACert), Checker{Name: "HTTPProxy", Check: checkHTTPProxy})
	}
	checks = append(checks, Checker{Name: "FileContent--proc-sys-net-ipv4-ip_forward", Check: checkIPForward}, Checker{Name: "BridgeNetfilter", Check: checkBrNetfilter, Needs: facts.Ask{Commands: []string{"modprobe"}}})
	if etcd {
		checks = append(checks, etcdChecks()...)
	}
	return checks
}

// etcdChecks are a member's: its client and peer ports, and its data directory, free.
func etcdChecks() []Checker {
	return []Checker{portCheck(kubeadm.PortEtcdClient), portCheck(kubeadm.PortEtcdPeer), dirAvailable(kubeadm.EtcdDataDir)}
}

func commonChecks() []Checker {
	return []Checker{
		{Name: "IsPrivilegedUser", Check: checkPrivileged},
		{Name: "CRI", Check: checkCRI},
		{Name: "Swap", Check: checkSwap},
		{Name: "ContainerRuntimeVersion", Check: checkRuntimeVersion},
		required("losetup"), required("mount"), required("cp"), required("iptables"), required("ip"), required("sha256sum"),
		{Name: "SystemVerification", Check: checkSystem},
		{Name: "Hostname", Check: checkHostname},
		{Name: "KubeletVersion", Check: checkKubeletVersion},
		{Name: "KubeProxyMode", Check: checkProxyMode, Needs: facts.Ask{Commands: []string{"nft"}}},
		{Name: "Service-Kubelet", Check: checkKubeletService},
		portCheck(kubeadm.PortKubelet),
	}
}

// Run runs the checks of the host's set on its facts.
func Run(f *facts.Facts, n *Node) []Finding {
	var out []Finding
	checks := Checks(n.Set, n.APIServerPort, n.runsEtcd())
	if n.CIS {
		checks = append(checks, cisChecks(n)...)
	}
	for _, c := range checks {
		warnings, errs := c.Check(f, n)
		for _, w := range warnings {
			out = append(out, Finding{Host: f.Host, Check: c.Name, Severity: SevWarning, Message: w})
		}
		for _, e := range errs {
			out = append(out, Finding{Host: f.Host, Check: c.Name, Severity: SevError, Message: e})
		}
	}
	return out
}

// Asks is what the facts script must look for so that every check can run: the union of every set's
// checks' Needs (with etcd, and profile cis), made once (every host's facts ask it). It is shared: read it,
// never change it.
var Asks = sync.OnceValue(asks)

func asks() facts.Ask {
	var ask facts.Ask
	for _, set := range []CheckSet{SetInit, SetControlPlaneJoin, SetJoin, SetEtcd} {
		checks := Checks(set, 0, true) // a port check needs nothing asked: any API server port does
		checks = append(checks, cisChecks(&Node{Set: set})...)
		for _, c := range checks {
			ask = ask.With(c.Needs)
		}
	}
	return ask
}

func portCheck(port int) Checker {
	return Checker{Name: fmt.Sprintf("Port-%d", port), Check: func(f *facts.Facts, _ *Node) ([]string, []string) {
		if f.ListensOn(port) {
			return nil, []string{fmt.Sprintf("Port %d is in use", port)}
		}
		return nil, nil
	}}
}

func fileAvailable(path string) Checker {
	return Checker{Name: "FileAvailable-" + strings.ReplaceAll(path, "/", "-"), Needs: facts.Ask{Files: []string{path}}, Check: func(f *facts.Facts, _ *Node) ([]string, []string) {
		if f.Files[path] {
			return nil, []string{path + " already exists"}
		}
		return nil, nil
	}}
}

func dirAvailable(path string) Checker {
	return Checker{Name: "DirAvailable-" + strings.ReplaceAll(path, "/", "-"), Needs: facts.Ask{Dirs: []string{path}}, Check: func(f *facts.Facts, _ *Node) ([]string, []string) {
		if f.DirEntries[path] > 0 {
			return nil, []string{path + " is not empty"}
		}
		return nil, nil
	}}
}

// required is kubeadm's FileExisting check for a command, with the command that installs it.
func required(cmd string) Checker {
	return Checker{Name: "FileExisting-" + cmd, Needs: facts.Ask{Commands: []string{cmd}}, Check: func(f *facts.Facts, _ *Node) ([]string, []string) {
		if !f.Commands[cmd] {
			return nil, []string{fmt.Sprintf("%s not found in system path; install it: %s", cmd, f.InstallHint(cmd))}
		}
		return nil, nil
	}}
}

// checkProxyMode checks what kube-proxy's nftables mode needs of the host: the kernel's nf_tables, and the
// nft command, with which reset removes kube-proxy's tables (kube-proxy runs its image's own).
func checkProxyMode(f *facts.Facts, n *Node) ([]string, []string) {
	if !n.NFTablesProxy {
		return nil, nil
	}
	var errs []string
	if f.KernelModulesKnown && !f.KernelModules["nf_tables"] {
		errs = append(errs, "the kernel has no nf_tables (CONFIG_NF_TABLES): kube-proxy cannot run in nftables mode here; set cluster.kubeProxy.mode: iptables")
	}
	if !f.Commands["nft"] {
		errs = append(errs, fmt.Sprintf("nft not found in system path (kube-proxy's nftables mode: reset removes its tables with it); install it: %s", f.InstallHint("nft")))
	}
	return nil, errs
}

func checkNumCPU(f *facts.Facts, _ *Node) ([]string, []string) {
	if f.CPUs < controlPlaneCPUs {
		return nil, []string{fmt.Sprintf("the number of available CPUs %d is less than the required %d (for a test machine that may be slow: --ignore-preflight-errors=NumCPU)", f.CPUs, controlPlaneCPUs)}
	}
	return nil, nil
}

func checkMem(f *facts.Facts, _ *Node) ([]string, []string) {
	if mb := f.MemoryKB / 1024; mb < controlPlaneMemMB {
		return nil, []string{fmt.Sprintf("the system RAM (%d MB) is less than the minimum %d MB (for a test machine that may be slow: --ignore-preflight-errors=Mem)", mb, controlPlaneMemMB)}
	}
	return nil, nil
}

func checkFirewalld(f *facts.Facts, n *Node) ([]string, []string) {
	if f.Firewalld {
		return []string{fmt.Sprintf("firewalld is active, please ensure ports [%d %d] are open or your cluster may not function correctly",
			n.APIServerPort, kubeadm.PortKubelet)}, nil
	}
	return nil, nil
}

func checkPrivileged(f *facts.Facts, _ *Node) ([]string, []string) {
	if f.UID != 0 {
		return nil, []string{fmt.Sprintf("commands run as uid %d, not root: set become: true (sudo) in the inventory", f.UID)}
	}
	return nil, nil
}

func checkCRI(f *facts.Facts, n *Node) ([]string, []string) {
	switch {
	case n.InstallsRuntime:
		// clusterctl installs containerd before anything needs it.
		return nil, nil
	case !f.CRISocket:
		return nil, []string{fmt.Sprintf("container runtime is not running: no socket at %s", n.CRISocket)}
	case f.CRIAnswers == "fail":
		return nil, []string{fmt.Sprintf("container runtime is not running: %s does not answer", n.CRISocket)}
	}
	return nil, nil
}

func checkSwap(f *facts.Facts, _ *Node) ([]string, []string) {
	if f.SwapDevices > 0 {
		return []string{"swap is supported for cgroup v2 only. The kubelet must be properly configured to use swap, or disable swap on the node"}, nil
	}
	return nil, nil
}

func checkIPForward(f *facts.Facts, _ *Node) ([]string, []string) {
	if f.IPForward != "1" {
		return []string{"/proc/sys/net/ipv4/ip_forward contents are not set to 1; clusterctl up sets net.ipv4.ip_forward=1"}, nil
	}
	return nil, nil
}

func checkBrNetfilter(f *facts.Facts, _ *Node) ([]string, []string) {
	if !f.BrNetfilter && !f.Commands["modprobe"] {
		return nil, []string{"br_netfilter is not loaded and there is no modprobe to load it; install it: " + f.InstallHint("modprobe")}
	}
	if !f.BrNetfilter {
		return []string{"br_netfilter is not loaded (/proc/sys/net/bridge/bridge-nf-call-iptables is missing); clusterctl up loads it"}, nil
	}
	return nil, nil
}

var kernelRE = regexp.MustCompile(`^(\d+)\.(\d+)`)

// checkSystem is kubeadm's SystemVerification: kernel, cgroup controllers, and cgroup v1 with current kubelets.
func checkSystem(f *facts.Facts, n *Node) ([]string, []string) {
	var warnings, errs []string
	if m := kernelRE.FindStringSubmatch(f.Kernel); m != nil {
		major, _ := strconv.Atoi(m[1])
		minor, _ := strconv.Atoi(m[2])
		if major < 4 || major == 4 && minor < 19 {
			errs = append(errs, fmt.Sprintf("kernel %s is older than 4.19, the oldest Kubernetes supports", f.Kernel))
		}
	}
	required := []string{"cpu", "cpuset", "memory", "pids"}
	if f.CgroupVersion == 1 {
		required = append(required, "cpuacct", "devices", "freezer")
	}
	var missing []string
	for _, c := range required {
		if !slices.Contains(f.Cgroups, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Sprintf("missing required cgroups: %s", strings.Join(missing, " ")))
	}
	if f.CgroupVersion == 1 {
		switch minor := versionMinor(n.KubernetesVersion); {
		case minor >= 35 && n.AllowCgroupV1:
			warnings = append(warnings, fmt.Sprintf("the host uses cgroup v1: kubelet %s runs on it only because cluster.kubelet.failCgroupV1 is false; cgroup v1 is unsupported upstream and will be removed, move to cgroup v2", n.KubernetesVersion))
		case minor >= 35:
			errs = append(errs, fmt.Sprintf("the host uses cgroup v1; kubelet %s refuses to start on it (failCgroupV1); use cgroup v2 hosts, or set cluster.kubelet.failCgroupV1: false in the inventory to run on it anyway", n.KubernetesVersion))
		default:
			warnings = append(warnings, "cgroups v1 support is in maintenance mode, please migrate to cgroups v2")
		}
	}
	return warnings, errs
}

var containerdVersionRE = regexp.MustCompile(`\sv?(\d+)\.\d+\.\d+`)

// checkRuntimeVersion is kubeadm's ContainerRuntimeVersion for the host's own containerd: before 2.0 it
// cannot report its cgroup driver over CRI (RuntimeConfig); kubelet 1.37 is the last to fall back to its
// own configuration, so it is a warning there and an error after.
func checkRuntimeVersion(f *facts.Facts, n *Node) ([]string, []string) {
	if n.InstallsRuntime {
		return nil, nil // clusterctl installs containerd 2
	}
	m := containerdVersionRE.FindStringSubmatch(f.Versions["containerd"])
	if m == nil {
		return nil, nil
	}
	if major, _ := strconv.Atoi(m[1]); major >= 2 {
		return nil, nil
	}
	msg := fmt.Sprintf("containerd %s does not implement the CRI method RuntimeConfig (containerd 2.0 does)", strings.TrimSpace(m[0]))
	if versionMinor(n.KubernetesVersion) <= 37 {
		return []string{msg + "; kubelet " + n.KubernetesVersion + " falls back to its cgroupDriver, later kubelets do not: update containerd"}, nil
	}
	return nil, []string{msg + "; kubelet " + n.KubernetesVersion + " needs it: update containerd to 2.0 or later, or let clusterctl install it (cluster.containerRuntime: artifacts)"}
}

func checkHostname(f *facts.Facts, n *Node) ([]string, []string) {
	var warnings []string
	if !f.HostResolves {
		warnings = append(warnings, fmt.Sprintf("hostname %q could not be reached", f.Hostname))
	}
	return warnings, nil
}

var kubeletVersionRE = regexp.MustCompile(`v1\.(\d+)\.\d+`)

// checkKubeletVersion: an installed kubelet must not be newer than the control plane, nor more than three
// minor versions older (the supported skew).
func checkKubeletVersion(f *facts.Facts, n *Node) ([]string, []string) {
	v, ok := f.Versions["kubelet"]
	if !ok {
		return nil, nil
	}
	m := kubeletVersionRE.FindStringSubmatch(v)
	if m == nil {
		return []string{fmt.Sprintf("cannot read the kubelet version from %q", v)}, nil
	}
	kubelet, _ := strconv.Atoi(m[1])
	want := versionMinor(n.KubernetesVersion)
	switch {
	case kubelet > want:
		return nil, []string{fmt.Sprintf("the kubelet version is higher than the control plane version (%s > %s)", m[0], n.KubernetesVersion)}
	case want-kubelet > 3:
		return nil, []string{fmt.Sprintf("the kubelet version %s is more than three minor versions older than the control plane %s", m[0], n.KubernetesVersion)}
	}
	return nil, nil
}

func checkKubeletService(f *facts.Facts, _ *Node) ([]string, []string) {
	if f.KubeletUnit != "" && f.KubeletUnit != "enabled" && f.KubeletUnit != "not-found" {
		return []string{"kubelet service is not enabled; clusterctl up enables it"}, nil
	}
	return nil, nil
}

func versionMinor(v string) int {
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) < 2 {
		return 0
	}
	m, _ := strconv.Atoi(parts[1])
	return m
}

// CrossHostChecks are the checks no single-node tool can do: duplicate hostnames, MACs, product_uuid and
// machine-id across hosts, and clock skew against the workstation (a warning above a second, an error above
// maxSkew).
func CrossHostChecks(hosts []*facts.Facts, maxSkew time.Duration) []Finding {
	var out []Finding
	dup := func(check, what string, key func(*facts.Facts) []string) {
		seen := map[string][]string{}
		for _, f := range hosts {
			for _, k := range key(f) {
				if k != "" && !slices.Contains(seen[k], f.Host) {
					seen[k] = append(seen[k], f.Host)
				}
			}
		}
		keys := make([]string, 0, len(seen))
		for k := range seen {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			hosts := seen[k]
			if len(hosts) < 2 {
				continue
			}
			for _, h := range hosts {
				others := slices.DeleteFunc(slices.Clone(hosts), func(o string) bool { return o == h })
				out = append(out, Finding{Host: h, Check: check, Severity: SevError,
					Message: fmt.Sprintf("%s %s is also on %s", what, k, strings.Join(others, ", "))})
			}
		}
	}
	dup("DuplicateHostname", "hostname", func(f *facts.Facts) []string { return []string{f.Hostname} })
	dup("DuplicateMAC", "MAC address", func(f *facts.Facts) []string {
		var macs []string
		for _, m := range f.MACs {
			if m != "00:00:00:00:00:00" {
				macs = append(macs, m)
			}
		}
		return macs
	})
	dup("DuplicateProductUUID", "product_uuid", func(f *facts.Facts) []string { return []string{f.ProductUUID} })
	dup("DuplicateMachineID", "machine-id", func(f *facts.Facts) []string { return []string{f.MachineID} })
	for _, f := range hosts {
		skew, unc := f.ClockSkew.Abs(), f.ClockUncertainty
		measured := fmt.Sprintf("%s (±%s, half the round trip that read it)", f.ClockSkew.Round(time.Millisecond), unc.Round(time.Millisecond))
		switch {
		case skew-unc > maxSkew:
			out = append(out, Finding{Host: f.Host, Check: "ClockSkew", Severity: SevError,
				Message: fmt.Sprintf("the host's clock is %s off the workstation's, more than %s: certificates and tokens would not be valid when expected; synchronize clocks (NTP)", measured, maxSkew)})
		case skew > maxSkew:
			out = append(out, Finding{Host: f.Host, Check: "ClockSkew", Severity: SevWarning,
				Message: fmt.Sprintf("the host's clock is %s off the workstation's: perhaps more than %s, the round trip was too slow to tell", measured, maxSkew)})
		case skew-unc > facts.SkewReported:
			out = append(out, Finding{Host: f.Host, Check: "ClockSkew", Severity: SevWarning,
				Message: fmt.Sprintf("the host's clock is %s off the workstation's", measured)})
		}
	}
	return out
}

// DuplicateNodeAddresses are errors for hosts whose node address (internalAddress, else learned from the
// host: by host name) is another host's: a kubelet's serving certificate names its node's address, and
// clusterctl approves it only for that node, so two hosts cannot share one. Each finding names both hosts.
func DuplicateNodeAddresses(addrs map[string]string) []Finding {
	by := map[string][]string{}
	for host, a := range addrs {
		if ip := net.ParseIP(a); ip != nil {
			by[ip.String()] = append(by[ip.String()], host)
		}
	}
	var out []Finding
	for _, a := range slices.Sorted(maps.Keys(by)) {
		hosts := by[a]
		if len(hosts) < 2 {
			continue
		}
		sort.Strings(hosts)
		for _, h := range hosts {
			others := slices.DeleteFunc(slices.Clone(hosts), func(o string) bool { return o == h })
			out = append(out, Finding{Host: h, Check: "DuplicateNodeAddress", Severity: SevError,
				Message: fmt.Sprintf("node address %s is also %s's: each node needs an address of its own (set internalAddress in the inventory)", a, strings.Join(others, ", "))})
		}
	}
	return out
}

// Unignorable is the check whose errors --ignore-preflight-errors cannot ignore: a host that cannot be
// reached cannot be set up either (nothing is known of it, nothing can be put there).
const Unignorable = "SSH"

// Ignore marks the errors of the named checks (or all, with "all") as ignored, as kubeadm's
// --ignore-preflight-errors does, but Unignorable's. Names are matched case-insensitively.
func Ignore(findings []Finding, names []string) {
	set := map[string]bool{}
	for _, n := range names {
		set[strings.ToLower(strings.TrimSpace(n))] = true
	}
	for i := range findings {
		if findings[i].Check == Unignorable {
			continue
		}
		if findings[i].Severity == SevError && (set["all"] || set[strings.ToLower(findings[i].Check)]) {
			findings[i].Ignored = true
		}
	}
}

// Failed reports whether any error is left that was not ignored.
func Failed(findings []Finding) bool {
	for _, f := range findings {
		if f.Severity == SevError && !f.Ignored {
			return true
		}
	}
	return false
}
