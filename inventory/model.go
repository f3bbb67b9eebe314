// Package inventory is the model of a cluster and its hosts: reading it from a native hosts.yaml or from an
// unchanged Ansible/kubespray inventory (YAML or INI), filling defaults and validating it, with every problem
// reported at once with the file, line and column it comes from.
package inventory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Inventory is a cluster and the hosts it is made of. Field names are those of the native hosts.yaml.
type Inventory struct {
	// APIVersion is the version of the file's schema, clusterctl/v1. A file without it is read as
	// clusterctl/v1; `clusterctl inventory migrate` moves a file written for an older version to this one.
	APIVersion string `yaml:"apiVersion" json:"apiVersion"`
	// Kind is what the file is: Inventory.
	Kind string `yaml:"kind" json:"kind"`
	// Cluster is the settings of the cluster as a whole.
	Cluster Cluster `yaml:"cluster" json:"cluster"`
	// SSH is how clusterctl reaches every host; a host may override it (hosts[].ssh).
	SSH SSH `yaml:"ssh" json:"ssh"`
	// Hooks are the inventory author's commands, run on every host (or those of the roles a hook names)
	// around clusterctl's own work.
	Hooks Hooks `yaml:"hooks,omitempty" json:"hooks,omitzero"`
	// Hosts are the machines of the cluster: one at least has the control-plane role.
	Hosts []Host `yaml:"hosts" json:"hosts"`
	// Groups give several hosts the same Node labels, taints and kubelet settings (see Group).
	Groups []Group `yaml:"groups,omitempty" json:"groups,omitempty"`

	// Source is the file the inventory was read from; Format how it was written.
	Source string `yaml:"-" json:"-"`
	Format Format `yaml:"-" json:"-"`
	// Ignored lists the Ansible variables that clusterctl does not use, each where it was set.
	Ignored []Pos `yaml:"-" json:"-"`

	pos    positions
	failed map[string]bool
	// baseDir is the directory of the file the inventory was read from ("" when read from memory): the
	// files it names are checked to exist only then.
	baseDir string

	sshUserDefault, sshPortDefault bool
}

// Format is how an inventory file is written.
type Format string

// The formats Load reads.
const (
	FormatNative      Format = "native"
	FormatAnsibleYAML Format = "ansible-yaml"
	FormatAnsibleINI  Format = "ansible-ini"
)

