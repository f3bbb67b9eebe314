package playbooks

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/cni"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/wait"
	"github.com/clusterctl/clusterctl/transport"
)

// earlyNetwork, while the workers wait for the controller-manager's signers, gives the run's nodes that
// have their pod range already (the first control-plane node: the controller-manager allocates it when its
// node-ipam controller starts, about when its signers do) their bridge pod network, so that they turn Ready
// and CoreDNS starts on them while the workers join, not after. done holds the nodes given it; the network
// step then does every node, theirs included (their routes to the workers' ranges).
func (u *upRun) earlyNetwork(ctx context.Context, admin *apiclient.Client, done map[string]bool) error {
	if u.e.Inv.Cluster.CNI.Plugin != inventory.CNIBridge || u.o.DryRun {
		return nil
	}
	list, err := admin.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	cidrs := map[string]string{}
	for i := range list.Items {
		n := &list.Items[i]
		for _, h := range u.nodes() {
			if h.NodeName == n.Name && n.Spec.PodCIDR != "" && !done[h.Name] {
				cidrs[h.Name] = n.Spec.PodCIDR
			}
		}
	}
	if len(cidrs) == 0 {
		return nil
	}
	if err := u.routesOf(ctx, list.Items, cidrs, false); err != nil {
		return err
	}
	for name := range cidrs {
		done[name] = true
	}
	return nil
}

// network sets up the pod network: with the bridge plugin, once every node is registered with its pod range,
// each node's CNI configuration and routes to the others; with manifests, the user's objects.
func (u *upRun) network(ctx context.Context) error {
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return err
	}
	switch u.e.Inv.Cluster.CNI.Plugin {
	case inventory.CNINone:
		u.e.say("network", "", "cni.plugin is none: nodes stay NotReady until a pod network is installed")
		return nil
	case inventory.CNIManifests:
		for _, m := range u.e.Inv.Cluster.CNI.Manifests {
			file := u.e.Inv.Resolve(m)
			data, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			objs, err := apiclient.Decode(data)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			err = wait.Retry(ctx, u.o.NodeTimeout, "the API server to take "+file, func() error {
				_, err := admin.Apply(ctx, objs...)
				return err
			})
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
		}
		return nil
	}
	cidrs := map[string]string{}
	err = u.waitNodes(ctx, "network", func(byName map[string]*corev1.Node) (bool, string) {
		var missing []string
		for _, h := range u.nodes() {
			n := byName[h.NodeName]
			switch {
			case n == nil:
				missing = append(missing, h.NodeName+" (not registered)")
			case n.Spec.PodCIDR == "":
				missing = append(missing, h.NodeName+" (no pod range)")
			default:
				cidrs[h.Name] = n.Spec.PodCIDR
			}
		}
		return len(missing) == 0, "nodes: " + strings.Join(missing, ", ")
	})
	if err != nil {
		return err
	}
	return u.routes(ctx, admin, cidrs)
}

