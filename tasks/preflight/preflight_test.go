package preflight

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/transport"
)

func loadFacts(t *testing.T) *facts.Facts {
	t.Helper()
	out, err := os.ReadFile("../facts/testdata/facts-debian12-nspawn.txt")
	if err != nil {
		t.Fatal(err)
	}
	f, err := facts.ParseFacts("cp1", out)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func names(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, string(f.Severity)+" "+f.Check)
	}
	sort.Strings(out)
	return out
}

func TestChecksOnAFreshHost(t *testing.T) {
	f := loadFacts(t)
	node := &Node{Set: SetInit, KubernetesVersion: "v1.34.4", APIServerPort: 6443, CRISocket: "unix:///run/containerd/containerd.sock"}
	got := names(Run(f, node))
	// Its containerd 1.6 cannot report its cgroup driver: a warning up to 1.37.
	want := []string{"warning ContainerRuntimeVersion", "warning FileContent--proc-sys-net-ipv4-ip_forward", "warning SystemVerification"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fresh host: %v, want %v", got, want)
	}
	// The same host on Kubernetes 1.35 fails: cgroup v1, until the inventory lets kubelets run on it.
	node.KubernetesVersion = "v1.35.1"
	if got := names(Run(f, node)); !reflectContains(got, "error SystemVerification") {
		t.Errorf("cgroup v1 with 1.35: %v", got)
	}
	node.AllowCgroupV1 = true
	if got := names(Run(f, node)); reflectContains(got, "error SystemVerification") || !reflectContains(got, "warning SystemVerification") {
		t.Errorf("cgroup v1 with 1.35 and failCgroupV1 false: %v", got)
	}
	// After 1.37 containerd 1.x is an error; containerd 2, or one clusterctl installs, is fine.
	node.KubernetesVersion = "v1.38.0"
	if got := names(Run(f, node)); !reflectContains(got, "error ContainerRuntimeVersion") {
		t.Errorf("containerd 1.6 with 1.38: %v", got)
	}
	f.Versions["containerd"] = "github.com/containerd/containerd/v2 v2.2.1 dea7da592f5d1d2b7755e3a161be07f43fad8f75"
	if got := names(Run(f, node)); reflectContains(got, "error ContainerRuntimeVersion") || reflectContains(got, "warning ContainerRuntimeVersion") {
		t.Errorf("containerd 2.2 with 1.38: %v", got)
	}
	f.Versions["containerd"] = "github.com/containerd/containerd v1.7.24 88bf19b2105c8b17560993bee28a01ddc2f97182"
	node.InstallsRuntime = true
	if got := names(Run(f, node)); reflectContains(got, "error ContainerRuntimeVersion") {
		t.Errorf("containerd installed by clusterctl: %v", got)
	}
}

func reflectContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestChecksFindProblems(t *testing.T) {
	f := loadFacts(t)
	f.Listening = append(f.Listening, facts.Listener{Addr: "0.0.0.0", Port: 6443}, facts.Listener{Addr: "::", Port: 10250}, facts.Listener{Addr: "0.0.0.0", Port: 2380})
	f.Files["/etc/kubernetes/manifests/etcd.yaml"] = true
	f.Files["/etc/kubernetes/kubelet.conf"] = true
	f.DirEntries["/var/lib/etcd"] = 3
	f.DirEntries["/etc/kubernetes/manifests"] = 1
	f.CPUs, f.MemoryKB, f.UID, f.SwapDevices = 1, 1024*1024, 1000, 1
	f.CRIAnswers = "fail"
	f.Firewalld = true
	delete(f.Commands, "losetup")
	f.Versions["kubelet"] = "Kubernetes v1.35.0"
	f.KubeletUnit = "disabled"
	f.Proxy["HTTPS_PROXY"] = "http://proxy:3128"
	f.Proxy["NO_PROXY"] = "10.96.0.0/12"
	f.HostResolves = false
	node := &Node{Set: SetInit, KubernetesVersion: "v1.34.4", APIServerPort: 6443, CRISocket: "unix:///run/containerd/containerd.sock",
		ServiceSubnet: "10.96.0.0/12", PodSubnet: "10.244.0.0/16", APIHost: "10.0.0.1"}
	got := names(Run(f, node))
	want := []string{
		"error CRI", "error DirAvailable--var-lib-etcd", "error FileAvailable--etc-kubernetes-manifests-etcd.yaml",
		"error FileExisting-losetup", "error IsPrivilegedUser", "error KubeletVersion", "error Mem", "error NumCPU",
		"error Port-10250", "error Port-2380", "error Port-6443",
		"warning ContainerRuntimeVersion", "warning FileContent--proc-sys-net-ipv4-ip_forward", "warning Firewalld", "warning HTTPProxy", "warning HTTPProxyCIDR",
		"warning Hostname", "warning Service-Kubelet", "warning Swap", "warning SystemVerification",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("init set:\n got %v\nwant %v", got, want)
	}
	// A one-CPU test VM fails NumCPU, as with kubeadm; the message says how to go on anyway.
	for _, x := range Run(f, node) {
		if x.Check == "NumCPU" && !strings.Contains(x.Message, "--ignore-preflight-errors=NumCPU") {
			t.Errorf("NumCPU does not say how to ignore it: %s", x.Message)
		}
	}
	// A worker joining: no control-plane ports, but kubelet.conf and the manifests directory matter.
	node.Set = SetJoin
	got = names(Run(f, node))
	for _, w := range []string{"error FileAvailable--etc-kubernetes-kubelet.conf", "error DirAvailable--etc-kubernetes-manifests", "error Port-10250"} {
		if !reflectContains(got, w) {
			t.Errorf("join set lacks %q: %v", w, got)
		}
	}
	for _, nw := range []string{"error Port-6443", "error NumCPU", "error DirAvailable--var-lib-etcd"} {
		if reflectContains(got, nw) {
			t.Errorf("join set has %q", nw)
		}
	}
}

// A skew over the limit is an error only when its uncertainty cannot account for it: read over a round trip
// of 16 s, 6.5 s may be 0.6 s.
func TestClockSkewUncertainty(t *testing.T) {
	for _, c := range []struct {
		skew, unc time.Duration
		want      string
	}{
		{6500 * time.Millisecond, 8 * time.Second, "warning"},
		{-6500 * time.Millisecond, 10 * time.Millisecond, "error"},
		{1500 * time.Millisecond, time.Second, ""},
		{1500 * time.Millisecond, 10 * time.Millisecond, "warning"},
	} {
		f := loadFacts(t)
		f.ClockSkew, f.ClockUncertainty = c.skew, c.unc
		got := ""
		for _, x := range CrossHostChecks([]*facts.Facts{f}, 5*time.Second) {
			if x.Check == "ClockSkew" {
				got = string(x.Severity)
			}
		}
		if got != c.want {
			t.Errorf("skew %s ± %s: %q, want %q", c.skew, c.unc, got, c.want)
		}
	}
}