// Cluster holds the settings of the cluster as a whole.
type Cluster struct {
	// Name of the cluster, as in kubeconfigs (kubeadm's clusterName).
	Name string `yaml:"name" json:"name"`
	// KubernetesVersion is the version the cluster runs (v1.34 to v1.37); raised by one minor version (or
	// any patch), `clusterctl upgrade` moves the running cluster there.
	KubernetesVersion string `yaml:"kubernetesVersion" json:"kubernetesVersion"`
	// ControlPlaneEndpoint is HOST:PORT of a load balancer or DNS name in front of the API servers. Empty with
	// one control-plane host: that host's address. Empty with several: a node-local proxy on every node.
	ControlPlaneEndpoint string `yaml:"controlPlaneEndpoint,omitempty" json:"controlPlaneEndpoint,omitempty"`
	// Networking is the cluster's address ranges and DNS domain.
	Networking Networking `yaml:"networking" json:"networking"`
	// APIServer is kube-apiserver's port, certificate names, flags and mounts.
	APIServer APIServer `yaml:"apiServer" json:"apiServer"`
	// ControllerManager is kube-controller-manager's extra flags and mounts.
	ControllerManager Component `yaml:"controllerManager,omitempty" json:"controllerManager,omitzero"`
	// Scheduler is kube-scheduler's extra flags and mounts.
	Scheduler Component `yaml:"scheduler,omitempty" json:"scheduler,omitzero"`
	// Etcd is the etcd members' extra flags (in their static Pods, or an external member's unit), mounts
	// when stacked, and scheduled snapshots.
	Etcd Etcd `yaml:"etcd,omitempty" json:"etcd,omitzero"`
	// Kubelet is the kubelets' extra flags and cgroup v1 policy.
	Kubelet Kubelet `yaml:"kubelet,omitempty" json:"kubelet,omitzero"`
	// KubeProxy is kube-proxy's mode and extra flags.
	KubeProxy KubeProxy `yaml:"kubeProxy,omitempty" json:"kubeProxy,omitzero"`
	// ImageRepository is the registry (and path) the control plane's images are named from, as kubeadm's
	// imageRepository: registry.k8s.io/kube-apiserver becomes <imageRepository>/kube-apiserver.
	ImageRepository string `yaml:"imageRepository" json:"imageRepository"`
	// ContainerRuntimeEndpoint is the CRI socket of the container runtime on every host.
	ContainerRuntimeEndpoint string `yaml:"containerRuntimeEndpoint" json:"containerRuntimeEndpoint"`
	// Certificates is how clusterctl makes keys and certificates.
	Certificates Certificates `yaml:"certificates" json:"certificates"`
	// Artifacts is a directory of Kubernetes binaries, the container runtime and image archives (with its
	// manifest.json, as `clusterctl artifacts pull` makes it) that clusterctl pushes to hosts; relative to
	// the inventory's directory. Empty: up pulls the version's artifacts into the workstation's cache
	// (once) and pushes from there; hosts need no internet access.
	Artifacts string `yaml:"artifacts,omitempty" json:"artifacts,omitempty"`
	// Downloads are the base URLs artifacts are pulled from, for mirrors of the upstream layouts; empty
	// fields are upstream's.
	Downloads Downloads `yaml:"downloads,omitempty" json:"downloads,omitzero"`
	// ExtraImages are images (registry/repository:tag) pulled into the artifacts beside the cluster's and
	// imported on every node: the images of the user's CNI manifests, for example.
	ExtraImages []string `yaml:"extraImages,omitempty" json:"extraImages,omitempty"`
	// Registry makes hosts pull images from a registry (imageRepository's, a private one) instead of
	// importing them from the artifacts.
	Registry Registry `yaml:"registry,omitempty" json:"registry,omitzero"`
	// ContainerRuntime is where containerd comes from: artifacts (default; clusterctl installs containerd,
	// runc, the CNI plugins and crictl from the artifacts, and reset removes them) or host (the host's own,
	// installed and running).
	ContainerRuntime string `yaml:"containerRuntime" json:"containerRuntime"`
	// CNI is how pods on different nodes reach each other.
	CNI CNI `yaml:"cni" json:"cni"`
	// KubeadmJoin lets the controller-manager approve, as kubeadm does, the kubelet client certificate of
	// any node that joins with a token of `kubeadm token create` (kubeadm's node-autoapprove-bootstrap
	// binding), for any node name. Off by default: clusterctl approves its own joins, one node per token.
	KubeadmJoin bool `yaml:"kubeadmJoin,omitempty" json:"kubeadmJoin,omitempty"`
	// Security is encryption at rest, the audit log and Pod Security admission's default: each on, with
	// secure defaults, unless written otherwise.
	Security Security `yaml:"security,omitempty" json:"security,omitzero"`
	// Addons are Helm charts and manifests installed once the cluster is up, in this order (a pod network
	// add-on first, in the network step); see Addon.
	Addons []Addon `yaml:"addons,omitempty" json:"addons,omitempty"`
	// NodeLabels are set on every Node, under those of groups and hosts (hosts[].labels).
	NodeLabels map[string]string `yaml:"nodeLabels,omitempty" json:"nodeLabels,omitempty"`
	// NodeTaints are set on every Node, under those of groups and hosts (hosts[].taints).
	NodeTaints []Taint `yaml:"nodeTaints,omitempty" json:"nodeTaints,omitempty"`
}

