// Package bridge makes the files of clusterctl's bridge pod network: the standard bridge and host-local plugins
// with the node's pod range (allocated by the controller-manager), and a oneshot unit that routes every other
// node's pod range to that node (and, on a host with no default route, the Service range out of its own
// interface). It needs no image and no daemon; nodes must share an L2 network.
package bridge

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/templates"
)

// Paths of the files on each node.
const (
	ConfigPath     = "/etc/cni/net.d/10-clusterctl-bridge.conflist"
	RoutesUnitName = "clusterctl-pod-routes.service"
	RoutesUnitPath = "/etc/systemd/system/" + RoutesUnitName
	// RoutesPath holds the node's routes, ip commands the unit runs with `ip -batch`: the unit itself is the
	// same on every node and never changes with the routes, so that new routes cost a restart of the unit
	// and no reload of systemd (seconds on a busy host, twice per node when the routes were in the unit).
	RoutesPath = kubeadm.StateDir + "/pod-routes"
	// Rules6Path holds the node's IPv6 Service rules, run with `ip -6 -batch` (a policy rule's family is
	// ip's option, not its address's): on clusters with an IPv6 range only.
	Rules6Path = kubeadm.StateDir + "/pod-rules6"
	// NetworkdDropInPath keeps systemd-networkd off the routes and rules it did not make (NetworkdDropIn).
	NetworkdDropInPath = "/etc/systemd/networkd.conf.d/clusterctl.conf"
	// NetworkdRoutesPath is networkd's drop-in of the node's routes (NetworkdRoutes), linked into the
	// drop-in directory of the .network file of the interface that holds the node's address.
	NetworkdRoutesPath = kubeadm.StateDir + "/pod-routes.networkd"
	// HookPath restarts the routes unit when NetworkManager or ifupdown brings an interface up: linked
	// into their hook directories where the host has them.
	HookPath = kubeadm.StateDir + "/pod-routes-hook"
)

// Bridge is the pod network's bridge, named in its CNI configuration and matched by its Service rule.
const Bridge = "cni0"

// ServiceRulePriority is the priority of the policy rule that answers a Pod's packet to a Service address
// that kube-proxy has not translated with "unreachable" (Services): between the local table's (0) and the
// main table's (32766), away from the 32765 and below that `ip rule add` gives rules without one.
const ServiceRulePriority = 32700

// Node is a node's pod range and the address other nodes route it to.
type Node struct {
	Name    string
	PodCIDR string
	IP      string
}

// Route sends a pod range to a node (Via), or a range out of an interface (Dev).
type Route struct{ Dst, Via, Dev string }

// Config is the CNI configuration of a node with pod range podCIDR.
func Config(podCIDR string) ([]byte, error) { return NetworkConfig(Name, podCIDR, 0) }

// NetworkConfig is a CNI configuration of the bridge and host-local plugins for the network name with pod
// range podCIDR (a dual-stack node's two ranges comma separated: each Pod gets an address of each), and
// the Pods' interfaces' MTU (0: the bridge plugin's default, the bridge's).
func NetworkConfig(name, podCIDR string, mtu int) ([]byte, error) {
	type cniRange struct{ Subnet, Default string }
	var ranges []cniRange
	for _, r := range strings.Split(podCIDR, ",") {
		p, err := parseRange(r)
		if err != nil {
			return nil, fmt.Errorf("pod range %q: %w", r, err)
		}
		def := "0.0.0.0/0"
		if p.Addr().Is6() {
			def = "::/0"
		}
		ranges = append(ranges, cniRange{r, def})
	}
	if len(ranges) > 2 {
		return nil, fmt.Errorf("pod ranges %q: at most one of each family", podCIDR)
	}
	if mtu < 0 || mtu > 65535 {
		return nil, fmt.Errorf("MTU %d: out of range", mtu)
	}
	return templates.Render("cni-bridge.conflist", map[string]any{"Name": name, "Ranges": ranges, "Bridge": Bridge, "MTU": mtu})
}