func TestCrossHostChecksAndIgnore(t *testing.T) {
	a, b, c := loadFacts(t), loadFacts(t), loadFacts(t)
	a.Host, b.Host, c.Host = "cp1", "w1", "w2"
	b.Hostname, c.Hostname = "w1", "cp1" // w2 claims cp1's hostname
	b.MACs = map[string]string{"host0": "aa:aa:aa:aa:aa:aa"}
	c.MACs = map[string]string{"host0": "aa:aa:aa:aa:aa:aa"}
	c.MachineID = "other"
	b.ClockSkew = 1500 * time.Millisecond
	c.ClockSkew, c.ClockUncertainty = -10*time.Second, 3*time.Millisecond
	got := CrossHostChecks([]*facts.Facts{a, b, c}, 5*time.Second)
	var lines []string
	for _, f := range got {
		lines = append(lines, f.Host+" "+string(f.Severity)+" "+f.Check)
	}
	sort.Strings(lines)
	want := []string{
		"cp1 error DuplicateHostname", "cp1 error DuplicateMachineID",
		"w1 error DuplicateMAC", "w1 error DuplicateMachineID", "w1 warning ClockSkew",
		"w2 error ClockSkew", "w2 error DuplicateHostname", "w2 error DuplicateMAC",
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("cross-host:\n got %v\nwant %v", lines, want)
	}
	for _, f := range got {
		if f.Check == "DuplicateHostname" && f.Host == "w2" && !strings.Contains(f.Message, "also on cp1") {
			t.Errorf("message does not name the other host: %s", f.Message)
		}
		if f.Check == "ClockSkew" && f.Host == "w2" && !strings.Contains(f.Message, "-10s (±3ms") {
			t.Errorf("the ClockSkew error does not name the skew and its uncertainty: %s", f.Message)
		}
	}
	if !Failed(got) {
		t.Error("Failed = false with errors")
	}
	Ignore(got, []string{"duplicatehostname", "DuplicateMAC", "DuplicateMachineID", "ClockSkew"})
	if Failed(got) {
		t.Errorf("errors left after ignoring every check: %+v", got)
	}
	fs := []Finding{{Check: "Port-6443", Severity: SevError}, {Check: "Swap", Severity: SevWarning}}
	Ignore(fs, []string{"all"})
	if !fs[0].Ignored || fs[1].Ignored {
		t.Errorf("all: %+v", fs)
	}
}

func BenchmarkFactsAndChecks(b *testing.B) {
	out, err := os.ReadFile("../facts/testdata/facts-debian12-nspawn.txt")
	if err != nil {
		b.Fatal(err)
	}
	node := &Node{Set: SetInit, KubernetesVersion: "v1.34.4", APIServerPort: 6443}
	for b.Loop() {
		f, err := facts.ParseFacts("cp1", out)
		if err != nil {
			b.Fatal(err)
		}
		Run(f, node)
	}
}

// A missing command is named with the command that installs it, for the host's package manager.
func TestRequiredCommandsNameTheirFix(t *testing.T) {
	for os, want := range map[string]string{
		"debian": "iptables not found in system path; install it: apt-get install -y iptables",
		"rocky":  "iptables not found in system path; install it: dnf install -y iptables-nft",
		"sles":   "iptables not found in system path; install it: zypper install -y iptables",
		"plan9":  "iptables not found in system path; install it: install your distribution's package that provides iptables",
	} {
		f := &facts.Facts{OS: os, Commands: map[string]bool{}}
		_, errs := required("iptables").Check(f, &Node{})
		if len(errs) != 1 || errs[0] != want {
			t.Errorf("%s: %q, want %q", os, errs, want)
		}
	}
}

// kube-proxy's nftables mode needs the kernel's nf_tables and, for reset, the nft command; iptables mode asks
// for neither.
func TestProxyModeCheck(t *testing.T) {
	for _, c := range []struct {
		name  string
		nft   bool
		f     facts.Facts
		wants []string
	}{
		{"iptables mode", false, facts.Facts{OS: "debian"}, nil},
		{"nftables, all there", true, facts.Facts{OS: "debian", Commands: map[string]bool{"nft": true}, KernelModules: map[string]bool{"nf_tables": true}, KernelModulesKnown: true}, nil},
		{"nftables, no nft", true, facts.Facts{OS: "rocky", KernelModules: map[string]bool{"nf_tables": true}, KernelModulesKnown: true},
			[]string{"nft not found in system path (kube-proxy's nftables mode: reset removes its tables with it); install it: dnf install -y nftables"}},
		{"nftables, no nf_tables", true, facts.Facts{OS: "debian", Commands: map[string]bool{"nft": true}, KernelModulesKnown: true},
			[]string{"the kernel has no nf_tables (CONFIG_NF_TABLES): kube-proxy cannot run in nftables mode here; set cluster.kubeProxy.mode: iptables"}},
		{"nftables, modules unknown", true, facts.Facts{OS: "debian", Commands: map[string]bool{"nft": true}}, nil},
	} {
		warnings, errs := checkProxyMode(&c.f, &Node{NFTablesProxy: c.nft})
		if len(warnings) > 0 || strings.Join(errs, "\n") != strings.Join(c.wants, "\n") {
			t.Errorf("%s: warnings %q, errors %q, want %q", c.name, warnings, errs, c.wants)
		}
	}
}

