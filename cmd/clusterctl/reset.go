package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/transport"
)

type resetOptions struct {
	ssh         sshOptions
	yes         bool
	removeState bool
	force       bool
	dryRun      bool
	snapshots   bool
}

func newResetCmd(g *globalOptions) *cobra.Command {
	o := &resetOptions{}
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Tear down on every host what up made, so that the hosts can be reused",
		Long: `Undo, on every host of the inventory (or --limit), what clusterctl up made: the kubelet stopped and
disabled, every container of containerd's Kubernetes namespace removed, the Pods' mounts and network
namespaces, the cni0 bridge and the routes to other nodes' pod ranges, the KUBE- iptables chains,
kube-proxy's nftables tables (ip and ip6 kube-proxy, in nftables mode), clusterctl's files and units (/etc/kubernetes's manifests, PKI and kubeconfigs, the kubelet's unit,
drop-in and configuration, containerd's configuration if clusterctl wrote it, kernel settings), the
kubelet's and etcd's state (/var/lib/kubelet, /var/lib/etcd), and the binaries pushed from an
artifacts directory. Files of the host's own that up replaced (containerd's configuration, kernel
settings, a kubelet unit, binaries) were kept aside at the first replacement and are put back. iptables
chains are removed by name (KUBE-*, and the rules of other chains that jump to them), in one atomic
delta per table: other rules stay as they are. The etcd members' scheduled snapshots (cluster.etcd.snapshots)
stop: their timer, service and script are removed; the snapshots themselves are kept unless
--remove-snapshots. Other files are left alone; images imported into containerd are kept.

Only hosts that carry this cluster's mark (/etc/kubernetes/clusterctl-cluster, written by up with the
cluster's name and CA hash from the state directory) are reset. A host without a mark has nothing of
clusterctl's and is left alone; a host marked by another cluster is refused. --force resets them all
the same: everything listed above is removed from them, whoever made it (/etc/kubernetes/pki,
/var/lib/kubelet, /var/lib/etcd, every container of containerd's k8s.io namespace, the KUBE- chains).

The cluster's data (etcd) is destroyed. Without --yes, reset asks for the cluster's name on a terminal
and refuses to run otherwise. The local state directory (PKI, admin.conf) is kept unless --remove-state:
a later up then makes a cluster with the same CA. The inventory's hooks.reset.before run on the hosts
reached before anything is undone, hooks.reset.after on those reset. --dry-run connects, checks each host's mark, and
prints per host the hooks reset would run and what of the above is there to undo; nothing changes.`,
		Example: `  clusterctl reset -i hosts.yaml
  clusterctl reset -i hosts.yaml --dry-run
  clusterctl reset -i hosts.yaml --yes --remove-state    # CI: throwaway clusters
  clusterctl reset -i hosts.yaml --limit w3 --yes`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReset(cmd, g, o)
		},
	}
	o.ssh.addFlags(cmd)
	cmd.Flags().BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	addLockFlag(cmd, g)
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print, per host, the hooks reset would run and what of clusterctl's it would undo there; change nothing")
	cmd.Flags().BoolVar(&o.removeState, "remove-state", false, "also remove the local state directory (the cluster's PKI and kubeconfigs)")
	cmd.Flags().BoolVar(&o.snapshots, "remove-snapshots", false, "also remove the etcd members' scheduled snapshots (etcd-snapshot-*.db in cluster.etcd.snapshots.dir, default /var/lib/etcd-snapshots); kept otherwise")
	cmd.Flags().BoolVar(&o.force, "force", false, "also reset hosts without this cluster's mark: removes /etc/kubernetes/pki, /var/lib/kubelet, /var/lib/etcd, every k8s.io container and the KUBE- iptables chains there, whoever made them")
	return cmd
}