// parseRange accepts a pod range only in its canonical form (a network address, no zone), so that what is
// written is exactly what was checked.
func parseRange(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, err
	}
	if p.Addr().Zone() != "" || p.Masked() != p || p.String() != s {
		return p, fmt.Errorf("not a network address in canonical form (%s)", p.Masked())
	}
	return p, nil
}

// checkAddr accepts a plain IPv4 or IPv6 address in its canonical form: no zone, nothing else.
func checkAddr(s string) error {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return err
	}
	if a.Zone() != "" || a.String() != s || a.Is4In6() || a.IsUnspecified() || a.IsMulticast() {
		return fmt.Errorf("not a plain unicast address in canonical form")
	}
	return nil
}

// Vet keeps the nodes whose routes may be written: those the inventory knows (expect: node name → the
// address the inventory gives it), whose Node reports exactly that address, with a pod range inside the
// cluster's pod subnet that no other node has. What a Node reports is the node's own word (NodeRestriction
// lets a kubelet set its addresses): a node can neither draw another node's traffic nor reach a shell.
// The rest are returned as reasons, one a node.
func Vet(nodes []Node, expect map[string]string, podSubnet string) (ok []Node, skipped []string) {
	subnet, err := netip.ParsePrefix(podSubnet)
	if err != nil {
		return nil, []string{fmt.Sprintf("pod subnet %q: %v", podSubnet, err)}
	}
	owner := map[netip.Prefix]string{}
	for _, n := range nodes {
		want, known := expect[n.Name]
		var reason string
		switch p, perr := parseRange(n.PodCIDR); {
		case n.PodCIDR == "":
			continue // no range yet: nothing to route
		case !known:
			reason = "not a host of the inventory"
		case perr != nil:
			reason = fmt.Sprintf("pod range %q: %v", n.PodCIDR, perr)
		case !subnet.Contains(p.Addr()) || p.Bits() < subnet.Bits():
			reason = fmt.Sprintf("pod range %s is not inside the pod subnet %s", p, subnet)
		case owner[p] != "":
			reason = fmt.Sprintf("pod range %s is also node %s's", p, owner[p])
		case n.IP != want:
			reason = fmt.Sprintf("its InternalIP %q is not the inventory's address %q", n.IP, want)
		default:
			if err := checkAddr(n.IP); err != nil {
				reason = fmt.Sprintf("address %q: %v", n.IP, err)
				break
			}
			owner[p] = n.Name
			ok = append(ok, n)
			continue
		}
		skipped = append(skipped, fmt.Sprintf("node %s: no route written: %s", n.Name, reason))
	}
	return ok, skipped
}

// ServiceRoute is, for a host with no default route, the route that lets its own processes (the API server
// calling a webhook or an aggregated API, host-network Pods) reach Services: the Service range out of the
// interface that holds the node's address. Without a route the kernel refuses the connection ("network is
// unreachable") before kube-proxy's rules can translate the Service address to a Pod's. Empty when none is
// needed.
type ServiceRoute struct{ CIDR, Dev string }

// ifaceName is what Linux accepts as an interface name that ip takes as one argument.
var ifaceName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)

// RoutesUnit is the pod routes unit: a oneshot that runs the node's routes file (RoutesPath), and its IPv6
// rules (Rules6Path) on a cluster with an IPv6 range, at boot and whenever clusterctl changes the files.
func RoutesUnit(ipv6 bool) []byte {
	data := map[string]any{"Routes": RoutesPath, "Rules6": "", "Bridge": Bridge}
	if ipv6 {
		data["Rules6"] = Rules6Path
	}
	out, err := templates.Render("pod-routes.service", data)
	if err != nil {
		panic(err) // an embedded template without data to check
	}
	return out
}

// NetworkdDropIn is systemd-networkd's drop-in that makes it leave foreign routes and policy rules alone:
// by default it deletes the pod routes and the Service rule whenever it configures the interface (after the
// routes unit at boot, on a DHCP renewal, on networkctl reconfigure). Harmless where networkd is not used.
func NetworkdDropIn() []byte {
	data, err := templates.Render("networkd-foreign.conf", nil)
	if err != nil {
		panic(err) // an embedded template without data
	}
	return data
}

