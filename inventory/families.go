package inventory

import (
	"net/netip"
	"strings"
)

// Family is an IP family of the cluster: IPv4 or IPv6.
type Family int

// The IP families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

func (f Family) String() string {
	if f == IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// FamilyOf is the family of an address.
func FamilyOf(a netip.Addr) Family {
	if a.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

// Ranges parses a podSubnet or serviceSubnet setting: one CIDR range, or a dual-stack pair as kubeadm spells
// it ("10.244.0.0/16,fd00:10:244::/56"), the first range's family the cluster's primary. It returns nil
// when the setting is not valid (validation says why).
func Ranges(s string) []netip.Prefix {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(part))
		if err != nil {
			return nil
		}
		out = append(out, p)
	}
	if len(out) > 2 || (len(out) == 2 && FamilyOf(out[0].Addr()) == FamilyOf(out[1].Addr())) {
		return nil
	}
	return out
}

// Families are the cluster's IP families in podSubnet's order: one, or two for a dual-stack cluster, the
// first the primary (kubelets' first node IP, the API server's advertise address, etcd's URLs).
func (n *Networking) Families() []Family {
	var out []Family
	for _, p := range Ranges(n.PodSubnet) {
		out = append(out, FamilyOf(p.Addr()))
	}
	return out
}

// DualStack reports whether the cluster has both IP families.
func (n *Networking) DualStack() bool { return len(n.Families()) == 2 }

// NodeMask is the prefix length of the pod range each node gets out of the pod subnet of family f.
func (n *Networking) NodeMask(f Family) int {
	if f == IPv6 {
		return n.NodeCIDRMaskSizeIPv6
	}
	return n.NodeCIDRMaskSize
}

// splitAddresses splits an internalAddress setting: one address, or one of each family separated by a comma
// (the kubelet's --node-ip spelling; a YAML list is joined so when read).
func splitAddresses(s string) []string {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// NodeIPs are the host's addresses in the cluster, one of each family the cluster has, the primary's
// first: per family, its internalAddress of that family, else its address when that is an IP of the family,
// else one of the learned addresses (what its facts or its Node show). A family neither gives is left out;
// NodeIP tells whether the primary is known.
func (h *Host) NodeIPs(learned NodeAddrs) NodeAddrs {
	internal := ParseNodeAddrs(h.InternalAddress)
	if a, err := netip.ParseAddr(h.Address); err == nil {
		internal = append(internal, a.Unmap())
	}
	if len(h.families) == 0 {
		// Built outside Load (tests, tools): one address, the inventory's first.
		for _, list := range []NodeAddrs{internal, learned} {
			if len(list) > 0 {
				return NodeAddrs{list[0]}
			}
		}
		return nil
	}
	var out NodeAddrs
	for _, f := range h.families {
		if a, ok := internal.Of(f); ok {
			out = append(out, a)
		} else if a, ok := learned.Of(f); ok {
			out = append(out, a)
		}
	}
	return out
}

// MissingFamilies are the cluster's families of which the host has no address in the cluster (see NodeIPs).
func (h *Host) MissingFamilies(learned NodeAddrs) []Family {
	var missing []Family
	ips := h.NodeIPs(learned)
	for _, f := range h.families {
		if _, ok := ips.Of(f); !ok {
			missing = append(missing, f)
		}
	}
	return missing
}

// FirstRange is the primary family's range of a podSubnet or serviceSubnet setting (the whole setting when
// it is single-stack).
func FirstRange(s string) string { return strings.TrimSpace(strings.Split(s, ",")[0]) }