// Which hosts get etcd's checks: every control-plane host when etcd is stacked; with external etcd, the
// etcd hosts only, and a host that only runs etcd gets nothing of a node's.
func TestEtcdChecks(t *testing.T) {
	has := func(n *Node, check string) bool {
		for _, c := range Checks(n.Set, 6443, n.runsEtcd()) {
			if c.Name == check {
				return true
			}
		}
		return false
	}
	const port = "Port-2380"
	for _, c := range []struct {
		n          Node
		etcd, node bool
	}{
		{Node{Set: SetInit}, true, true},
		{Node{Set: SetJoin}, false, true},
		{Node{Set: SetInit, ExternalEtcd: true}, false, true},
		{Node{Set: SetJoin, ExternalEtcd: true, EtcdMember: true}, true, true},
		{Node{Set: SetEtcd, ExternalEtcd: true, EtcdMember: true}, true, false},
	} {
		if got := has(&c.n, port); got != c.etcd {
			t.Errorf("%+v: %s checked: %v", c.n, port, got)
		}
		if got := has(&c.n, "Service-Kubelet"); got != c.node {
			t.Errorf("%+v: the kubelet checked: %v", c.n, got)
		}
	}
}

// Two hosts with one node address (an internalAddress of one equal to another's learned address, say) are
// an error on each, naming the other; distinct addresses and hosts with none are not.
func TestDuplicateNodeAddresses(t *testing.T) {
	got := DuplicateNodeAddresses(map[string]string{"cp1": "10.0.0.1", "w1": "10.0.0.11", "w2": "10.0.0.1", "w3": "", "w4": "fd00::1", "w5": "fd00:0::1"})
	want := map[string]string{"cp1": "10.0.0.1 is also w2's", "w2": "10.0.0.1 is also cp1's", "w4": "fd00::1 is also w5's", "w5": "fd00::1 is also w4's"}
	if len(got) != len(want) {
		t.Fatalf("findings %+v", got)
	}
	for _, f := range got {
		if f.Check != "DuplicateNodeAddress" || f.Severity != SevError || !strings.Contains(f.Message, want[f.Host]) {
			t.Errorf("finding %+v, want %q", f, want[f.Host])
		}
	}
}

// Every file, directory and command a check needs is what the facts script looks for: declared with the
// check, asked through Asks.
func TestAsksCoverEveryCheck(t *testing.T) {
	script := facts.FactsScript("unix:///run/containerd/containerd.sock", Asks())
	// the script's lists of what it looks for: `for c in COMMANDS;`, `for p in FILES;`, `for d in DIRS;`
	// (a path the script reads elsewhere, as the CA certificate, is not looked for by a check's need)
	lists := map[string][]string{}
	for _, m := range regexp.MustCompile(`for ([cpd]) in ([^;*]*);`).FindAllStringSubmatch(script, -1) {
		lists[m[1]] = append(lists[m[1]], strings.Fields(m[2])...)
	}
	for _, set := range []CheckSet{SetInit, SetControlPlaneJoin, SetJoin, SetEtcd} {
		for _, c := range append(Checks(set, 6443, true), cisChecks(&Node{Set: set})...) {
			for list, needs := range map[string][]string{"p": c.Needs.Files, "d": c.Needs.Dirs, "c": c.Needs.Commands} {
				for _, p := range needs {
					if !slices.Contains(lists[list], transport.ShellQuote(p)) {
						t.Errorf("%s needs %s, which the facts script does not look for (its list: %v)", c.Name, p, lists[list])
					}
				}
			}
		}
	}
	for _, cmd := range []string{"nft", "modprobe", "losetup", "sha256sum"} {
		if !slices.Contains(Asks().Commands, cmd) {
			t.Errorf("Asks() lacks the command %s a check reads", cmd)
		}
	}
}
