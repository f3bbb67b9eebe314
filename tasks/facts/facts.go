// Package facts gathers what clusterctl knows of a host in one round trip (the facts script) and parses
// it; preflight checks, render and the steps read it.
package facts

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/scripts"
)

// Facts is what clusterctl knows of a host, gathered in one round trip.
type Facts struct {
	Host          string            `json:"host"`
	Hostname      string            `json:"hostname"`
	OS            string            `json:"os"` // ID from os-release: debian, ubuntu, rhel, ...
	OSVersion     string            `json:"osVersion"`
	OSPretty      string            `json:"osPretty"`
	Kernel        string            `json:"kernel"`
	Arch          string            `json:"arch"` // as GOARCH: amd64, arm64
	CgroupVersion int               `json:"cgroupVersion"`
	Cgroups       []string          `json:"cgroupControllers"`
	SwapKB        int64             `json:"swapKB"`
	SwapDevices   int               `json:"swapDevices"`
	CPUs          int               `json:"cpus"`
	MemoryKB      int64             `json:"memoryKB"`
	Addresses     []Address         `json:"addresses"`
	DefaultIface  string            `json:"defaultInterface,omitempty"`
	MACs          map[string]string `json:"macs"`           // interface -> MAC
	MTUs          map[string]int    `json:"mtus,omitempty"` // interface -> MTU
	// KernelModules are those of the modules facts.sh asks about (the policy controller's, and nf_tables for
	// kube-proxy's nftables mode) that the kernel
	// has: loaded, built in or installed; KernelModulesKnown: the host has a module directory to tell.
	KernelModules      map[string]bool `json:"kernelModules,omitempty"`
	KernelModulesKnown bool            `json:"kernelModulesKnown,omitempty"`
	ProductUUID        string          `json:"productUUID,omitempty"`
	MachineID          string          `json:"machineID"`
	BootID             string          `json:"bootID"`
	Clock              time.Time       `json:"clock"`
	ClockSkew          time.Duration   `json:"clockSkew"` // host clock minus the workstation's, at the midpoint of the round trip
	// ClockUncertainty bounds the error of ClockSkew: half the window in which the host read it.
	ClockUncertainty time.Duration `json:"clockUncertainty"`
	Listening        []Listener    `json:"listening"`
	// Connections are the host's established TCP connections to the ports asked (Ask.Connections): the
	// remote address and port of each.
	Connections  []Listener        `json:"connections,omitempty"`
	Versions     map[string]string `json:"versions"` // kubelet, containerd, crictl, runc: first line of --version
	Commands     map[string]bool   `json:"commands"`
	CRISocket    bool              `json:"criSocket"`
	CRIAnswers   string            `json:"criAnswers"` // ok, fail, or unknown (no client to ask with)
	BrNetfilter  bool              `json:"brNetfilter"`
	BridgeNFCall string            `json:"bridgeNFCallIptables,omitempty"`
	IPForward    string            `json:"ipForward"`
	IPv6Forward  string            `json:"ipv6Forward,omitempty"`
	Firewalld    bool              `json:"firewalldActive"`
	Proxy        map[string]string `json:"proxy,omitempty"`
	Files        map[string]bool   `json:"files"` // paths clusterctl cares about -> exists
	DirEntries   map[string]int    `json:"dirEntries"`
	KubeletUnit  string            `json:"kubeletEnabled"` // enabled, disabled, not-found, ...
	UID          int               `json:"uid"`
	HostResolves bool              `json:"hostnameResolves"`
	Virt         string            `json:"virtualization,omitempty"`
	// Init is PID 1: systemd when the host booted with it, else its command name.
	Init string `json:"init,omitempty"`
	// CNIBinDir is where the CNI plugins are: /opt/cni/bin upstream, /usr/lib/cni on Debian. Empty: none.
	CNIBinDir string `json:"cniBinDir,omitempty"`
	// Member is what clusterctl wrote in /etc/kubernetes/clusterctl-cluster: the cluster the host belongs to.
	Member string `json:"member,omitempty"`
	// CACert is /etc/kubernetes/pki/ca.crt (PEM, at most maxCACert bytes) of a host without the membership
	// mark: a node that joined without clusterctl (kubeadm join) belongs to the cluster of that CA.
	CACert string `json:"caCert,omitempty"`
	// Accounts are the host's etcd user and group and a system ID free for them (profile cis runs etcd as
	// its own user).
	Accounts Accounts `json:"accounts"`
	// KernelSettings are the kernel settings kubelets protecting the kernel's defaults check, by name
	// (vm.overcommit_memory, ...), as the host has them; SysctlWritable: the host may change them (not a
	// container, whose /proc/sys is read-only).
	KernelSettings map[string]string `json:"kernelSettings,omitempty"`
	SysctlWritable bool              `json:"sysctlWritable,omitempty"`
	// KubeletActive: the kubelet's unit is active (running).
	KubeletActive bool `json:"kubeletActive,omitempty"`
	// Stamp is the first line of the host's stamp (kubeadm.HostStamp: "v1 DIGEST STATE ROUTES"),
	// StampFiles the state now of the files it lists, RoutesMissing how many routes of its pod routes file
	// the kernel lacks; see Settled.
	Stamp         string `json:"stamp,omitempty"`
	StampFiles    string `json:"stampFiles,omitempty"`
	RoutesMissing int    `json:"routesMissing,omitempty"`
}

