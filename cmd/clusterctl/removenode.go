package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/playbooks"
)

type removeNodeOptions struct {
	ssh          sshOptions
	yes          bool
	dryRun       bool
	drainTimeout time.Duration
}

func newRemoveNodeCmd(g *globalOptions) *cobra.Command {
	o := &removeNodeOptions{}
	cmd := &cobra.Command{
		Use:   "remove-node NAME...",
		Short: "Take hosts out of the cluster: cordon, drain, etcd member removed, Node deleted, host reset",
		Long: `Remove the named inventory hosts from the running cluster, one at a time: cordon; drain (evictions,
which respect PodDisruptionBudgets, retried until --drain-timeout; DaemonSet and static Pods stay); for a
control-plane node with stacked etcd, or an etcd host (external etcd), its etcd member removed through
the etcd API (through another member), refused when the remaining members could not keep quorum; the Node deleted; then the host reset as clusterctl reset does. The inventory's
hooks.removeNode.before run first on the host (when it can be reached), hooks.removeNode.after once it is
reset. A host that
cannot be reached is still removed from the cluster and reported. Remove the host from the inventory
afterwards. The first control-plane host of the inventory is how clusterctl reaches the cluster and
cannot be removed: put another control-plane host first. --dry-run reads the cluster, etcd and the host
and prints what the removal would do (the Pods it would evict, the etcd member, what reset would undo,
the hooks); nothing changes.`,
		Example: `  clusterctl remove-node -i hosts.yaml w3 --dry-run
  clusterctl remove-node -i hosts.yaml w3 --yes
  clusterctl remove-node -i hosts.yaml cp3 --drain-timeout 5m`,
		Args: atLeastOne("the names of the hosts to remove", "clusterctl remove-node -i hosts.yaml w3 --dry-run"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRemoveNode(cmd, g, o, args)
		},
	}
	o.ssh.addFlags(cmd)
	cmd.Flags().BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	addLockFlag(cmd, g)
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print, per host, what the removal would do (read from the cluster, etcd and the host); change nothing")
	cmd.Flags().DurationVar(&o.drainTimeout, "drain-timeout", defaultDrainTimeout, drainTimeoutUsage)
	return cmd
}

func runRemoveNode(cmd *cobra.Command, g *globalOptions, o *removeNodeOptions, names []string) error {
	view := g.progressView()
	env, err := openCluster(g, &o.ssh, view)
	if err != nil {
		return err
	}
	defer env.Close()
	if err := hostArgs(g, env.Inv, "remove-node", names); err != nil {
		return err
	}
	if o.dryRun {
		return dryRemove(cmd, g, o, env, view, names)
	}
	return change[removeResult]{g: g, view: view, result: "remove_node_result", lock: mutating(cmd, g, env, false),
		ask: &question{what: "remove-node drains and resets " + strings.Join(names, ", "),
			ask: fmt.Sprintf("remove %s from cluster %q (drain, delete, reset)? [y/N] ", strings.Join(names, ", "), env.Inv.Cluster.Name), skip: o.yes},
		play: func(ctx context.Context) (*removeResult, error) {
			if err := playbooks.RemoveNode(ctx, env, names, playbooks.RemoveOptions{DrainTimeout: o.drainTimeout}); err != nil {
				return nil, err // what was removed before the failure is in the events
			}
			return &removeResult{Removed: names}, nil
		},
		report: func(w io.Writer, res *removeResult, _ time.Duration) {
			fmt.Fprintf(w, "removed %s; remove it from the inventory\n", strings.Join(res.Removed, ", "))
		},
	}.run(cmd.Context())
}

// removeResult is what remove-node removed.
type removeResult struct {
	Removed []string `json:"removed"`
}

// dryRemove prints what remove-node would do on each named host.
func dryRemove(cmd *cobra.Command, g *globalOptions, o *removeNodeOptions, env *playbooks.Env, view *eventView, names []string) error {
	var rec planRecorder
	return change[planResult]{g: g, view: view, result: "remove_node_plan",
		play: func(ctx context.Context) (*planResult, error) {
			err := playbooks.RemoveNode(ctx, env, names, playbooks.RemoveOptions{DrainTimeout: o.drainTimeout, DryRun: true, Record: rec.record})
			return &planResult{Plan: rec.plans(names)}, err
		},
		report: func(w io.Writer, res *planResult, _ time.Duration) { printDryPlans(w, res.Plan) },
	}.run(cmd.Context())
}
