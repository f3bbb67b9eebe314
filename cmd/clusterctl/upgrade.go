package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/artifacts"
)

type upgradeOptions struct {
	ssh                sshOptions
	preflight          preflightFlags
	to                 string
	artifacts          []string
	via                []string
	maxUnavailable     int
	drainTimeout       time.Duration
	certificateRenewal bool
	timeout            time.Duration
	dryRun             bool
	force              bool
	noBackup           bool
	rollback           bool
	yes                bool
}

func newUpgradeCmd(g *globalOptions) *cobra.Command {
	o := &upgradeOptions{}
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Move a running cluster to the inventory's Kubernetes version (or --to), node by node",
		Long: `Upgrade the cluster to cluster.kubernetesVersion (raise it in the inventory first, with its artifacts),
or to --to without editing the file, in the order upstream documents. A cluster several minor releases
behind is walked one minor at a time (v1.35 → v1.36 → v1.37), each hop all of these steps, every Node at
its version and the readiness report clean before the next; --artifacts once per version (or each pulled
into the cache), --via to pass a minor at another patch release than the one clusterctl is tested with:

  preflight      facts and kubeadm's checks for the target version on every host
  render         the target's static Pods, kubelet configuration and add-ons, made here; the control-plane
                 certificates and kubeconfigs renewed as kubeadm upgrade does (--certificate-renewal); the
                 target's artifacts verified (pulled into the cache when cluster.artifacts is not set)
  check          refuses, before anything changes, when: the hop is a downgrade, etcd lacks quorum, a kubelet would end newer than an API
                 server (--limit before the control plane), the artifacts lack anything the hosts need;
                 then the readiness report, each finding naming the object and what to do. Blockers
                 refuse the run (--force goes on, naming what it overrides): PodDisruptionBudgets that
                 allow no eviction of a Pod on a node the run drains, APIs in use (the API servers'
                 apiserver_requested_deprecated_apis) that the target removes, Nodes not Ready, etcd
                 members unhealthy or in alarm, certificates that expire before the run could end plus
                 a day (those it renews aside), kubelets more than three minor versions behind.
                 Warnings: Nodes cordoned by someone else (left cordoned), pending CSRs
  backup         an etcd snapshot streamed from a healthy member into the state directory (runs/, 0600,
                 its integrity checked; kept after the upgrade), as kubeadm takes one before it upgrades
                 a control-plane node (--no-backup skips it; a resumed run keeps its first run's)
  images         the target's images imported on every host (air-gapped), so no Pod waits for one
  etcd           with etcd on hosts of its own: the target's etcd binaries and unit on every etcd host, then
                 the members restarted one at a time, each ready before the next
  control-plane  one node at a time: (stacked) etcd first when its paired version changes (restarted alone, with
                 that node's API server stopped so the others serve), then API server, controller-manager,
                 scheduler; each node's static Pods Ready at the target and its API server answering
                 before the next
  addons         kube-proxy and CoreDNS at the target (the cluster's Corefile migrated, not replaced, as
                 kubeadm does), kubeadm-config and kubelet-config; both rollouts waited for
  kubelets       control-plane nodes one at a time, then workers --max-unavailable at a time: cordon,
                 drain (PodDisruptionBudgets respected, up to --drain-timeout), the inventory's
                 hooks.upgrade.before, kubelet binary and configuration, restart, Ready at the
                 target, hooks.upgrade.after, uncordon

Each step is recorded in the state directory (runs/upgrade.json): killed anywhere, the same command finishes
the upgrade, starting with the control-plane node it left half-way. What a node's files were before the
upgrade is kept on the node for the run (/var/lib/clusterctl/rollback): a control-plane node whose new
static Pods are not healthy within --node-timeout is put back, then the control-plane nodes rolled before it,
and the run exits 1 with the cluster serving at the old version on every node; a node whose new kubelet
does not come back Ready is put back, Ready at the old version and left cordoned, and the run exits 1
saying so. upgrade --rollback finishes a rollback a killed run left (or puts back the control-plane
nodes of an upgrade killed before its add-ons). --limit upgrades only the named
workers (once the control plane is at the target). --dry-run prints the readiness report and the plan,
per host the files and restarts, and changes nothing. Exit codes: 0 done, 1 refused (a dry run too, when
something blocks) or failed (every reason is named), 2 bad usage or inventory, 130 interrupted.`,
		Example: `  clusterctl upgrade -i hosts.yaml --dry-run          # the plan, per host; nothing is touched
  clusterctl upgrade -i hosts.yaml --yes               # to cluster.kubernetesVersion
  clusterctl upgrade -i hosts.yaml --to v1.37.2 --yes  # without editing the inventory
  clusterctl upgrade -i hosts.yaml --limit w1,w2 --yes --max-unavailable 2
  clusterctl upgrade -i hosts.yaml --to v1.37.2 --artifacts art-1.36 --artifacts art-1.37 --yes  # two minors
  clusterctl upgrade -i hosts.yaml --rollback --yes    # finish the rollback a killed run left`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUpgrade(cmd, g, o)
		},
	}
	o.ssh.addFlags(cmd)
	o.preflight.addFlags(cmd)
	f := addLockFlag(cmd, g)
	f.StringVar(&o.to, "to", "", "the target Kubernetes version (default: the inventory's cluster.kubernetesVersion)")
	f.StringSliceVar(&o.artifacts, "artifacts", nil, "an artifacts directory of a version on the way (repeatable, one per version; the target's in place of cluster.artifacts); a version without one: the inventory's for the target, else the per-version cache, pulled into")
	f.StringSliceVar(&o.via, "via", nil, "the version of a minor release the upgrade passes through (repeatable; default: its artifacts', else the patch release clusterctl is tested with)")
	f.IntVar(&o.maxUnavailable, "max-unavailable", 1, "how many workers are drained and upgraded at once")
	f.DurationVar(&o.drainTimeout, "drain-timeout", defaultDrainTimeout, drainTimeoutUsage)
	f.BoolVar(&o.certificateRenewal, "certificate-renewal", true, "renew the control-plane certificates and kubeconfigs on the way, as kubeadm upgrade does")
	f.DurationVar(&o.timeout, "node-timeout", 5*time.Minute, "how long each wait may take (a node's static Pods, its API server, a node Ready, a rollout)")
	f.BoolVar(&o.dryRun, "dry-run", false, "check and print the plan: the order, and per host the files it would receive and what would restart; change nothing")
	f.BoolVar(&o.force, "force", false, "go on despite the readiness report's blockers (each is said as overridden); never past the version policy or an etcd without quorum")
	f.BoolVar(&o.noBackup, "no-backup", false, "take no etcd snapshot before the first change")
	f.BoolVar(&o.rollback, "rollback", false, "put back the control-plane nodes of the upgrade under way (the journal's), instead of going on")
	f.BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	return cmd
}