// Where the container runtime comes from.
const (
	RuntimeArtifacts = "artifacts"
	RuntimeHost      = "host"
)

// InstallsRuntime: clusterctl installs containerd, runc, the CNI plugins and crictl from the artifacts
// (and reset removes them); otherwise the runtime is the host's own.
func (c *Cluster) InstallsRuntime() bool { return c.ContainerRuntime != RuntimeHost }

// Registry says how hosts reach a private registry.
type Registry struct {
	// Pull: hosts pull the cluster's images from imageRepository's registry (the node-local proxy's as
	// <imageRepository>/haproxy) and extraImages from theirs; the artifacts give only binaries.
	Pull bool `yaml:"pull,omitempty" json:"pull,omitempty"`
	// CA is the registry's CA certificate (a PEM file, relative to the inventory's directory) when hosts do
	// not trust its issuer; containerd is configured with it (hosts.toml). Credentials are never in the
	// inventory: they come from CLUSTERCTL_REGISTRY_USERNAME and CLUSTERCTL_REGISTRY_PASSWORD.
	CA string `yaml:"ca,omitempty" json:"ca,omitempty"`
}

// Downloads are base URLs of the upstream download layouts (or mirrors of them).
type Downloads struct {
	// Release is Kubernetes' release bucket: <release>/release/<version>/bin/linux/<arch>/<name>.
	Release string `yaml:"release,omitempty" json:"release,omitempty"`
	// Etcd is etcd's GitHub releases: <etcd>/<version>/etcd-<version>-linux-<arch>.tar.gz.
	Etcd string `yaml:"etcd,omitempty" json:"etcd,omitempty"`
	// Containerd is containerd's GitHub releases: <containerd>/v<version>/containerd-static-....tar.gz.
	Containerd string `yaml:"containerd,omitempty" json:"containerd,omitempty"`
	// Runc is runc's GitHub releases: <runc>/v<version>/runc.<arch>.
	Runc string `yaml:"runc,omitempty" json:"runc,omitempty"`
	// CNI is the CNI plugins' GitHub releases: <cni>/v<version>/cni-plugins-linux-<arch>-v<version>.tgz.
	CNI string `yaml:"cni,omitempty" json:"cni,omitempty"`
	// Crictl is cri-tools' GitHub releases: <crictl>/v<version>/crictl-v<version>-linux-<arch>.tar.gz.
	Crictl string `yaml:"crictl,omitempty" json:"crictl,omitempty"`
	// RegistryMirror is a registry (host[:port][/path]) to fetch images from in place of the registry their
	// references name.
	RegistryMirror string `yaml:"registryMirror,omitempty" json:"registryMirror,omitempty"`
	// Checksums is a file (relative to the inventory's directory) of trusted SHA-256 digests, one
	// "<sha256>  <path>" line per file (the lock's form, or the file's path in the artifacts directory):
	// every download must match its line (clusterctl artifacts pull --checksums).
	Checksums string `yaml:"checksums,omitempty" json:"checksums,omitempty"`
	// AllowHTTP allows plain-HTTP download bases that are not on loopback; every file must then match
	// checksums, a built-in digest or the lock.
	AllowHTTP bool `yaml:"allowHTTP,omitempty" json:"allowHTTP,omitempty"`
	// InsecureRegistries are registries (host[:port]) images may be fetched from over plain HTTP, without
	// credentials; every image from them must match checksums or the lock.
	InsecureRegistries []string `yaml:"insecureRegistries,omitempty" json:"insecureRegistries,omitempty"`
	// Lock is the lock every download is checked against and added to, across versions and
	// architectures (relative to the inventory's directory; default the workstation's,
	// $XDG_CACHE_HOME/clusterctl/artifacts.lock): commit it beside the inventory so that every
	// workstation and CI job pins the same bytes.
	Lock string `yaml:"lock,omitempty" json:"lock,omitempty"`
	// RequireLock: refuse any file or image that checksums, a built-in digest or the lock does not pin
	// (for CI: nothing is trusted on first use).
	RequireLock bool `yaml:"requireLock,omitempty" json:"requireLock,omitempty"`
}

