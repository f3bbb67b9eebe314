package inventory

import (
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Defaults. The Kubernetes version is the one the lab builds and the end-to-end tests run; see
// SupportedMinors for the range accepted.
const (
	DefaultClusterName              = "kubernetes"
	DefaultKubernetesVersion        = "v1.37.2"
	DefaultPodSubnet                = "10.244.0.0/16"
	DefaultServiceSubnet            = "10.96.0.0/12"
	DefaultPodSubnetIPv6            = "fd00:10:244::/56" // the IPv6 range a dual-stack kubespray inventory gets when it names none
	DefaultServiceSubnetIPv6        = "fd00:10:96::/112"
	DefaultDNSDomain                = "cluster.local"
	DefaultNodeCIDRMaskSize         = 24
	DefaultNodeCIDRMaskSizeIPv6     = 64
	DefaultAPIServerPort            = 6443
	DefaultImageRepository          = "registry.k8s.io"
	DefaultContainerRuntimeEndpoint = "unix:///run/containerd/containerd.sock"
	DefaultKeyAlgorithm             = "RSA-2048"
	DefaultSSHUser                  = "root"
	DefaultSSHPort                  = 22

	day                 = 24 * time.Hour
	DefaultCAValidity   = 10 * 365 * day
	DefaultCertValidity = 365 * day
	minSupportedMinor   = 34
	maxSupportedMinor   = 37
)

// SupportedMinors are the oldest and newest Kubernetes minor versions clusterctl builds and operates.
func SupportedMinors() (oldest, newest int) { return minSupportedMinor, maxSupportedMinor }

// TestedPatches are, per minor release, the patch release clusterctl's lab builds and its tests run: the
// version a multi-minor upgrade passes through when the command line names none for that minor.
var TestedPatches = map[int]string{34: "v1.34.4", 35: "v1.35.4", 36: "v1.36.3", 37: DefaultKubernetesVersion}

// KeyAlgorithms are the values certificates.keyAlgorithm accepts.
var KeyAlgorithms = []string{"RSA-2048", "RSA-3072", "RSA-4096", "ECDSA-P256"}

func (inv *Inventory) applyDefaults() {
	setString(&inv.APIVersion, APIVersion)
	setString(&inv.Kind, Kind)
	c := &inv.Cluster
	setString(&c.Name, DefaultClusterName)
	setString(&c.KubernetesVersion, DefaultKubernetesVersion)
	if c.KubernetesVersion != "" && c.KubernetesVersion[0] >= '0' && c.KubernetesVersion[0] <= '9' {
		c.KubernetesVersion = "v" + c.KubernetesVersion // kubespray writes 1.34.4
	}
	setString(&c.Networking.PodSubnet, DefaultPodSubnet)
	setString(&c.Networking.ServiceSubnet, DefaultServiceSubnet)
	setString(&c.Networking.DNSDomain, DefaultDNSDomain)
	if f := c.Networking.Families(); len(f) == 1 && f[0] == IPv6 && c.Networking.NodeCIDRMaskSizeIPv6 == 0 {
		// An IPv6-only cluster's nodeCIDRMaskSize is its one mask (the controller-manager's
		// --node-cidr-mask-size), as inventories written before nodeCIDRMaskSizeIPv6 say.
		c.Networking.NodeCIDRMaskSizeIPv6 = c.Networking.NodeCIDRMaskSize
	}
	setInt(&c.Networking.NodeCIDRMaskSize, DefaultNodeCIDRMaskSize)
	setInt(&c.Networking.NodeCIDRMaskSizeIPv6, DefaultNodeCIDRMaskSizeIPv6)
	setInt(&c.APIServer.BindPort, DefaultAPIServerPort)
	setString(&c.ImageRepository, DefaultImageRepository)
	setString(&c.ContainerRuntimeEndpoint, DefaultContainerRuntimeEndpoint)
	setString(&c.Certificates.KeyAlgorithm, DefaultKeyAlgorithm)
	setString(&c.CNI.Plugin, CNIBridge)
	setString(&c.KubeProxy.Mode, ProxyIPTables)
	if s := c.Etcd.Snapshots; s != nil {
		setString(&s.Schedule, DefaultSnapshotSchedule)
		setInt(&s.Keep, DefaultSnapshotKeep)
		setString(&s.Dir, DefaultSnapshotDir)
	}
	setString(&c.ContainerRuntime, RuntimeArtifacts)
	c.Security.applyDefaults()
	if c.APIServer.OIDC != nil {
		c.APIServer.OIDC.applyDefaults()
	}
	c.Certificates.KeyAlgorithm = strings.ToUpper(c.Certificates.KeyAlgorithm)
	if c.Certificates.CAValidity.Duration == 0 {
		c.Certificates.CAValidity.Duration = DefaultCAValidity
	}
	if c.Certificates.Validity.Duration == 0 {
		c.Certificates.Validity.Duration = DefaultCertValidity
	}

	// Remember which SSH settings are defaults, so that ~/.ssh/config can supply them instead.
	inv.sshUserDefault, inv.sshPortDefault = inv.SSH.User == "", inv.SSH.Port == 0
	setString(&inv.SSH.User, DefaultSSHUser)
	setInt(&inv.SSH.Port, DefaultSSHPort)

	for i, san := range c.APIServer.CertSANs {
		c.APIServer.CertSANs[i] = unmapped(san)
	}
	families := c.Networking.Families()
	for i := range inv.Hosts {
		h := &inv.Hosts[i]
		h.families = families
		// An IPv4-mapped IPv6 address (::ffff:10.0.0.1) is the IPv4 address: so it is compared, ranged
		// and given to the kubelet.
		h.Address = unmapped(h.Address)
		if parts := splitAddresses(h.InternalAddress); slices.ContainsFunc(parts, func(a string) bool { return unmapped(a) != a }) {
			for j := range parts {
				parts[j] = unmapped(parts[j])
			}
			h.InternalAddress = strings.Join(parts, ",")
		}
		setString(&h.Address, h.Name)
		setString(&h.NodeName, h.Name)
		// A dual-stack node's addresses are picked per family (NodeIPs), the SSH address among them.
		if ip, err := netip.ParseAddr(h.Address); err == nil && h.InternalAddress == "" && len(families) == 1 && FamilyOf(ip) == families[0] {
			h.InternalAddress = ip.String()
		}
	}
}

// Become reports whether commands on h run through sudo: as the host or inventory says, else for any login
// user but root.
func (inv *Inventory) Become(h *Host) bool {
	switch {
	case h.SSH.Become != nil:
		return *h.SSH.Become
	case inv.SSH.Become != nil:
		return *inv.SSH.Become
	default:
		return inv.User(h) != "root"
	}
}

// ExplicitUser is the login user the inventory gives h, or "" when it only has the default (root), which
// ~/.ssh/config may override.
func (inv *Inventory) ExplicitUser(h *Host) string {
	if h.SSH.User == "" && inv.sshUserDefault {
		return ""
	}
	return inv.User(h)
}

// ExplicitPort is the SSH port the inventory gives h, or 0 when it only has the default (22).
func (inv *Inventory) ExplicitPort(h *Host) int {
	if h.SSH.Port == 0 && inv.sshPortDefault {
		return 0
	}
	return inv.Port(h)
}

// User is the SSH login user for h.
func (inv *Inventory) User(h *Host) string {
	if h.SSH.User != "" {
		return h.SSH.User
	}
	return inv.SSH.User
}

// Port is the SSH port of h.
func (inv *Inventory) Port(h *Host) int {
	if h.SSH.Port != 0 {
		return h.SSH.Port
	}
	return inv.SSH.Port
}

func setString(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

func setInt(i *int, def int) {
	if *i == 0 {
		*i = def
	}
}

// unmapped is s with an IPv4-mapped IPv6 address replaced by its IPv4 address; anything else as it is.
func unmapped(s string) string {
	if a, err := netip.ParseAddr(s); err == nil && a.Is4In6() && a.Zone() == "" {
		return a.Unmap().String()
	}
	return s
}

// The schema of hosts.yaml this clusterctl reads and writes.
const (
	APIVersion = "clusterctl/v1"
	Kind       = "Inventory"
)
