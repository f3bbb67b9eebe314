// Package cni makes the files of clusterctl's bridge pod network: the standard bridge and host-local plugins
// with the node's pod range (allocated by the controller-manager), and a oneshot unit that routes every other
// node's pod range to that node. It needs no image and no daemon; nodes must share an L2 network.
package cni

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/clusterctl/clusterctl/templates"
)

// Paths of the files on each node.
const (
	ConfigPath     = "/etc/cni/net.d/10-clusterctl-bridge.conflist"
	RoutesUnitName = "clusterctl-pod-routes.service"
	RoutesUnitPath = "/etc/systemd/system/" + RoutesUnitName
)

// Node is a node's pod range and the address other nodes route it to.
type Node struct {
	Name    string
	PodCIDR string
	IP      string
}

// Route sends a pod range to a node.
type Route struct{ Dst, Via string }

// Config is the CNI configuration of a node with pod range podCIDR.
func Config(podCIDR string) ([]byte, error) {
	if _, err := netip.ParsePrefix(podCIDR); err != nil {
		return nil, fmt.Errorf("pod range %q: %w", podCIDR, err)
	}
	return templates.Render("cni-bridge.conflist", map[string]string{"PodCIDR": podCIDR})
}

// RoutesUnit is node self's unit routing every other node's pod range, in a stable order.
func RoutesUnit(self string, nodes []Node) ([]byte, error) {
	var routes []Route
	for _, n := range nodes {
		if n.Name == self || n.PodCIDR == "" {
			continue
		}
		if _, err := netip.ParsePrefix(n.PodCIDR); err != nil {
			return nil, fmt.Errorf("node %s: pod range %q: %w", n.Name, n.PodCIDR, err)
		}
		if _, err := netip.ParseAddr(n.IP); err != nil {
			return nil, fmt.Errorf("node %s: address %q: %w", n.Name, n.IP, err)
		}
		routes = append(routes, Route{Dst: n.PodCIDR, Via: n.IP})
	}
	sort.Slice(routes, func(i, j int) bool { return routes[i].Dst < routes[j].Dst })
	return templates.Render("pod-routes.service", map[string]any{"Routes": routes})
}
