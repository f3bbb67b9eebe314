package inventory

import (
	"net"
	"net/netip"
	"strings"
)

// NodeAddrs are a host's addresses in the cluster, resolved once per run (Host.NodeIPs): one of each family
// the cluster has, the primary family's first. Render and the steps take them as they are; String is the
// kubelet's --node-ip spelling.
type NodeAddrs []netip.Addr

// ParseNodeAddrs reads addresses separated by commas (an internalAddress setting, addresses recorded in the
// state directory), each in its canonical form (IPv4-mapped IPv6 unmapped); what is not an address is left out.
func ParseNodeAddrs(s string) NodeAddrs {
	var out NodeAddrs
	for _, part := range strings.Split(s, ",") {
		if a, err := netip.ParseAddr(strings.TrimSpace(part)); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// Of is the first address of family f.
func (a NodeAddrs) Of(f Family) (netip.Addr, bool) {
	for _, ip := range a {
		if FamilyOf(ip) == f {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// Strings are the addresses as text.
func (a NodeAddrs) Strings() []string {
	out := make([]string, len(a))
	for i, ip := range a {
		out[i] = ip.String()
	}
	return out
}

// String is the addresses separated by commas, as the kubelet's --node-ip takes them.
func (a NodeAddrs) String() string { return strings.Join(a.Strings(), ",") }

// AddrText is a as text, "" for the zero Addr (an address not known).
func AddrText(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// NetIP is a as a net.IP in its 16-byte form, as net.ParseIP gives it (nil for the zero Addr): what
// crypto/x509 takes.
func NetIP(a netip.Addr) net.IP {
	if !a.IsValid() {
		return nil
	}
	b := a.As16()
	return net.IP(b[:])
}