func runUpgrade(cmd *cobra.Command, g *globalOptions, o *upgradeOptions) error {
	if o.maxUnavailable < 1 {
		return usageError("--max-unavailable must be at least 1")
	}
	if o.to != "" {
		to := o.to
		if !strings.HasPrefix(to, "v") {
			to = "v" + to
		}
		if inventory.CheckKubernetesVersion(to) != nil {
			return usageError("--to %q is not a Kubernetes version: give one such as %s", o.to, inventory.DefaultKubernetesVersion)
		}
		o.to = to
	}
	view := g.progressView()
	env, err := openCluster(g, &o.ssh, view)
	if err != nil {
		return err
	}
	defer env.Close()
	if o.to != "" {
		env.Inv.Cluster.KubernetesVersion = o.to
	}
	given := map[string]string{}
	for _, dir := range o.artifacts {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return usageError("--artifacts: %v", err)
		}
		m, err := artifacts.Load(abs)
		if err != nil {
			return usageError("--artifacts %s: %v", dir, err)
		}
		if other, ok := given[m.KubernetesVersion]; ok {
			return usageError("--artifacts %s and %s both hold Kubernetes %s: give one", other, dir, m.KubernetesVersion)
		}
		given[m.KubernetesVersion] = abs
	}
	for _, v := range o.via {
		if inventory.CheckKubernetesVersion(v) != nil {
			return usageError("--via %q is not a supported Kubernetes version (such as %s)", v, inventory.DefaultKubernetesVersion)
		}
	}
	ask := &question{what: "upgrade restarts the control plane node by node and drains every node in turn",
		ask:  fmt.Sprintf("upgrade cluster %q to Kubernetes %s? [y/N] ", env.Inv.Cluster.Name, env.Inv.Cluster.KubernetesVersion),
		skip: o.yes || o.dryRun}
	if o.rollback {
		if o.to != "" || len(o.via) > 0 {
			return usageError("--rollback puts back the upgrade under way (its journal's): it takes no --to or --via")
		}
		ask.what = "upgrade --rollback restarts the control plane of each node the upgrade under way changed"
		ask.ask = fmt.Sprintf("roll back the upgrade under way of cluster %q? [y/N] ", env.Inv.Cluster.Name)
	}
	return change[playbooks.UpgradeResult]{g: g, view: view, result: "upgrade_result", lock: mutating(cmd, g, env, o.dryRun), refused: playbooks.ErrUpgradeRefused,
		ask: ask,
		play: func(ctx context.Context) (*playbooks.UpgradeResult, error) {
			return playbooks.UpgradeAll(ctx, env, playbooks.UpgradeOptions{MaxUnavailable: o.maxUnavailable, DrainTimeout: o.drainTimeout,
				CertificateRenewal: o.certificateRenewal, Timeout: o.timeout, DryRun: o.dryRun, Preflight: o.preflight.options(), Force: o.force, NoBackup: o.noBackup, Rollback: o.rollback}, given, o.via)
		},
		notes: func(res *playbooks.UpgradeResult, err error) {
			if res != nil && res.Preflight != nil && errors.Is(err, playbooks.ErrPreflight) && g.Output != "json" {
				printPreflight(g.stderr, res.Preflight, false)
			}
		},
		failed: preflightFailed[playbooks.UpgradeResult],
		report: func(w io.Writer, res *playbooks.UpgradeResult, took time.Duration) {
			printUpgrade(w, res, o.dryRun, took)
		},
	}.run(cmd.Context())
}