// NodeRoutes are a node's routes unit's files: Routes, its routes; Rules6, its IPv6 rules (nil where the
// cluster has no IPv6 Service range); Networkd, the same routes as networkd's drop-in.
type NodeRoutes struct{ Routes, Rules6, Networkd []byte }

// NetworkdRoutes is systemd-networkd's drop-in of routes: a [Route] section each, through a gateway (Via)
// or on the link (Dev: the interface whose .network file it is a drop-in of).
func NetworkdRoutes(routes []Route) ([]byte, error) {
	return templates.Render("networkd-routes.conf", routes)
}

// Hook is the script NetworkManager's dispatcher and ifupdown's if-up.d run (HookPath).
func Hook() []byte {
	data, err := templates.Render("pod-routes-hook", nil)
	if err != nil {
		panic(err) // an embedded template without data
	}
	return data
}

// Routes are node self's routes files: every other node's pod ranges, in a stable order, and the Service
// ranges when svc says so, for the unit and for networkd; and, on a cluster with an IPv6 Service range,
// the IPv6 rules file (else nil). Each line is an ip command (`ip -batch`, no shell) with a range and an address or interface name
// checked to be nothing else.
//
// It also refuses at once what a Pod sends to a range of services (the cluster's Service ranges)
// untranslated: a Pod that starts before its node's kube-proxy has written its rules (CoreDNS on a new
// node) connects to the API server's Service address; untranslated, that first connection waited 3 s for
// an ARP answer out of the Service route's interface (or, on a host with a default route, for its SYNs to
// a gateway that drops them), and its retries belong to the same connection, which kube-proxy's rules
// never translate. Refused, the client connects again, through kube-proxy's rules. Translated packets
// carry a Pod's address by the time they are routed: the rule never sees them. Each file flushes its
// rules before adding them, so that each run of the file leaves one of each.
func Routes(self string, nodes []Node, svc []ServiceRoute, services []string) (NodeRoutes, error) {
	var nr NodeRoutes
	var refuse, refuse6 []string
	for _, cidr := range services {
		p, err := parseRange(cidr)
		if err != nil {
			return nr, fmt.Errorf("service range %q: %w", cidr, err)
		}
		if p.Addr().Is4() {
			refuse = append(refuse, cidr)
		} else {
			refuse6 = append(refuse6, cidr)
		}
	}
	var first []Route
	for _, r := range svc {
		if _, err := parseRange(r.CIDR); err != nil {
			return nr, fmt.Errorf("service range %q: %w", r.CIDR, err)
		}
		if !ifaceName.MatchString(r.Dev) || r.Dev == "." || r.Dev == ".." {
			return nr, fmt.Errorf("interface name %q: not a plain interface name", r.Dev)
		}
		first = append(first, Route{Dst: r.CIDR, Dev: r.Dev})
	}
	var list []Route
	for _, n := range nodes {
		if n.Name == self || n.PodCIDR == "" {
			continue
		}
		if _, err := parseRange(n.PodCIDR); err != nil {
			return nr, fmt.Errorf("node %s: pod range %q: %w", n.Name, n.PodCIDR, err)
		}
		if err := checkAddr(n.IP); err != nil {
			return nr, fmt.Errorf("node %s: address %q: %w", n.Name, n.IP, err)
		}
		list = append(list, Route{Dst: n.PodCIDR, Via: n.IP})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Dst < list[j].Dst })
	all := append(slices.Clip(first), list...) // the Service routes first, then the pod ranges
	var err error
	if nr.Networkd, err = NetworkdRoutes(all); err != nil {
		return nr, err
	}
	nr.Routes, err = templates.Render("pod-routes", map[string]any{"Routes": all, "Refuse": refuse,
		"Bridge": Bridge, "Priority": ServiceRulePriority, "IPv6": false})
	if err != nil || len(refuse6) == 0 {
		return nr, err
	}
	nr.Rules6, err = templates.Render("pod-routes", map[string]any{"Routes": []Route(nil), "Refuse": refuse6, "Bridge": Bridge, "Priority": ServiceRulePriority, "IPv6": true})
	return nr, err
}