// maxCACert bounds the CA certificate facts keep: a CA certificate is 1-2 KiB.
const maxCACert = 16 << 10

// Address is one IP address of an interface.
type Address struct {
	Iface string `json:"iface"`
	CIDR  string `json:"cidr"`
}

// Listener is a listening TCP socket.
type Listener struct {
	Addr string `json:"addr"`
	Port int    `json:"port"`
}

// ListensOn reports whether anything listens on the TCP port (on any address).
func (f *Facts) ListensOn(port int) bool {
	for _, l := range f.Listening {
		if l.Port == port {
			return true
		}
	}
	return false
}

// ConnectedTo reports whether the host has an established TCP connection to ip and port (asked with
// Ask.Connections): proof that it reaches them, as a probe would show.
func (f *Facts) ConnectedTo(ip string, port int) bool {
	want, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	for _, c := range f.Connections {
		if a, err := netip.ParseAddr(c.Addr); err == nil && c.Port == port && a.Unmap() == want.Unmap() {
			return true
		}
	}
	return false
}

// IfaceOf is the interface that holds the address ip ("" when none does).
func (f *Facts) IfaceOf(ip string) string {
	for _, a := range f.Addresses {
		if strings.SplitN(a.CIDR, "/", 2)[0] == ip {
			return a.Iface
		}
	}
	return ""
}

// HasAddress reports whether ip is one of the host's addresses.
func (f *Facts) HasAddress(ip string) bool {
	for _, a := range f.Addresses {
		if strings.SplitN(a.CIDR, "/", 2)[0] == ip {
			return true
		}
	}
	return false
}

// Ask is what the facts script looks for beyond the facts it always prints: files that exist, directories
// and how many entries each holds, commands on the PATH. A preflight check declares what it needs as an Ask
// (preflight.Asks gathers them); the steps' own needs are stepAsk.
type Ask struct {
	Files, Dirs, Commands []string
	// Connections are TCP ports to which the host's established connections are reported
	// (Facts.Connections).
	Connections []int
}

// With is a and b together, each path or command once, in order.
func (a Ask) With(b Ask) Ask {
	return Ask{Files: union(a.Files, b.Files), Dirs: union(a.Dirs, b.Dirs), Commands: union(a.Commands, b.Commands),
		Connections: union(a.Connections, b.Connections)}
}

