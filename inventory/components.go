package inventory

// This file holds the components' settings: the kubelet, etcd (and its snapshots), kube-proxy, and the
// extra flags and volumes every component takes.

// Kubelet holds the kubelet's settings: its extra flags and whether it may run on cgroup v1 hosts.
type Kubelet struct {
	Component `yaml:",inline" json:",inline"`
	// FailCgroupV1 is the kubelet's failCgroupV1. Kubelets from v1.35 refuse to start on hosts that use
	// cgroup v1 unless it is false; preflight refuses such hosts until the inventory says so, and warns then.
	FailCgroupV1 *bool `yaml:"failCgroupV1,omitempty" json:"failCgroupV1,omitempty"`
	// Config is merged into every node's kubelet configuration (KubeletConfiguration fields: maxPods,
	// systemReserved, evictionHard, ...); groups and hosts may add to it (groups[].kubelet, hosts[].kubelet).
	Config KubeletConfig `yaml:"config,omitempty" json:"config,omitempty"`
}

// IsZero lets omitempty drop empty kubelet settings.
func (k Kubelet) IsZero() bool {
	return k.Component.IsZero() && k.FailCgroupV1 == nil && len(k.Config) == 0
}

// AllowsCgroupV1 reports whether the inventory lets kubelets run on cgroup v1 hosts (failCgroupV1: false).
func (k Kubelet) AllowsCgroupV1() bool { return k.FailCgroupV1 != nil && !*k.FailCgroupV1 }

// Etcd is the etcd members' settings.
type Etcd struct {
	Component `yaml:",inline" json:",inline"`
	// Snapshots, when set, has every etcd member (stacked or external) take a snapshot of its own on a
	// schedule: a systemd timer and oneshot service of clusterctl's running the artifacts' etcdctl and
	// etcdutl (no daemon), each snapshot verified before the oldest beyond keep are removed.
	Snapshots *EtcdSnapshots `yaml:"snapshots,omitempty" json:"snapshots,omitempty"`
}

// IsZero lets omitempty drop empty etcd settings.
func (e Etcd) IsZero() bool { return e.Component.IsZero() && e.Snapshots == nil }

// Defaults of cluster.etcd.snapshots: twice a day (as RKE2), five kept.
const (
	DefaultSnapshotSchedule = "*-*-* 00,12:00:00"
	DefaultSnapshotKeep     = 5
	DefaultSnapshotDir      = "/var/lib/etcd-snapshots"
)

// EtcdSnapshots is when etcd members take snapshots, how many they keep, and where.
type EtcdSnapshots struct {
	// Schedule is when, as systemd's OnCalendar says it: daily, hourly, "*-*-* 00,12:00:00" (the default:
	// twice a day), "Mon..Fri 02:30". Each member's timer fires within a minute of it.
	Schedule string `yaml:"schedule,omitempty" json:"schedule,omitempty"`
	// Keep is how many snapshots each member keeps; the oldest beyond it are removed after each new one is
	// verified (default 5).
	Keep int `yaml:"keep,omitempty" json:"keep,omitempty"`
	// Dir is the directory on each member that holds them (default /var/lib/etcd-snapshots): 0700, each
	// snapshot 0600. reset keeps it unless told --remove-snapshots.
	Dir string `yaml:"dir,omitempty" json:"dir,omitempty"`
}

// kube-proxy's modes clusterctl runs (kubeProxy.mode).
const (
	// ProxyIPTables programs Services with iptables rules: the default, kubeadm's too.
	ProxyIPTables = "iptables"
	// ProxyNFTables programs them with nftables (GA since Kubernetes v1.33): the table kube-proxy of the
	// ip and ip6 families.
	ProxyNFTables = "nftables"
)

// ProxyModes are the values of kubeProxy.mode.
var ProxyModes = []string{ProxyIPTables, ProxyNFTables}

// KubeProxy is kube-proxy's settings.
type KubeProxy struct {
	Component `yaml:",inline" json:",inline"`
	// Mode is how kube-proxy programs Services: iptables (the default) or nftables (needs the kernel's
	// nf_tables, and the nft command on the hosts for reset). Changed on a running cluster, by up or
	// upgrade, it restarts kube-proxy on every node, which removes the other mode's rules as it starts.
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
}

// IsZero lets omitempty drop empty kube-proxy settings.
func (k KubeProxy) IsZero() bool { return k.Component.IsZero() && k.Mode == "" }

// Component holds what the user adds to one component's command line and mounts.
type Component struct {
	// ExtraArgs are flags added to the component's command line: a mapping of flag names (no dashes) to
	// values, in the order written; a flag clusterctl sets itself is replaced by yours.
	ExtraArgs Args `yaml:"extraArgs,omitempty" json:"extraArgs,omitempty"`
	// ExtraVolumes are host paths mounted into the component's static Pod (control-plane components).
	ExtraVolumes []ExtraVolume `yaml:"extraVolumes,omitempty" json:"extraVolumes,omitempty"`
}

// IsZero lets omitempty drop an empty component.
func (c Component) IsZero() bool { return len(c.ExtraArgs) == 0 && len(c.ExtraVolumes) == 0 }

// ExtraVolume is a host path mounted into a control-plane static Pod.
type ExtraVolume struct {
	// Name is the volume's name in the Pod.
	Name string `yaml:"name" json:"name"`
	// HostPath is the path on the host.
	HostPath string `yaml:"hostPath" json:"hostPath"`
	// MountPath is where the container sees it.
	MountPath string `yaml:"mountPath" json:"mountPath"`
	// ReadOnly mounts it read-only.
	ReadOnly bool `yaml:"readOnly,omitempty" json:"readOnly,omitempty"`
	// PathType is the hostPath volume's type (DirectoryOrCreate, Directory, FileOrCreate, File, ...).
	PathType string `yaml:"pathType,omitempty" json:"pathType,omitempty"`
}