func runReset(cmd *cobra.Command, g *globalOptions, o *resetOptions) error {
	view := g.progressView()
	env, created, err := openEnvNeeding(g, &o.ssh, view, stateCreate)
	if err != nil {
		return err
	}
	defer env.Close()
	if created {
		// reset writes nothing there: a state directory it had to make is not left behind.
		defer dropNewState(env.StateDir)
	}
	if o.dryRun {
		return dryReset(cmd, g, o, env, view)
	}
	name := env.Inv.Cluster.Name
	return change[resetResult]{g: g, view: view, result: "reset_result", lock: mutating(cmd, g, env, false),
		ask: &question{what: fmt.Sprintf("reset destroys the cluster on %d host(s)", len(env.Hosts)),
			ask:    fmt.Sprintf("reset destroys cluster %q on %d host(s) (its etcd data included). Type the cluster's name to go on: ", name, len(env.Hosts)),
			accept: func(a string) bool { return a == name }, skip: o.yes},
		play: func(ctx context.Context) (*resetResult, error) {
			results, err := playbooks.Reset(ctx, env, playbooks.ResetOptions{Force: o.force, Hooks: true, RemoveSnapshots: o.snapshots})
			res := &resetResult{}
			failed := 0
			for _, r := range results {
				switch r.Status {
				case transport.StatusFailed, transport.StatusUnreachable:
					failed++
				case transport.StatusSkipped:
					res.LeftAlone = append(res.LeftAlone, r.Host)
				default:
					res.Reset = append(res.Reset, r.Host)
				}
			}
			if err == nil && failed > 0 {
				err = fmt.Errorf("reset failed on %d host(s); the local state directory is kept", failed)
			}
			if err == nil && o.removeState {
				if err = os.RemoveAll(env.StateDir); err == nil {
					res.RemovedState = env.StateDir
				}
			}
			return res, err
		},
		report: func(w io.Writer, res *resetResult, _ time.Duration) {
			if res.RemovedState != "" {
				fmt.Fprintf(w, "reset %d host(s)%s; removed %s\n", len(res.Reset), leftAlone(len(res.LeftAlone)), res.RemovedState)
				return
			}
			fmt.Fprintf(w, "reset %d host(s)%s; the state directory %s is kept (the next up reuses its CA)\n", len(res.Reset), leftAlone(len(res.LeftAlone)), env.StateDir)
		},
	}.run(cmd.Context())
}

// resetResult is what reset did: the hosts reset, those left alone (no mark of this cluster), and the state
// directory it removed (--remove-state).
type resetResult struct {
	Reset        []string `json:"reset"`
	LeftAlone    []string `json:"leftAlone,omitempty"`
	RemovedState string   `json:"removedState,omitempty"`
}

// dryReset prints what reset would do on each host: its hooks, and what of clusterctl's is there to undo.
func dryReset(cmd *cobra.Command, g *globalOptions, o *resetOptions, env *playbooks.Env, view *eventView) error {
	var rec planRecorder
	var results []transport.HostResult
	return change[planResult]{g: g, view: view, result: "reset_plan",
		play: func(ctx context.Context) (*planResult, error) {
			var err error
			results, err = playbooks.Reset(ctx, env, playbooks.ResetOptions{Force: o.force, Hooks: true, DryRun: true, Record: rec.record, RemoveSnapshots: o.snapshots})
			var unknown []string
			for _, r := range results {
				if r.Status == transport.StatusFailed || r.Status == transport.StatusUnreachable {
					unknown = append(unknown, r.Host)
				}
			}
			if err == nil && len(unknown) > 0 {
				// a host not read is not a host with nothing to change
				err = fmt.Errorf("what reset would change on %s is unknown: the dry run could not read %s", strings.Join(unknown, ", "), them(unknown))
			}
			return &planResult{Plan: rec.plans(hostNamesOf(env.Hosts))}, err
		},
		// each host's mark, and the plan, also when some host failed
		notes: func(res *planResult, _ error) {
			if g.Output == "json" {
				return
			}
			for _, r := range results {
				switch {
				case r.Status == transport.StatusSkipped:
					fmt.Fprintf(g.stdout, "%s: left alone: no mark of this cluster (--force would reset it)\n", r.Host)
				case r.Err != nil:
					fmt.Fprintf(g.stdout, "%s: %v\n", r.Host, r.Err)
				}
			}
			printDryPlans(g.stdout, res.Plan)
		},
	}.run(cmd.Context())
}

func leftAlone(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d without this cluster's mark left alone)", n)
}

// them is "it" for one host, "them" for several.
func them(hosts []string) string {
	if len(hosts) == 1 {
		return "it"
	}
	return "them"
}
