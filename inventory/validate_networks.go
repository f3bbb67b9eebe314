package inventory

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// networks checks the pod and service ranges against each other, the node masks and the hosts' addresses.
func (v *validator) networks() {
	n := &v.inv.Cluster.Networking
	const podKey, svcKey = "cluster.networking.podSubnet", "cluster.networking.serviceSubnet"
	pods, podsOK := v.ranges(podKey, n.PodSubnet)
	svcs, svcsOK := v.ranges(svcKey, n.ServiceSubnet)
	if svcsOK {
		for _, r := range svcs {
			v.serviceRange(r)
		}
	}
	if podsOK {
		for _, r := range pods {
			v.podRange(r)
		}
	}
	if podsOK && svcsOK {
		pf, sf := familiesOf(pods), familiesOf(svcs)
		switch {
		case len(pf) != len(sf):
			v.errorf(svcKey, "%s is %s but the pod subnet %s is %s: both are single-stack or both dual-stack", n.ServiceSubnet, stackName(sf), n.PodSubnet, stackName(pf))
		case pf[0] != sf[0]:
			v.errorf(svcKey, "%s lists %s first but the pod subnet %s lists %s first: the first family is the cluster's primary, the same in both", n.ServiceSubnet, sf[0], n.PodSubnet, pf[0])
		}
		for _, p := range pods {
			for _, s := range svcs {
				if p.Overlaps(s) {
					v.errorf(svcKey, "%s overlaps the pod subnet %s", s, p)
				}
			}
		}
	}
	for i := range v.inv.Hosts {
		v.hostNetworks(i, pods, svcs)
	}
}

func (v *validator) serviceRange(r netip.Prefix) {
	bits := r.Addr().BitLen() - r.Bits()
	switch {
	case bits < 4:
		v.errorf("cluster.networking.serviceSubnet", "%s is too small: it needs at least 16 addresses (the API server's Service takes the first, CoreDNS the tenth)", r)
	case bits > 20:
		v.errorf("cluster.networking.serviceSubnet", "%s is too large: kube-apiserver accepts at most 2^20 Service addresses (a /%d or longer prefix)", r, r.Addr().BitLen()-20)
	}
}

// podRange checks one pod range against its family's node mask and the number of hosts.
func (v *validator) podRange(r netip.Prefix) {
	n := &v.inv.Cluster.Networking
	maxMask, maskKey := 30, "cluster.networking.nodeCIDRMaskSize"
	if FamilyOf(r.Addr()) == IPv6 {
		maxMask, maskKey = 126, "cluster.networking.nodeCIDRMaskSizeIPv6"
	}
	mask := n.NodeMask(FamilyOf(r.Addr()))
	switch {
	case mask < r.Bits() && !v.written("cluster.networking.podSubnet"):
		v.errorf(maskKey, "/%d is larger than the pod subnet %s it is carved from", mask, r)
	case mask < r.Bits():
		v.errorf("cluster.networking.podSubnet", "%s is smaller than one node's pod range (/%d, networking.%s)", r, mask, maskKey[len("cluster.networking."):])
	case mask > maxMask:
		v.errorf(maskKey, "/%d leaves a node too few pod addresses; use at most /%d", mask, maxMask)
	case mask-r.Bits() > 16:
		v.errorf(maskKey, "/%d is more than 16 bits longer than the pod subnet %s; kube-controller-manager refuses that", mask, r)
	default:
		if ranges := 1 << (mask - r.Bits()); len(v.inv.Hosts) > ranges {
			v.errorf("cluster.networking.podSubnet", "%s holds %d node ranges of /%d, fewer than the %d hosts", r, ranges, mask, len(v.inv.Hosts))
		}
	}
}

// hostNetworks checks host i's addresses against the cluster's ranges: none inside them, and a written
// internalAddress with one address of each family the cluster has.
func (v *validator) hostNetworks(i int, pods, svcs []netip.Prefix) {
	h := &v.inv.Hosts[i]
	k := fmt.Sprintf("hosts[%d]", i)
	for _, f := range []struct{ key, addr string }{{"address", h.Address}, {"internalAddress", h.InternalAddress}} {
		for _, s := range splitAddresses(f.addr) {
			ip, err := netip.ParseAddr(s)
			if err != nil || (f.key == "internalAddress" && f.addr == h.Address) {
				continue
			}
			for _, r := range pods {
				if r.Contains(ip) {
					v.errorf(k+"."+f.key, "%s is inside the pod subnet %s", ip, r)
				}
			}
			for _, r := range svcs {
				if r.Contains(ip) {
					v.errorf(k+"."+f.key, "%s is inside the service subnet %s", ip, r)
				}
			}
		}
	}
	if !v.written(k+".internalAddress") || len(pods) == 0 {
		return
	}
	families := familiesOf(pods)
	have := map[Family]bool{}
	for _, s := range splitAddresses(h.InternalAddress) {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return // hostIdentity said why
		}
		f := FamilyOf(ip)
		switch {
		case have[f]:
			v.errorf(k+".internalAddress", "%q has two %s addresses; give one of each family the cluster has", h.InternalAddress, f)
			return
		case !slices.Contains(families, f):
			v.errorf(k+".internalAddress", "%s is an %s address but the cluster is %s only (networking.podSubnet %s)", ip, f, families[0], v.inv.Cluster.Networking.PodSubnet)
			return
		}
		have[f] = true
	}
	for _, f := range families {
		if !have[f] {
			v.errorf(k+".internalAddress", "%q has no %s address, and the cluster is dual-stack (networking.podSubnet %s): give one of each family (%q), or leave internalAddress out to learn both from the host",
				h.InternalAddress, f, v.inv.Cluster.Networking.PodSubnet, exampleAddresses(families))
		}
	}
}

func exampleAddresses(families []Family) string {
	var out []string
	for _, f := range families {
		if f == IPv6 {
			out = append(out, "fd00::5")
		} else {
			out = append(out, "10.0.0.5")
		}
	}
	return strings.Join(out, ",")
}

func familiesOf(ranges []netip.Prefix) []Family {
	var out []Family
	for _, r := range ranges {
		out = append(out, FamilyOf(r.Addr()))
	}
	return out
}

func stackName(families []Family) string {
	if len(families) == 2 {
		return "dual-stack"
	}
	return families[0].String() + " only"
}

// ranges checks a podSubnet or serviceSubnet setting: one CIDR range, or one of each family separated by a
// comma (dual-stack, as kubeadm spells it).
func (v *validator) ranges(key, s string) ([]netip.Prefix, bool) {
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		v.errorf(key, "%q has %d ranges; give one range, or one IPv4 and one IPv6 range for a dual-stack cluster", s, len(parts))
		return nil, false
	}
	var out []netip.Prefix
	for _, part := range parts {
		part = strings.TrimSpace(part)
		p, err := netip.ParsePrefix(part)
		if err != nil {
			v.errorf(key, "%q is not a CIDR range (example: 10.244.0.0/16, or 10.244.0.0/16,fd00:10:244::/56 for dual-stack)", part)
			return nil, false
		}
		if p.Masked() != p {
			v.errorf(key, "%q has bits set past its prefix; did you mean %s?", part, p.Masked())
			return nil, false
		}
		out = append(out, p)
	}
	if len(out) == 2 && FamilyOf(out[0].Addr()) == FamilyOf(out[1].Addr()) {
		v.errorf(key, "%q has two %s ranges; a dual-stack setting is one IPv4 and one IPv6 range", s, FamilyOf(out[0].Addr()))
		return nil, false
	}
	return out, true
}