// union is x followed by the values of y not in x.
func union[T comparable](x, y []T) []T {
	out := slices.Clone(x)
	for _, v := range y {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// stepAsk is what the steps read of the facts themselves: whether a node has joined already (its kubelet's
// kubeconfig, or the bootstrap one) and whether a control-plane node's API server was set up.
var stepAsk = Ask{Files: []string{kubeadm.Manifest(kubeadm.APIServer), kubeadm.KubeletKubeconfig, kubeadm.BootstrapKubeconfig}}

// factsScript is the facts script (templates/files/facts.sh) for a runtime socket; askCRI: whether it asks
// the runtime if it answers (the host's own runtime; one clusterctl installs starts after the push).
func factsScript(criSocket string, askCRI bool, ask Ask) string {
	ask = stepAsk.With(ask)
	return scripts.Facts(scripts.FactsParams{Socket: strings.TrimPrefix(criSocket, "unix://"), AskCRI: askCRI, Commands: ask.Commands,
		Files: ask.Files, Dirs: ask.Dirs, CNIBinDirs: cniBinDirs, MemberPath: kubeadm.MemberPath, CACert: kubeadm.CACert,
		VersionCache: kubeadm.VersionCache, KernelSettings: kernelSettingPaths(), Stamp: kubeadm.HostStamp, ConnPorts: ask.Connections})
}

// cniBinDirs are where distributions put the CNI plugins.
var cniBinDirs = []string{"/opt/cni/bin", "/usr/lib/cni", "/usr/libexec/cni"}

// FactsScript is the facts script for a runtime socket, for tools that run it themselves (the fan-out
// benchmark runs the same script with other tools).
func FactsScript(criSocket string, ask Ask) string { return factsScript(criSocket, true, ask) }

// GatherNet learns the facts of a host's network alone (addresses, default route, links' MTUs), in one
// command of one process (ip): what the pod network needs of a node outside the run whose routes it writes.
func GatherNet(ctx context.Context, h tasks.Runner) (*Facts, error) {
	res, err := h.Run(ctx, "sh -s", []byte(scripts.NetFacts()))
	if err != nil {
		return nil, err
	}
	return ParseFacts(h.Name(), res.Stdout)
}

// bounded is at most n bytes of b, for messages.
func bounded(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// ParseFacts reads the output of the facts script.
func ParseFacts(host string, out []byte) (*Facts, error) {
	f := &Facts{Host: host, MACs: map[string]string{}, Versions: map[string]string{}, Commands: map[string]bool{},
		Proxy: map[string]string{}, Files: map[string]bool{}, DirEntries: map[string]int{}, UID: -1,
		Accounts: Accounts{EtcdUID: -1, EtcdGID: -1}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	unit := "" // the unit whose properties systemctl show is printing
	for sc.Scan() {
		if sc.Text() == stampStatBegin {
			f.StampFiles = stampState(sc)
			continue
		}
		key, val, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			continue
		}
		if field, ok := factStrings[key]; ok {
			*field(f) = val
			continue
		}
		if flag, ok := factFlags[key]; ok {
			*flag(f) = val == "yes"
			continue
		}
		if parse, ok := factParsers[key]; ok {
			first, rest, _ := strings.Cut(val, " ")
			parse(f, val, first, rest)
		} else if strings.HasPrefix(key, "unit_") {
			f.unitProperty(key, val, &unit)
		}
	}
	if f.Hostname == "" || f.Kernel == "" {
		return nil, fmt.Errorf("%s: the facts script printed no hostname or kernel: %q", host, tail(string(out), 500))
	}
	return f, sc.Err()
}

// unitProperty reads a line of systemctl show's properties (unit_Id, unit_ActiveState, ...); unit is the
// unit whose properties it is printing.
func (f *Facts) unitProperty(key, val string, unit *string) {
	switch key {
	case "unit_Id":
		*unit = val
	case "unit_ActiveState":
		switch *unit {
		case "firewalld.service":
			f.Firewalld = val == "active"
		case "kubelet.service":
			f.KubeletActive = val == "active"
		}
	case "unit_UnitFileState":
		if *unit == "kubelet.service" {
			f.KubeletUnit = val
			if val == "" {
				f.KubeletUnit = "not-found"
			}
		}
	}
}

// factParsers read the facts that are not copied as printed (factStrings, factFlags): numbers, lists, maps
// and the values checked before they are kept. first and rest are the value's first word and the others.
var factParsers = map[string]func(f *Facts, val, first, rest string){
	"clock": func(f *Facts, val, _, _ string) { f.Clock = parseEpoch(val) },
	"arch":  func(f *Facts, val, _, _ string) { f.Arch = goArch(val) },
	"cgroupfs": func(f *Facts, val, _, _ string) {
		f.CgroupVersion = 1
		if val == "cgroup2fs" {
			f.CgroupVersion = 2
		}
	},
	"cgroup_controllers": func(f *Facts, val, _, _ string) { f.Cgroups = strings.Fields(val) },
	"swap_devices":       func(f *Facts, val, _, _ string) { f.SwapDevices, _ = strconv.Atoi(val) },
	"swap_kb":            func(f *Facts, val, _, _ string) { f.SwapKB, _ = strconv.ParseInt(val, 10, 64) },
	"cpus":               func(f *Facts, val, _, _ string) { f.CPUs, _ = strconv.Atoi(val) },
	"mem_kb":             func(f *Facts, val, _, _ string) { f.MemoryKB, _ = strconv.ParseInt(val, 10, 64) },
	"addr": func(f *Facts, _, first, rest string) {
		f.Addresses = append(f.Addresses, Address{Iface: first, CIDR: rest})
	},
	"default_route": func(f *Facts, val, _, _ string) {
		fields := strings.Fields(val)
		for i := 0; i+1 < len(fields); i++ {
			if fields[i] == "dev" && f.DefaultIface == "" {
				f.DefaultIface = fields[i+1]
			}
		}
	},
	"mac": func(f *Facts, _, first, rest string) {
		if first != "lo" && rest != "00:00:00:00:00:00" {
			f.MACs[first] = rest
		}
	},
	"kmod": func(f *Facts, val, _, _ string) {
		if f.KernelModules == nil {
			f.KernelModules = map[string]bool{}
		}
		f.KernelModules[val] = true
	},
	"kmods_known": func(f *Facts, _, _, _ string) { f.KernelModulesKnown = true },
	"routes_missing": func(f *Facts, val, _, _ string) {
		if n, err := strconv.Atoi(val); err != nil || n < 0 {
			f.RoutesMissing = 1 // not a count: not settled
		} else {
			f.RoutesMissing = n
		}
	},
	"mtu": func(f *Facts, _, first, rest string) {
		if n, err := strconv.Atoi(rest); err == nil && n > 0 && n <= 65535 && first != "lo" {
			if f.MTUs == nil {
				f.MTUs = map[string]int{}
			}
			f.MTUs[first] = n
		}
	},
	"listen": func(f *Facts, val, _, _ string) {
		if l, ok := parseProcNetTCP(val); ok {
			f.Listening = append(f.Listening, l)
		}
	},
	"conn": func(f *Facts, val, _, _ string) {
		if l, ok := parseProcNetTCP(val); ok {
			f.Connections = append(f.Connections, l)
		}
	},
	"command":           func(f *Facts, val, _, _ string) { f.Commands[val] = true },
	"version":           func(f *Facts, _, first, rest string) { f.Versions[first] = rest },
	"proxy":             func(f *Facts, _, first, rest string) { f.Proxy[first] = rest },
	"file":              func(f *Facts, val, _, _ string) { f.Files[val] = true },
	"dir":               func(f *Facts, _, first, rest string) { f.DirEntries[first], _ = strconv.Atoi(rest) },
	"uid":               func(f *Facts, val, _, _ string) { f.UID, _ = strconv.Atoi(val) },
	"hostname_resolves": func(f *Facts, _, _, _ string) { f.HostResolves = true },
	"ca_cert": func(f *Facts, val, _, _ string) {
		if len(f.CACert)+len(val) < maxCACert {
			f.CACert += val + "\n"
		}
	},
	"etcd_user":      func(f *Facts, val, _, _ string) { f.Accounts.parse("etcd_user", val) },
	"etcd_group":     func(f *Facts, val, _, _ string) { f.Accounts.parse("etcd_group", val) },
	"free_system_id": func(f *Facts, val, _, _ string) { f.Accounts.parse("free_system_id", val) },
	"kernel_setting": func(f *Facts, _, first, rest string) { f.kernelSetting(first, rest) },
	"cni_bin_dir": func(f *Facts, val, _, _ string) {
		// Written into containerd's configuration: only one of the directories the script looks in.
		if slices.Contains(cniBinDirs, val) {
			f.CNIBinDir = val
		}
	},
}

// factStrings are the facts copied as they are printed.
var factStrings = map[string]func(*Facts) *string{
	"hostname":       func(f *Facts) *string { return &f.Hostname },
	"os":             func(f *Facts) *string { return &f.OS },
	"os_version":     func(f *Facts) *string { return &f.OSVersion },
	"os_pretty":      func(f *Facts) *string { return &f.OSPretty },
	"kernel":         func(f *Facts) *string { return &f.Kernel },
	"product_uuid":   func(f *Facts) *string { return &f.ProductUUID },
	"machine_id":     func(f *Facts) *string { return &f.MachineID },
	"boot_id":        func(f *Facts) *string { return &f.BootID },
	"cri_answers":    func(f *Facts) *string { return &f.CRIAnswers },
	"bridge_nf_call": func(f *Facts) *string { return &f.BridgeNFCall },
	"ip_forward":     func(f *Facts) *string { return &f.IPForward },
	"ipv6_forward":   func(f *Facts) *string { return &f.IPv6Forward },
	"virt":           func(f *Facts) *string { return &f.Virt },
	"init":           func(f *Facts) *string { return &f.Init },
	"member":         func(f *Facts) *string { return &f.Member },
	"stamp":          func(f *Facts) *string { return &f.Stamp },
}

func parseEpoch(s string) time.Time {
	sec, frac, _ := strings.Cut(s, ".")
	secs, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}
	}
	for len(frac) < 9 {
		frac += "0"
	}
	nanos, _ := strconv.ParseInt(frac[:9], 10, 64)
	return time.Unix(secs, nanos)
}

// parseProcNetTCP reads a local address of /proc/net/tcp{,6}: hex address, colon, hex port.
func parseProcNetTCP(s string) (Listener, bool) {
	addr, port, ok := strings.Cut(s, ":")
	if !ok {
		return Listener{}, false
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return Listener{}, false
	}
	return Listener{Addr: procAddr(addr), Port: int(p)}, true
}

// procAddr turns /proc/net/tcp's hex address (little-endian words) into dotted or colon notation.
func procAddr(hex string) string {
	b := make([]byte, 0, 16)
	for i := 0; i+8 <= len(hex); i += 8 {
		w, err := strconv.ParseUint(hex[i:i+8], 16, 32)
		if err != nil {
			return hex
		}
		b = append(b, byte(w), byte(w>>8), byte(w>>16), byte(w>>24))
	}
	switch len(b) {
	case 4:
		return netip.AddrFrom4([4]byte(b)).String()
	case 16:
		return netip.AddrFrom16([16]byte(b)).Unmap().String()
	}
	return hex
}

func goArch(m string) string {
	switch m {
	case "x86_64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	}
	return m
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// NodeIPs are the host's addresses in the cluster as its facts show them: the first IPv4 and the first
// IPv6 address of the interface that holds the default route, else of any interface (global addresses
// only); none when there is none. The inventory picks of them per family, its internalAddress first (see
// inventory.Host.NodeIPs).
func (f *Facts) NodeIPs() inventory.NodeAddrs {
	if f == nil {
		return nil
	}
	var candidates []netip.Addr
	for _, a := range f.Addresses {
		p, err := netip.ParsePrefix(a.CIDR)
		if err != nil || p.Addr().IsLoopback() || p.Addr().IsLinkLocalUnicast() {
			continue
		}
		if f.DefaultIface == "" || a.Iface == f.DefaultIface {
			candidates = append(candidates, p.Addr())
		}
	}
	if len(candidates) == 0 {
		for _, a := range f.Addresses {
			if p, err := netip.ParsePrefix(a.CIDR); err == nil && p.Addr().IsGlobalUnicast() {
				candidates = append(candidates, p.Addr())
			}
		}
	}
	var out inventory.NodeAddrs
	for _, fam := range []inventory.Family{inventory.IPv4, inventory.IPv6} {
		for _, c := range candidates {
			if c.Unmap().Is4() == (fam == inventory.IPv4) {
				out = append(out, c.Unmap())
				break
			}
		}
	}
	return out
}

// factFlags are the facts printed as "yes" or not.
var factFlags = map[string]func(*Facts) *bool{
	"cri_socket":   func(f *Facts) *bool { return &f.CRISocket },
	"br_netfilter": func(f *Facts) *bool { return &f.BrNetfilter },
	"sysctl_rw":    func(f *Facts) *bool { return &f.SysctlWritable },
}
