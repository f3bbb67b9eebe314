package csr

import (
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/kubelet"
)

// Fleet are the names and addresses each inventory node's kubelet may claim, and those reserved to their
// owner. A node may claim its Node name and host name, the addresses the inventory gives it (internal and
// SSH address), and the addresses learned from it: this run's (learned, by host: comma separated, what
// its facts report beside the inventory's) and earlier runs' (recorded, from the state directory).
//
// What the inventory says comes first: every host's written names and addresses are reserved to it before
// any learned address is looked at, so a host cannot claim, as learned, an address the inventory gives to
// another host, whatever their order. A learned address another host learned too (in this run or
// recorded at an earlier join) is reserved to neither, and refused to both.
func Fleet(inv *inventory.Inventory, learned map[string]inventory.NodeAddrs, recorded Learned) (map[string]Node, Reserved) {
	f := &fleetBuilder{nodes: map[string]Node{}, reserved: Reserved{}}
	f.inventory(inv)
	f.clusterNames(inv.Cluster)
	f.learned(inv, learned, recorded)
	return f.nodes, f.reserved
}

// fleetBuilder is Fleet's result as it is built.
type fleetBuilder struct {
	nodes    map[string]Node
	reserved Reserved
}

// reserve gives key to c unless something has it already.
func (f *fleetBuilder) reserve(key string, c Claim) {
	key = canonical(key)
	if _, taken := f.reserved[key]; key != "" && !taken {
		f.reserved[key] = c
	}
}

// owner is the Node a host's names and addresses belong to: "" for an etcd host, which has no kubelet.
func owner(h *inventory.Host) string {
	if !h.IsNode() {
		return ""
	}
	return h.NodeName
}

// inventory reserves the inventory's names and addresses of each host, first.
func (f *fleetBuilder) inventory(inv *inventory.Inventory) {
	for i := range inv.Hosts {
		h := &inv.Hosts[i]
		n := Node{Name: h.NodeName, DNSNames: []string{h.NodeName}}
		if h.Name != h.NodeName {
			n.DNSNames = append(n.DNSNames, h.Name)
		}
		for _, a := range append(strings.Split(h.InternalAddress, ","), h.Address) {
			if a = strings.TrimSpace(a); a != "" && !slices.Contains(n.Addresses, a) {
				n.Addresses = append(n.Addresses, a)
			}
		}
		if h.IsNode() {
			f.nodes[h.NodeName] = n
		}
		for _, k := range append(slices.Clone(n.DNSNames), n.Addresses...) {
			f.reserve(k, Claim{Owner: owner(h), What: "host " + h.Name + "'s", Inventory: true})
		}
	}
}

// clusterNames reserves the cluster's names, before anything learned: a host's own inventory address stays
// its own when it is also the endpoint (one control-plane node, no load balancer): its serving certificate
// is of the kubelet serving CA, which no client of the API server trusts.
func (f *fleetBuilder) clusterNames(c inventory.Cluster) {
	if c.ControlPlaneEndpoint != "" {
		f.reserve(endpointHost(c.ControlPlaneEndpoint), Claim{What: "the control-plane endpoint"})
	}
	for _, san := range c.APIServer.CertSANs {
		f.reserve(san, Claim{What: "a name of the API server (apiServer.certSANs)"})
	}
	for _, subnet := range strings.Split(c.Networking.ServiceSubnet, ",") {
		if vip, err := kubelet.NthIP(strings.TrimSpace(subnet), 1); err == nil {
			f.reserve(vip, Claim{What: "the kubernetes Service's address"})
		}
	}
	for _, name := range []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + c.Networking.DNSDomain} {
		f.reserve(name, Claim{What: "a name of the kubernetes Service"})
	}
}

// give makes a learned address host h's.
func (f *fleetBuilder) give(h *inventory.Host, a, what string) {
	f.reserved[a] = Claim{Owner: owner(h), What: "host " + h.Name + "'s (" + what + ")"}
	if n, ok := f.nodes[h.NodeName]; ok && h.IsNode() {
		n.Addresses = append(n.Addresses, a)
		f.nodes[h.NodeName] = n
	}
}

// learned gives out what earlier runs learned from each host (the first host an address was learned from
// keeps it), then what this run learned: an address two hosts claim now is neither's.
func (f *fleetBuilder) learned(inv *inventory.Inventory, learned map[string]inventory.NodeAddrs, recorded Learned) {
	for _, name := range slices.Sorted(maps.Keys(recorded)) {
		h := inv.Host(name)
		for _, a := range recorded[name] {
			if _, taken := f.reserved[canonical(a)]; h != nil && !taken {
				f.give(h, canonical(a), "learned from it at an earlier run")
			}
		}
	}
	claimants := map[string][]string{} // address -> the hosts of this run that learned it
	for i := range inv.Hosts {
		h := &inv.Hosts[i]
		for _, ip := range learned[h.Name] {
			if a := canonical(ip.String()); a != "" && !slices.Contains(claimants[a], h.Name) {
				claimants[a] = append(claimants[a], h.Name)
			}
		}
	}
	for _, a := range slices.Sorted(maps.Keys(claimants)) {
		hosts := claimants[a]
		switch _, taken := f.reserved[a]; {
		case taken:
			// The inventory gives it to a host, or an earlier run learned it from one (CheckServing
			// names which), maybe the one that learned it now.
		case len(hosts) > 1:
			f.reserved[a] = Claim{What: "learned from both host " + strings.Join(hosts, " and host ") + " (one of them reports another's address)"}
		default:
			f.give(inv.Host(hosts[0]), a, "learned from it")
		}
	}
}

// canonical is an IP address in its canonical form (IPv4-mapped IPv6 addresses unmapped), other names as
// they are.
func canonical(s string) string {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone("").String()
	}
	return s
}

// endpointHost is the host of HOST[:PORT], or the endpoint when it has no port.
func endpointHost(ep string) string {
	if host, _, err := net.SplitHostPort(ep); err == nil {
		return host
	}
	return ep
}
