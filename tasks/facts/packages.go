package facts

// hostPackages are the packages that provide the commands a host must have (clusterctl installs the
// Kubernetes binaries and the runtime, not these), by package manager.
var hostPackages = map[string]map[string]string{
	"losetup":   {"apt": "mount", "dnf": "util-linux", "zypper": "util-linux"},
	"mount":     {"apt": "mount", "dnf": "util-linux", "zypper": "util-linux"},
	"cp":        {"apt": "coreutils", "dnf": "coreutils", "zypper": "coreutils"},
	"sha256sum": {"apt": "coreutils", "dnf": "coreutils", "zypper": "coreutils"},
	"iptables":  {"apt": "iptables", "dnf": "iptables-nft", "zypper": "iptables"},
	"ip":        {"apt": "iproute2", "dnf": "iproute", "zypper": "iproute2"},
	"modprobe":  {"apt": "kmod", "dnf": "kmod", "zypper": "kmod"},
	"nft":       {"apt": "nftables", "dnf": "nftables", "zypper": "nftables"},
}

// PackageManager is the host's package manager by its os-release ID: apt, dnf or zypper; "" unknown.
func (f *Facts) PackageManager() string {
	switch f.OS {
	case "debian", "ubuntu", "raspbian", "linuxmint", "pop":
		return "apt"
	case "rhel", "centos", "rocky", "almalinux", "fedora", "ol", "amzn":
		return "dnf"
	case "sles", "opensuse-leap", "opensuse-tumbleweed", "sle-micro":
		return "zypper"
	}
	return ""
}

// InstallHint is the command that installs what provides cmd on the host, or a sentence when its
// distribution is unknown.
func (f *Facts) InstallHint(cmd string) string {
	pkgs := hostPackages[cmd]
	switch pm := f.PackageManager(); pm {
	case "apt":
		return "apt-get install -y " + pkgs[pm]
	case "dnf", "zypper":
		return pm + " install -y " + pkgs[pm]
	}
	return "install your distribution's package that provides " + cmd
}