// routes gives every node of the cluster routes to every other's range: the nodes acted on get the whole
// configuration, the cluster's other nodes (add-node, up --limit) only their routes unit, a file of a few
// hundred bytes and a oneshot unit; no Pod or kubelet restarts. Routes go only to nodes that are the
// inventory's hosts at the inventory's addresses (cni.Vet).
func (u *upRun) routes(ctx context.Context, admin *apiclient.Client, cidrs map[string]string) error {
	var list *corev1.NodeList
	err := wait.Retry(ctx, u.o.NodeTimeout, "the list of Nodes", func() (err error) {
		list, err = admin.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		return err
	}
	return u.routesOf(ctx, list.Items, cidrs, true)
}

// routesOf is routes with the cluster's Nodes listed. all: every node of the run and the cluster's other
// nodes get their routes; else (earlyNetwork) only the nodes in cidrs.
func (u *upRun) routesOf(ctx context.Context, list []corev1.Node, cidrs map[string]string, all bool) error {
	var nodeList []cni.Node
	others := []*inventory.Host{}
	for i := range list {
		n := &list[i]
		nodeList = append(nodeList, cni.Node{Name: n.Name, PodCIDR: n.Spec.PodCIDR, IP: nodes.InternalIP(n)})
		for j := range u.e.Inv.Hosts {
			if h := &u.e.Inv.Hosts[j]; all && h.NodeName == n.Name && !slices.Contains(u.hosts, h) {
				others = append(others, h)
			}
		}
	}
	if _, err := Connect(ctx, u.e, others, 0); err != nil {
		return err
	}
	expect := map[string]string{}
	for _, h := range append(u.nodes(), others...) {
		ip, err := u.e.NodeIP(ctx, h)
		if err != nil {
			return err
		}
		expect[h.NodeName] = ip
	}
	vetted, skipped := cni.Vet(nodeList, expect, u.e.Inv.Cluster.Networking.PodSubnet)
	hosts := append(names(u.nodes()), names(others)...)
	if all {
		for _, msg := range skipped {
			u.e.say("network", "", "%s", msg)
		}
		u.res.SkippedRoutes = skipped
	} else {
		hosts = slices.DeleteFunc(hosts, func(name string) bool { _, ok := cidrs[name]; return !ok })
	}
	_, err := u.e.play(ctx, Play{Name: "network", Hosts: hosts, Run: func(ctx context.Context, name string) (bool, error) {
		h := u.e.Inv.Host(name)
		svc, err := u.serviceRoute(ctx, h, expect[h.NodeName])
		if err != nil {
			return false, err
		}
		routes, err := cni.Routes(h.NodeName, vetted, svc, u.serviceRanges())
		if err != nil {
			return false, err
		}
		// The unit came with the node's files (push); a node outside this run may have an older one.
		files := []transport.File{{Path: cni.RoutesUnitPath, Data: cni.RoutesUnit(), Mode: 0o644}, {Path: cni.RoutesPath, Data: routes, Mode: 0o644},
			{Path: cni.NetworkdDropInPath, Data: cni.NetworkdDropIn(), Mode: 0o644}}
		if cidr, ok := cidrs[name]; ok {
			conf, err := cni.Config(cidr)
			if err != nil {
				return false, err
			}
			files = append(files, transport.File{Path: cni.ConfigPath, Data: conf, Mode: 0o644})
		}
		out, err := apply.Routes(ctx, u.e.Conn(name), apply.RoutesUnit{Files: files, Inputs: []string{cni.RoutesUnitPath, cni.RoutesPath},
			Networkd: cni.NetworkdDropInPath, UnitName: cni.RoutesUnitName})
		u.record(name, out)
		return out.Changed(), err
	}})
	return err
}

// serviceRanges are the cluster's Service ranges.
func (u *upRun) serviceRanges() []string {
	var out []string
	for _, cidr := range strings.Split(u.e.Inv.Cluster.Networking.ServiceSubnet, ",") {
		if cidr = strings.TrimSpace(cidr); cidr != "" {
			out = append(out, cidr)
		}
	}
	return out
}

// serviceRoute is the route to the Service range a host needs (cni.ServiceRoute): none when its facts show a
// default route; else out of the interface that holds its node address ip.
func (u *upRun) serviceRoute(ctx context.Context, h *inventory.Host, ip string) (cni.ServiceRoute, error) {
	f, err := u.e.Facts(ctx, h)
	if err != nil || f.DefaultIface != "" {
		return cni.ServiceRoute{}, err
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return cni.ServiceRoute{}, nil
	}
	for _, a := range f.Addresses {
		p, err := netip.ParsePrefix(a.CIDR)
		if err != nil || p.Addr() != addr {
			continue
		}
		for _, cidr := range u.serviceRanges() {
			if r, err := netip.ParsePrefix(cidr); err == nil && r.Addr().Is4() == addr.Is4() {
				return cni.ServiceRoute{CIDR: r.Masked().String(), Dev: a.Iface}, nil
			}
		}
	}
	u.e.say("network", h.Name, "no default route, and no interface holds %s: Services are unreachable from the host's own processes", ip)
	return cni.ServiceRoute{}, nil
}