// CNI plugins clusterctl sets up.
const (
	// CNIBridge is the standard bridge plugin with each node's pod range and routes between nodes: it
	// needs no image and suits nodes on one L2 network.
	CNIBridge = "bridge"
	// CNIFlannel is flannel's VXLAN overlay (flanneld as a DaemonSet): nodes on routed subnets.
	CNIFlannel = "flannel"
	// CNIManifests applies the user's manifests (Calico, Cilium, ...) after the control plane is up.
	CNIManifests = "manifests"
	// CNINone leaves pod networking to the user; nodes stay NotReady until they set it up.
	CNINone = "none"
)

// CNIPlugins are the values of cni.plugin: the pod networks of tasks/bridge and tasks/flannel (each
// registered in playbooks/networks.go), the user's manifests, or none.
var CNIPlugins = []string{CNIBridge, CNIFlannel, CNIManifests, CNINone}

// CNI says which pod network clusterctl sets up.
type CNI struct {
	// Plugin is bridge (default: nodes on one L2 segment), flannel (VXLAN: nodes on routed subnets),
	// manifests or none.
	Plugin string `yaml:"plugin" json:"plugin"`
	// MTU is the Pods' interfaces' MTU with bridge or flannel: 1280 or more. Default: with flannel, the
	// node interface's MTU minus VXLAN's 50 bytes (70 over IPv6); with bridge, the bridge's.
	MTU int `yaml:"mtu,omitempty" json:"mtu,omitempty"`
	// NetworkPolicy runs a NetworkPolicy controller (SIG Network's kube-network-policies, on nftables)
	// with bridge or flannel: without it, NetworkPolicy objects are accepted and enforced by nothing.
	NetworkPolicy bool `yaml:"networkPolicy,omitempty" json:"networkPolicy,omitempty"`
	// Manifests are YAML files applied with server-side apply when Plugin is manifests; relative to the
	// inventory's directory.
	Manifests []string `yaml:"manifests,omitempty" json:"manifests,omitempty"`
}

// Networking holds the address ranges of the cluster.
type Networking struct {
	// PodSubnet is the range Pods get their addresses from, each node a part of it (nodeCIDRMaskSize). A
	// dual-stack cluster has one range of each family, comma separated, the first the primary family.
	PodSubnet string `yaml:"podSubnet" json:"podSubnet"`
	// ServiceSubnet is the range of Services' cluster IPs: the API server's Service gets the first
	// address, CoreDNS the tenth (of the primary family's range). Dual-stack: the families of PodSubnet,
	// in its order.
	ServiceSubnet string `yaml:"serviceSubnet" json:"serviceSubnet"`
	// DNSDomain is the cluster's DNS domain (Services are <name>.<namespace>.svc.<dnsDomain>).
	DNSDomain string `yaml:"dnsDomain" json:"dnsDomain"`
	// NodeCIDRMaskSize is the prefix length of the pod range each node gets out of PodSubnet's IPv4 range.
	NodeCIDRMaskSize int `yaml:"nodeCIDRMaskSize" json:"nodeCIDRMaskSize"`
	// NodeCIDRMaskSizeIPv6 is the same for PodSubnet's IPv6 range (an IPv6-only cluster's nodeCIDRMaskSize
	// when this is not set).
	NodeCIDRMaskSizeIPv6 int `yaml:"nodeCIDRMaskSizeIPv6" json:"nodeCIDRMaskSizeIPv6"`
}

