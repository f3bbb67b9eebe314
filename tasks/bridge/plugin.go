package bridge

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/network"
	"github.com/clusterctl/clusterctl/tasks/preflight"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/transport"
)

// Name is the network's cni.plugin and CNI network name.
const Name = "clusterctl-bridge"

// Binaries are the CNI plugins the bridge network's configuration names (and containerd's loopback).
var Binaries = []string{"bridge", "host-local", "loopback", "portmap"}

// Plugin is cni.plugin bridge: a bridge on each node with its pod range, and routes between the nodes;
// mtu is the Pods' MTU (0: the bridge's); ipv6: the cluster has an IPv6 range (its Service rules need a
// batch of their own).
type Plugin struct {
	mtu  int
	ipv6 bool
}

// New is the plugin with the inventory's cni.mtu, for a cluster with an IPv6 range or not.
func New(mtu int, ipv6 bool) Plugin { return Plugin{mtu: mtu, ipv6: ipv6} }

var _ network.Early = Plugin{}

func (Plugin) Images() []images.Image { return nil }
func (Plugin) Binaries() []string     { return Binaries }
func (Plugin) Ready() bool            { return true }

// NodeFiles are the routes unit and networkd's drop-in: the routes come once the node has its range.
func (p Plugin) NodeFiles() []network.File { return UnitFiles(p.ipv6) }

// UnitFiles are the pod routes unit and networkd's drop-in (the routes unit also holds the Service rule of
// the networks that use it without routes).
func UnitFiles(ipv6 bool) []network.File {
	return []network.File{{Path: RoutesUnitPath, Data: RoutesUnit(ipv6), Mode: 0o644, Unit: true, Routes: RoutesPath},
		{Path: NetworkdDropInPath, Data: NetworkdDropIn(), Mode: 0o644, Networkd: true}}
}

// Leftovers are the configuration, the routes unit and its files, the bridge and the plugin's IP store.
func (Plugin) Leftovers() network.Leftovers {
	return network.Leftovers{Files: []string{ConfigPath}, Links: []string{Bridge}, Networks: []string{Name}}.Add(UnitLeftovers())
}

// UnitLeftovers are the routes unit's files (reset removes its routes and rule first, by the routes file,
// the links to networkd's drop-in of the routes and to the hook, and stops the unit) and networkd's
// drop-in.
func UnitLeftovers() network.Leftovers {
	return network.Leftovers{Files: []string{RoutesUnitPath, RoutesPath, Rules6Path, NetworkdRoutesPath, HookPath}, Networkd: NetworkdDropInPath}
}

// Check refuses nodes that do not share an L2 segment: a route between two nodes that goes through a
// gateway (the other node's address is inside none of the node's own networks) takes the pod routes to a
// router that knows nothing of the pod ranges.
func (Plugin) Check(nodes []network.Node) []preflight.Finding {
	var errs []preflight.Finding
	for _, a := range nodes {
		if a.Facts == nil {
			continue
		}
		for _, b := range nodes {
			if b.Host == a.Host || b.Host < a.Host && b.Facts != nil {
				continue // each pair once, from the first of the two that has facts
			}
			if !OnLink(a.Facts, b.IP) {
				errs = append(errs, network.Finding(a.Host, "%s and %s are not on one L2 segment: %s (%s) is on none of %s's networks (%s), so pod traffic between them would go through a gateway that does not route pod ranges; use cni.plugin: flannel (VXLAN) for nodes on routed networks",
					a.Host, b.Host, b.Host, b.IP, a.Host, strings.Join(networks(a.Facts), ", ")))
			}
		}
	}
	return errs
}

// OnLink reports whether ip is inside one of the networks of the host's addresses.
func OnLink(f *facts.Facts, ip string) bool {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	for _, a := range f.Addresses {
		if p, err := netip.ParsePrefix(a.CIDR); err == nil && p.Bits() < p.Addr().BitLen() && p.Masked().Contains(addr) {
			return true
		}
	}
	return false
}

