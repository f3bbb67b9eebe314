package main

import (
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/render"
)

func newAddNodeCmd(g *globalOptions) *cobra.Command {
	o := &upOptions{need: stateCluster}
	cmd := &cobra.Command{
		Use:   "add-node NAME...",
		Short: "Join hosts of the inventory to the running cluster: workers, control-plane nodes, etcd hosts",
		Long: `Add the named inventory hosts to the running cluster, leaving the nodes already in it alone: facts and
preflight (the join sets, and reachability of the API server and of etcd) on the new hosts only, their
files pushed, a fresh bootstrap token made through the API for the workers and deleted once they have
joined, serving certificates approved after the same checks as up.

Control-plane hosts join one at a time, in inventory order (with several control-plane hosts and no
cluster.controlPlaneEndpoint, every node reaches the API servers through a node-local haproxy on
127.0.0.1:7443 whose backends clusterctl keeps to the control-plane hosts: adding one then updates every
node's proxy configuration, nothing else): certificates for the node are made here,
its etcd member is added through the etcd API as a learner before it starts, promoted once it has caught
up, and the node's API server must be ready before the next one.

With etcd on hosts of its own (the etcd role), an etcd host joins the same way: its member is added as a
learner through another member, its unit started with the cluster's members
(ETCD_INITIAL_CLUSTER_STATE=existing), and promoted once it has caught up; then every control-plane
node's API server is pointed at the new member too (--etcd-servers), one node at a time, each API server
Ready before the next restarts.

The first control-plane host is always contacted (the API and etcd are reached through it). With the
bridge pod network, every other node gets one small change: the route to the new node's pod range.
up with a grown inventory does the same for every host not yet in the cluster; add-node is the explicit
form that touches nothing else.`,
		Example: `  clusterctl add-node -i hosts.yaml w4
  clusterctl add-node -i hosts.yaml w4 --dry-run     # what w4 (and any other host) would receive
  clusterctl add-node -i hosts.yaml cp2 cp3          # grow the control plane to three (stacked etcd)
  clusterctl add-node -i hosts.yaml etcd3            # an etcd host back after remove-node (external etcd)`,
		Args: atLeastOne("the names of the inventory hosts to add", "clusterctl add-node -i hosts.yaml w4"),
		RunE: func(cmd *cobra.Command, args []string) error {
			inv, _, err := g.loadInventory()
			if err != nil {
				return err
			}
			if err := hostArgs(g, inv, "add-node", args); err != nil {
				return err
			}
			if g.Limit != nil {
				return usageError("add-node takes the hosts to add as arguments, not --limit")
			}
			g.Limit = args
			o.hooks, o.hookHosts = inventory.HookAddNode, args
			for _, name := range args {
				// A new control-plane node is a new backend of every node's API proxy (and may be what
				// turns the proxy on): every host's files are checked, unchanged ones left alone.
				if h := inv.Host(name); h != nil && h.Has(inventory.RoleControlPlane) && render.LocalProxy(inv) {
					g.Limit = nil
				}
			}
			// A new external etcd member is one more of every API server's --etcd-servers: every
			// control-plane host is in the run, and their API servers restart one at a time.
			if g.Limit != nil && inv.ExternalEtcd() && slices.ContainsFunc(args, func(n string) bool { h := inv.Host(n); return h != nil && h.Has(inventory.RoleEtcd) }) {
				for _, cp := range inv.ControlPlanes() {
					if !slices.Contains(g.Limit, cp.Name) {
						g.Limit = append(g.Limit, cp.Name)
					}
				}
			}
			return runUp(cmd, g, o)
		},
	}
	o.ssh.addFlags(cmd)
	o.preflight.addFlags(cmd)
	cmd.Flags().DurationVar(&o.apiTimeout, "api-timeout", 5*time.Minute, "how long to wait for each joining control plane's etcd and API server")
	cmd.Flags().DurationVar(&o.nodeTimeout, "node-timeout", 5*time.Minute, "how long to wait for the new nodes to register and be Ready")
	addLockFlag(cmd, g)
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "check the new hosts and print what each host would receive and which services would (re)start; change nothing")
	return cmd
}