// APIServer holds the settings of kube-apiserver.
type APIServer struct {
	// BindPort is the port every API server listens on.
	BindPort int `yaml:"bindPort" json:"bindPort"`
	// CertSANs are extra names and addresses for the API server certificate.
	CertSANs []string `yaml:"certSANs,omitempty" json:"certSANs,omitempty"`
	// OIDC signs users in with an OpenID Connect identity provider's ID tokens (kubectl --token, or an
	// exec credential plugin): the API servers' structured authentication configuration.
	OIDC      *OIDC `yaml:"oidc,omitempty" json:"oidc,omitempty"`
	Component `yaml:",inline" json:",inline"`
}

// Certificates says how clusterctl makes keys and certificates.
type Certificates struct {
	// KeyAlgorithm is one of RSA-2048, RSA-3072, RSA-4096, ECDSA-P256.
	KeyAlgorithm string `yaml:"keyAlgorithm" json:"keyAlgorithm"`
	// CAValidity is how long the CAs clusterctl makes are valid: a Go duration, or days (d) and years (y).
	CAValidity Duration `yaml:"caValidity" json:"caValidity"`
	// Validity is how long leaf certificates and kubeconfigs are valid (cut to the CA's expiry);
	// `clusterctl certs rotate` renews them.
	Validity Duration `yaml:"validity" json:"validity"`
}

// Role is what a host does in the cluster.
type Role string

// The roles a host can have; a host may have several.
const (
	RoleControlPlane Role = "control-plane"
	RoleWorker       Role = "worker"
	// RoleEtcd: the host runs an etcd member. Hosts with this role that are not exactly the
	// control-plane hosts make kubeadm's external-etcd topology (see ExternalEtcd); without it on any
	// host, each control-plane host runs a member (stacked etcd).
	RoleEtcd Role = "etcd"
)

// Host is one machine of the cluster.
type Host struct {
	// Name identifies the host in the inventory and on the command line (--limit).
	Name string `yaml:"name" json:"name"`
	// Address is where clusterctl connects over SSH: an IP address or DNS name.
	Address string `yaml:"address" json:"address"`
	// InternalAddress is the node's IP address in the cluster (kubelet --node-ip, the API server's advertise
	// address, etcd's peer address). Default: Address when it is an IP address, else learned from the host.
	// A dual-stack cluster's node has one of each family: "10.0.0.5,fd00::5", or a YAML list. Written, it
	// gives both; left out, each family's is address (when an IP of it), else learned from the host.
	InternalAddress string `yaml:"internalAddress,omitempty" json:"internalAddress,omitempty"`
	// NodeName is the host's Kubernetes Node name (default: name), lower case, a DNS subdomain.
	NodeName string `yaml:"nodeName" json:"nodeName"`
	// Roles are what the host does: control-plane, worker, etcd (an external etcd member), any of them
	// together.
	Roles []Role `yaml:"roles" json:"roles"`
	// Labels are set on the host's Node when it registers and at every run, over those of the cluster
	// (cluster.nodeLabels) and of its groups; a label clusterctl set and the inventory no longer gives is
	// taken off the Node, one set by anyone else is left alone.
	Labels map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
	// Taints are set on the host's Node as the labels are (a taint is its key and effect; the later value
	// wins); a control-plane node gets kubeadm's taint unless it is also a worker.
	Taints []Taint `yaml:"taints,omitempty" json:"taints,omitempty"`
	// Kubelet is merged into this host's kubelet configuration, over the cluster's (cluster.kubelet.config)
	// and its groups': KubeletConfiguration fields such as maxPods, systemReserved, kubeReserved,
	// evictionHard. A kubelet restarts only where its configuration changed.
	Kubelet KubeletConfig `yaml:"kubelet,omitempty" json:"kubelet,omitempty"`
	// SSH overrides the inventory's SSH settings for this host.
	SSH HostSSH `yaml:"ssh,omitempty" json:"ssh,omitzero"`
	// Hooks run on this host after the inventory's own (hooks.*), at the same points.
	Hooks Hooks `yaml:"hooks,omitempty" json:"hooks,omitzero"`

	families []Family // the cluster's, set by Load: which addresses NodeIPs picks
}

