package playbooks

import (
	"slices"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/bridge"
	"github.com/clusterctl/clusterctl/tasks/flannel"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/netpol"
	"github.com/clusterctl/clusterctl/tasks/network"
)

// networks are the pod networks by cni.plugin (inventory.CNIPlugins). A new one is a package under tasks/
// that implements network.Plugin, a line here, and its name in inventory.CNIPlugins.
var networks = map[string]func(c *inventory.Cluster) network.Plugin{
	inventory.CNIBridge:    func(c *inventory.Cluster) network.Plugin { return bridge.New(c.CNI.MTU, hasIPv6(c)) },
	inventory.CNIFlannel:   func(c *inventory.Cluster) network.Plugin { return flannel.New(c.CNI.MTU, hasIPv6(c)) },
	inventory.CNIManifests: func(*inventory.Cluster) network.Plugin { return network.Manifests{} },
	inventory.CNINone:      none,
}

// none is cni.plugin none: nothing, or with a pod network add-on what it needs of clusterctl's (the
// Service route and rule).
func none(c *inventory.Cluster) network.Plugin {
	if len(c.NetworkAddons()) > 0 {
		return bridge.NewServicesOnly(hasIPv6(c))
	}
	return network.None{}
}

// hasIPv6 reports whether the cluster has an IPv6 pod range (dual-stack or IPv6 only).
func hasIPv6(c *inventory.Cluster) bool {
	return slices.Contains(c.Networking.Families(), inventory.IPv6)
}

// networkOf is the inventory's pod network: validation refuses a plugin that is none of networks, and
// defaults set the bridge where the inventory names none.
func networkOf(inv *inventory.Inventory) network.Plugin {
	plugin := inv.Cluster.CNI.Plugin
	if plugin == "" {
		plugin = inventory.CNIBridge
	}
	f, ok := networks[plugin]
	if !ok {
		return network.None{}
	}
	if p := f(&inv.Cluster); inv.Cluster.CNI.NetworkPolicy {
		return netpol.With(p)
	} else {
		return p
	}
}

// NetworkImages are the images (artifacts manifest names) the inventory's pod network runs.
func NetworkImages(inv *inventory.Inventory) []images.Image { return networkOf(inv).Images() }

// networkLeftovers are what every pod network and the policy controller leave on a host: reset removes
// them all, whatever the inventory says now.
func networkLeftovers() network.Leftovers {
	names := make([]string, 0, len(networks))
	for name := range networks {
		names = append(names, name)
	}
	slices.Sort(names)
	out := netpol.Leftovers()
	for _, name := range names {
		out = out.Add(networks[name](&inventory.Cluster{}).Leftovers())
	}
	out.Files = compactSorted(out.Files)
	out.Dirs = compactSorted(out.Dirs)
	out.Links = compactSorted(out.Links)
	out.Networks = compactSorted(out.Networks)
	out.Chains = compactSorted(out.Chains)
	out.Graceful = compactSorted(out.Graceful)
	return out
}

func compactSorted(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}