// networks are the networks of a host's global addresses.
func networks(f *facts.Facts) []string {
	var out []string
	for _, a := range f.Addresses {
		p, err := netip.ParsePrefix(a.CIDR)
		if err != nil || p.Addr().IsLoopback() || p.Addr().IsLinkLocalUnicast() {
			continue
		}
		if s := p.Masked().String(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// ApplyEarly gives the run's nodes that have their range their configuration and routes.
func (p Plugin) ApplyEarly(ctx context.Context, env network.Env, c *network.Cluster) error {
	_, err := p.apply(ctx, env, c, false)
	return err
}

// Apply gives every node of the cluster routes to every other's range: the nodes acted on get the whole
// configuration, the cluster's other nodes (add-node, up --limit) only their routes unit, a file of a few
// hundred bytes and a oneshot unit; no Pod or kubelet restarts. Routes go only to nodes that are the
// inventory's hosts at the inventory's addresses (Vet).
func (p Plugin) Apply(ctx context.Context, env network.Env, c *network.Cluster) (network.Outcome, error) {
	return p.apply(ctx, env, c, true)
}

// apply: all, every node of the cluster gets its routes; else only the run's nodes that have a range.
func (p Plugin) apply(ctx context.Context, env network.Env, c *network.Cluster, all bool) (network.Outcome, error) {
	byHost := map[string]network.Node{}
	for _, n := range c.Nodes {
		byHost[n.Host] = n
	}
	vetted, skipped := VetCluster(c, c.Inv.Cluster.Networking.PodSubnet)
	var out network.Outcome
	var hosts []string
	for _, n := range c.Nodes {
		if all || n.InRun && n.PodCIDR != "" {
			hosts = append(hosts, n.Host)
		}
	}
	if all {
		for _, msg := range skipped {
			env.Say("", "%s", msg)
		}
		out.Skipped = skipped
	}
	services := ServiceRanges(c.Inv.Cluster.Networking.ServiceSubnet)
	err := env.OnHosts(ctx, hosts, func(ctx context.Context, host string, h apply.Host) (apply.Outcome, error) {
		n := byHost[host]
		nr, err := Routes(n.Name, vetted, HostServiceRoutes(env, n, services), services)
		if err != nil {
			return apply.Outcome{}, err
		}
		var conf []byte
		if n.InRun && n.PodCIDR != "" {
			if conf, err = NetworkConfig(Name, strings.Join(n.PodCIDRs, ","), p.mtu); err != nil {
				return apply.Outcome{}, err
			}
		}
		return PutRoutes(ctx, h, nr, n.IP, ConfigPath, conf)
	})
	return out, err
}

// PutRoutes writes the routes unit's files with the node's routes (nr; the node's address addr finds the
// interface whose networkd configuration gets them too), and its CNI configuration at confPath when conf is
// set, and restarts the unit when they changed or the kernel lacks one of its routes.
func PutRoutes(ctx context.Context, h apply.Host, nr NodeRoutes, addr, confPath string, conf []byte) (apply.Outcome, error) {
	if err := checkAddr(addr); err != nil {
		return apply.Outcome{}, fmt.Errorf("node address %q: %w", addr, err)
	}
	// The unit came with the node's files (push); a node outside this run may have an older one.
	ipv6 := nr.Rules6 != nil
	files := []transport.File{{Path: RoutesUnitPath, Data: RoutesUnit(ipv6), Mode: 0o644}, {Path: RoutesPath, Data: nr.Routes, Mode: 0o644},
		{Path: NetworkdDropInPath, Data: NetworkdDropIn(), Mode: 0o644}, {Path: NetworkdRoutesPath, Data: nr.Networkd, Mode: 0o644},
		{Path: HookPath, Data: Hook(), Mode: 0o755}}
	inputs := []string{RoutesUnitPath, RoutesPath}
	if ipv6 {
		files = append(files, transport.File{Path: Rules6Path, Data: nr.Rules6, Mode: 0o644})
		inputs = append(inputs, Rules6Path)
	}
	if conf != nil {
		files = append(files, transport.File{Path: confPath, Data: conf, Mode: 0o644})
	}
	return apply.Routes(ctx, h, apply.RoutesUnit{Files: files, Routes: scripts.RoutesParams{Inputs: inputs, RoutesFile: RoutesPath,
		Networkd: NetworkdDropInPath, Owned: NetworkdRoutesPath, Hook: HookPath, Addr: addr, Name: RoutesUnitName}})
}

// VetCluster is Vet of every family of the cluster (podSubnet: one range or a dual-stack pair): each node
// once per family, with its pod range and reported address of that family against the inventory's
// address of that family.
func VetCluster(c *network.Cluster, podSubnet string) (ok []Node, skipped []string) {
	for _, subnet := range ServiceRanges(podSubnet) {
		v6 := strings.Contains(subnet, ":")
		var list []Node
		expect := map[string]string{}
		for _, n := range c.Nodes {
			list = append(list, Node{Name: n.Name, PodCIDR: ofFamily(n.PodCIDRs, v6), IP: ofFamily(n.ReportedIPs, v6)})
			expect[n.Name] = ofFamily(n.IPs, v6)
		}
		for name, cidrs := range c.Unknown {
			list = append(list, Node{Name: name, PodCIDR: ofFamily(cidrs, v6)})
		}
		good, bad := Vet(list, expect, subnet)
		ok, skipped = append(ok, good...), append(skipped, bad...)
	}
	return ok, skipped
}

// ofFamily is the first of the addresses or ranges that is IPv6 (v6) or IPv4.
func ofFamily(list []string, v6 bool) string {
	for _, s := range list {
		if strings.Contains(s, ":") == v6 {
			return s
		}
	}
	return ""
}

// ServiceRanges are the Service ranges of a serviceSubnet setting ("10.96.0.0/12" or a dual-stack pair).
func ServiceRanges(serviceSubnet string) []string {
	var out []string
	for _, cidr := range strings.Split(serviceSubnet, ",") {
		if cidr = strings.TrimSpace(cidr); cidr != "" {
			out = append(out, cidr)
		}
	}
	return out
}

// HostServiceRoutes are the routes to the Service ranges a node needs (ServiceRoute): none when its facts
// show a default route; else each range out of the interface that holds the node's address of its family.
func HostServiceRoutes(env network.Env, n network.Node, services []string) []ServiceRoute {
	f := n.Facts
	if f == nil || f.DefaultIface != "" {
		return nil
	}
	var out []ServiceRoute
	for _, cidr := range services {
		r, err := netip.ParsePrefix(cidr)
		if err != nil {
			continue
		}
		ip := ofFamily(n.IPs, r.Addr().Is6())
		addr, err := netip.ParseAddr(ip)
		if err != nil {
			continue
		}
		dev := ""
		for _, a := range f.Addresses {
			if p, err := netip.ParsePrefix(a.CIDR); err == nil && p.Addr() == addr {
				dev = a.Iface
				break
			}
		}
		if dev == "" {
			env.Say(n.Host, "no default route, and no interface holds %s: Services of %s are unreachable from the host's own processes", ip, r.Masked())
			continue
		}
		out = append(out, ServiceRoute{CIDR: r.Masked().String(), Dev: dev})
	}
	return out
}