// Taint is a node taint, as in the Node API.
type Taint struct {
	// Key is the taint's key, a qualified name (example.com/gpu).
	Key string `yaml:"key" json:"key"`
	// Value is the taint's value, empty or a label value.
	Value string `yaml:"value,omitempty" json:"value,omitempty"`
	// Effect is NoSchedule, PreferNoSchedule or NoExecute.
	Effect string `yaml:"effect" json:"effect"`
}

func (t Taint) String() string {
	if t.Value == "" {
		return t.Key + ":" + t.Effect
	}
	return t.Key + "=" + t.Value + ":" + t.Effect
}

// Has reports whether the host has the role.
func (h *Host) Has(r Role) bool {
	for _, hr := range h.Roles {
		if hr == r {
			return true
		}
	}
	return false
}

// ControlPlanes returns the control-plane hosts, in inventory order.
func (inv *Inventory) ControlPlanes() []*Host { return inv.withRole(RoleControlPlane) }

// Workers returns the hosts with the worker role (control-plane hosts that are also workers included).
func (inv *Inventory) Workers() []*Host { return inv.withRole(RoleWorker) }

// EtcdHosts are the hosts that run an etcd member, in inventory order: the hosts with the etcd role,
// else the control-plane hosts (stacked etcd).
func (inv *Inventory) EtcdHosts() []*Host {
	if etcd := inv.withRole(RoleEtcd); len(etcd) > 0 {
		return etcd
	}
	return inv.ControlPlanes()
}

// ExternalEtcd reports whether etcd runs on hosts other than exactly the control-plane hosts: kubeadm's
// external-etcd topology, each member a systemd unit of its own; otherwise each control-plane node runs
// its member as a static Pod beside its API server (stacked).
func (inv *Inventory) ExternalEtcd() bool {
	etcd := inv.withRole(RoleEtcd)
	return len(etcd) > 0 && !slices.Equal(etcd, inv.ControlPlanes())
}

// Nodes are the hosts that are Kubernetes nodes (control-plane or worker), in inventory order: hosts that
// only run etcd are not.
func (inv *Inventory) Nodes() []*Host {
	var out []*Host
	for i := range inv.Hosts {
		if h := &inv.Hosts[i]; h.IsNode() {
			out = append(out, h)
		}
	}
	return out
}

// IsNode reports whether the host is a Kubernetes node (control-plane or worker).
func (h *Host) IsNode() bool { return h.Has(RoleControlPlane) || h.Has(RoleWorker) }

// NodeIP is the host's address in the cluster (kubelets' node IP, etcd's peer and client address, the API
// server's advertise address), of the cluster's primary family: its internalAddress, else learned (what its
// facts show, or its Node reports); the zero Addr (not IsValid) when neither is known. Every address of a
// node is decided here and in NodeIPs.
func (h *Host) NodeIP(learned NodeAddrs) netip.Addr {
	ips := h.NodeIPs(learned)
	if len(ips) == 0 || (len(h.families) > 0 && FamilyOf(ips[0]) != h.families[0]) {
		return netip.Addr{}
	}
	return ips[0]
}

func (inv *Inventory) withRole(r Role) []*Host {
	var out []*Host
	for i := range inv.Hosts {
		if inv.Hosts[i].Has(r) {
			out = append(out, &inv.Hosts[i])
		}
	}
	return out
}

// Host returns the host with that name, or nil.
func (inv *Inventory) Host(name string) *Host {
	for i := range inv.Hosts {
		if inv.Hosts[i].Name == name {
			return &inv.Hosts[i]
		}
	}
	return nil
}

