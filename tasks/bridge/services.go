package bridge

import (
	"context"

	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/network"
	"github.com/clusterctl/clusterctl/tasks/preflight"
)

// ServicesOnly is what a pod network installed as an add-on (cni.plugin none, an add-on with network:
// true) still needs of clusterctl's: on every node the routes unit with the Service rule and, on a host
// without a default route, the Service route. Without it the host's own processes cannot reach Services:
// the add-on's host-network Pods reaching the API server at its Service address (flanneld, Cilium's and
// Calico's agents do), the API server calling a webhook. The add-on brings its own images and CNI
// plugins, and makes the Nodes Ready: up waits for them.
type ServicesOnly struct{ ipv6 bool }

// NewServicesOnly is ServicesOnly for a cluster with an IPv6 range or not.
func NewServicesOnly(ipv6 bool) ServicesOnly { return ServicesOnly{ipv6: ipv6} }

func (ServicesOnly) Images() []images.Image                   { return nil }
func (ServicesOnly) Binaries() []string                       { return nil }
func (ServicesOnly) Check([]network.Node) []preflight.Finding { return nil }
func (ServicesOnly) Ready() bool                              { return true }
func (s ServicesOnly) NodeFiles() []network.File              { return UnitFiles(s.ipv6) }
func (ServicesOnly) Leftovers() network.Leftovers             { return UnitLeftovers() }

// Apply writes every node's routes file (the Service rule, and the Service route where the host has no
// default route); the network step installs the add-on next.
func (ServicesOnly) Apply(ctx context.Context, env network.Env, c *network.Cluster) (network.Outcome, error) {
	services := ServiceRanges(c.Inv.Cluster.Networking.ServiceSubnet)
	byHost := map[string]network.Node{}
	var hosts []string
	for _, n := range c.Nodes {
		byHost[n.Host] = n
		hosts = append(hosts, n.Host)
	}
	return network.Outcome{}, env.OnHosts(ctx, hosts, func(ctx context.Context, host string, h apply.Host) (apply.Outcome, error) {
		n := byHost[host]
		nr, err := Routes(n.Name, nil, HostServiceRoutes(env, n, services), services)
		if err != nil {
			return apply.Outcome{}, err
		}
		return PutRoutes(ctx, h, nr, n.IP, "", nil)
	})
}