func printUpgrade(w io.Writer, r *playbooks.UpgradeResult, dry bool, took time.Duration) {
	if dry {
		fmt.Fprintf(w, "readiness: %d blocker(s), %d warning(s)\n", len(r.Readiness.Blockers()), len(r.Readiness)-len(r.Readiness.Blockers()))
		for _, f := range r.Readiness {
			fmt.Fprintf(w, "  %s\n", f.Line())
		}
		if len(r.Path) > 2 {
			fmt.Fprintf(w, "path: %s, each minor release done and checked before the next\n", strings.Join(r.Path, " → "))
		}
		fmt.Fprintf(w, "upgrade from %s to %s, in this order:\n", r.From, r.To)
		for i, line := range r.Order {
			fmt.Fprintf(w, "  %2d. %s\n", i+1, line)
		}
		total := printHostPlans(w, r.Plan)
		fmt.Fprintf(w, "dry run: %d change(s) on %d host(s); nothing was changed on the hosts\n", total, len(r.Plan))
		return
	}
	if len(r.RolledBack) > 0 && r.Nodes == nil {
		fmt.Fprintf(w, "rolled back to %s in %.1fs: %s put back\n", r.From, took.Seconds(), strings.Join(r.RolledBack, ", "))
		return
	}
	resumed := ""
	if r.Resumed {
		resumed = " (resumed)"
	}
	if len(r.Hops) > 1 {
		fmt.Fprintf(w, "upgraded from %s to %s in %.1fs%s, one minor release at a time: %s\n", r.From, r.To, took.Seconds(), resumed, strings.Join(r.Path, " → "))
		for _, h := range r.Hops {
			fmt.Fprintf(w, "  %s to %s:\n", h.From, h.To)
			printHop(w, h, "    ")
		}
	} else {
		fmt.Fprintf(w, "upgraded from %s to %s in %.1fs%s\n", r.From, r.To, took.Seconds(), resumed)
		printHop(w, r, "  ")
	}
	for _, n := range r.Nodes {
		ready := "Ready"
		if !n.Ready {
			ready = "NotReady"
		}
		fmt.Fprintf(w, "  %-20s %-8s %s\n", n.Name, ready, n.Version)
	}
}

// printHop prints what one upgrade (or one hop of several) did on each node.
func printHop(w io.Writer, r *playbooks.UpgradeResult, indent string) {
	if r.Backup != nil {
		fmt.Fprintf(w, indent+"etcd snapshot before the upgrade: %s (%d bytes, revision %d; clusterctl etcd restore --from restores it)\n", r.Backup.File, r.Backup.Size, r.Backup.Revision)
	}
	for _, n := range r.ControlPlanes {
		fmt.Fprintf(w, indent+"%s: control plane at %s in %.1fs\n", n.Name, r.To, float64(n.DurationMS)/1000)
	}
	for _, n := range r.Kubelets {
		fmt.Fprintf(w, indent+"%s: kubelet at %s in %.1fs (cordon, drain, restart, Ready, uncordon)\n", n.Name, r.To, float64(n.DurationMS)/1000)
	}
	if len(r.Renewed) > 0 {
		fmt.Fprintf(w, indent+"renewed: %s\n", strings.Join(r.Renewed, ", "))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, indent+"note: %s\n", n)
	}
}