// Limit returns the hosts named (as Ansible's --limit), in inventory order; all hosts when names is empty.
// Unknown names are an error that lists them.
func (inv *Inventory) Limit(names []string) ([]*Host, error) {
	if len(names) == 0 {
		out := make([]*Host, len(inv.Hosts))
		for i := range inv.Hosts {
			out[i] = &inv.Hosts[i]
		}
		return out, nil
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []*Host
	for i := range inv.Hosts {
		if want[inv.Hosts[i].Name] {
			out = append(out, &inv.Hosts[i])
			delete(want, inv.Hosts[i].Name)
		}
	}
	if len(want) > 0 {
		var unknown []string
		for _, n := range names {
			if want[n] {
				unknown = append(unknown, n)
			}
		}
		return nil, fmt.Errorf("--limit names hosts that are not in the inventory: %s", strings.Join(unknown, ", "))
	}
	return out, nil
}

// Arg is one command-line flag of a component, without the leading dashes.
type Arg struct {
	Name  string
	Value string
}

// Args are flags in the order given; written in YAML as a mapping (name: value), kept in order.
type Args []Arg

// Pairs is the args as name/value pairs, in order, for packages that take flags without the inventory's types.
func (a Args) Pairs() [][2]string {
	out := make([][2]string, 0, len(a))
	for _, x := range a {
		out = append(out, [2]string{x.Name, x.Value})
	}
	return out
}

// MarshalYAML writes the args as an ordered mapping.
func (a Args) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, arg := range a {
		n.Content = append(n.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Value: arg.Name},
			&yaml.Node{Kind: yaml.ScalarNode, Value: arg.Value, Tag: "!!str"})
	}
	return n, nil
}

// MarshalJSON writes the args as an object with keys in order.
func (a Args) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, arg := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(arg.Name)
		v, _ := json.Marshal(arg.Value)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Duration is a time span written as Go writes durations, plus days and years ("8760h", "365d", "10y").
type Duration struct{ time.Duration }

// ParseDuration reads a Duration; "d" is 24h and "y" 365 days.
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "y": 365 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			v, err := strconv.Atoi(n)
			if err != nil {
				return Duration{}, fmt.Errorf("%q is not a duration (examples: 8760h, 365d, 10y)", s)
			}
			return Duration{time.Duration(v) * unit}, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return Duration{}, fmt.Errorf("%q is not a duration (examples: 8760h, 365d, 10y)", s)
	}
	return Duration{d}, nil
}

func (d Duration) String() string {
	day := 24 * time.Hour
	switch {
	case d.Duration != 0 && d.Duration%(365*day) == 0:
		return fmt.Sprintf("%dy", d.Duration/(365*day))
	case d.Duration != 0 && d.Duration%day == 0:
		return fmt.Sprintf("%dd", d.Duration/day)
	default:
		return d.Duration.String()
	}
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// MarshalNative writes the inventory as a native hosts.yaml, with a header naming its source and, for an
// Ansible inventory, the variables that were ignored.
func (inv *Inventory) MarshalNative() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# clusterctl inventory, normalized from %s (%s)\n", inv.Source, inv.Format)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(inv); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	if len(inv.Ignored) > 0 {
		b.WriteString("# Ansible variables clusterctl does not use:\n")
		for _, p := range inv.Ignored {
			fmt.Fprintf(&b, "#   %s: %s\n", printable(p.location()), printable(p.Path))
		}
	}
	return b.Bytes(), nil
}

// Resolve makes a path written in the inventory (artifacts, CNI manifests) relative to the inventory's
// directory, as Ansible resolves paths relative to the inventory.
func (inv *Inventory) Resolve(p string) string {
	if p == "" || filepath.IsAbs(p) || inv.Source == "" {
		return p
	}
	return filepath.Join(filepath.Dir(inv.Source), p)
}

// Set parses a command-line value (pflag.Value): Go durations, or days (d) and years (y).
func (d *Duration) Set(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Type names the value in --help.
func (d *Duration) Type() string { return "duration" }
