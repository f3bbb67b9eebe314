package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/playbooks"
)

type rebootOptions struct {
	ssh            sshOptions
	maxUnavailable int
	ifNeeded       bool
	drainTimeout   time.Duration
	nodeTimeout    time.Duration
	dryRun         bool
	yes            bool
}

func newRebootCmd(g *globalOptions) *cobra.Command {
	o := &rebootOptions{}
	cmd := &cobra.Command{
		Use:   "reboot",
		Short: "Reboot the cluster's hosts node by node, the cluster serving throughout (patch, then reboot)",
		Long: `Reboot every host of the inventory (or those of --limit) so that the cluster keeps serving:

  connect   every host, its boot ID, and with --if-needed whether it asks for a reboot:
            /run/reboot-required (Debian, Ubuntu) or needs-restarting -r (the RHEL family)
  check     refuses, before anything changes, when a Node is not Ready or an etcd member is not healthy
  reboot    control-plane and etcd hosts one at a time, then workers --max-unavailable at a time: cordon,
            drain (PodDisruptionBudgets respected, up to --drain-timeout), the inventory's
            hooks.reboot.before (patch the OS here), reboot, SSH in a new boot, the Node Ready with its
            lease renewed, on a control-plane node its static Pods running again and Ready, etcd
            healthy on every member, hooks.reboot.after, uncordon (only what the reboot cordoned)

Each host is recorded in the state directory (runs/reboot.json): killed anywhere, the same command finishes,
without rebooting a host twice. A host that does not come back within --node-timeout stops the run, named;
it stays cordoned, the others of its batch are uncordoned, the hosts not reached are untouched, and the
same command finishes once it is back. --dry-run prints the order and changes nothing. Exit codes: 0 done,
1 refused or failed (every reason is named), 2 bad usage or inventory, 130 interrupted.`,
		Example: `  clusterctl reboot -i hosts.yaml --dry-run                 # the order; nothing is touched
  clusterctl reboot -i hosts.yaml --yes                     # every host, one at a time
  clusterctl reboot -i hosts.yaml --if-needed --yes         # only the hosts that ask for it
  clusterctl reboot -i hosts.yaml --limit w1,w2,w3 --max-unavailable 2 --yes

  # patch, then reboot, in one command: in the inventory,
  #   hooks:
  #     reboot:
  #       before:
  #         - run: apt-get update && DEBIAN_FRONTEND=noninteractive apt-get -y upgrade
  clusterctl reboot -i hosts.yaml --yes`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runReboot(cmd, g, o)
		},
	}
	o.ssh.addFlags(cmd)
	f := cmd.Flags()
	f.IntVar(&o.maxUnavailable, "max-unavailable", 1, "how many workers reboot at once (control-plane and etcd hosts always one at a time)")
	f.BoolVar(&o.ifNeeded, "if-needed", false, "reboot only the hosts that ask for it (/run/reboot-required, needs-restarting -r)")
	f.DurationVar(&o.drainTimeout, "drain-timeout", defaultDrainTimeout, drainTimeoutUsage)
	f.DurationVar(&o.nodeTimeout, "node-timeout", 5*time.Minute, "how long a host may take to come back: SSH in a new boot, its Node Ready, its static Pods Ready, etcd healthy (raise it for machines slow to boot)")
	addLockFlag(cmd, g)
	f.BoolVar(&o.dryRun, "dry-run", false, "check and print the order; change nothing")
	f.BoolVar(&o.yes, "yes", false, "do not ask for confirmation")
	return cmd
}

func runReboot(cmd *cobra.Command, g *globalOptions, o *rebootOptions) error {
	if o.maxUnavailable < 1 {
		return usageError("--max-unavailable must be at least 1")
	}
	if o.nodeTimeout <= 0 || o.drainTimeout <= 0 {
		return usageError("--node-timeout and --drain-timeout must be positive")
	}
	view := g.progressView()
	env, err := openCluster(g, &o.ssh, view)
	if err != nil {
		return err
	}
	defer env.Close()
	return change[playbooks.RebootResult]{g: g, view: view, result: "reboot_result", lock: mutating(cmd, g, env, o.dryRun), refused: playbooks.ErrRebootRefused,
		ask: &question{what: "reboot drains and reboots the hosts one by one",
			ask:  fmt.Sprintf("reboot %d host(s) of cluster %q? [y/N] ", len(env.Hosts), env.Inv.Cluster.Name),
			skip: o.yes || o.dryRun},
		play: func(ctx context.Context) (*playbooks.RebootResult, error) {
			return playbooks.Reboot(ctx, env, playbooks.RebootOptions{MaxUnavailable: o.maxUnavailable, IfNeeded: o.ifNeeded,
				DrainTimeout: o.drainTimeout, NodeTimeout: o.nodeTimeout, DryRun: o.dryRun})
		},
		report: func(w io.Writer, res *playbooks.RebootResult, took time.Duration) {
			printReboot(w, res, o.dryRun, took)
		},
	}.run(cmd.Context())
}

func printReboot(w io.Writer, r *playbooks.RebootResult, dry bool, took time.Duration) {
	if len(r.NotNeeded) > 0 {
		fmt.Fprintf(w, "not asking for a reboot (--if-needed): %v\n", r.NotNeeded)
	}
	if dry {
		fmt.Fprintf(w, "reboot, in this order:\n")
		for i, line := range r.Order {
			fmt.Fprintf(w, "  %2d. %s\n", i+1, line)
		}
		fmt.Fprintf(w, "dry run: %d host(s) would reboot; nothing was changed on the hosts\n", len(r.Order))
		return
	}
	resumed := ""
	if r.Resumed {
		resumed = " (resumed)"
	}
	fmt.Fprintf(w, "rebooted %d host(s) in %.1fs%s\n", len(r.Rebooted), took.Seconds(), resumed)
	for _, h := range r.Rebooted {
		needs := ""
		if h.Needs != "" {
			needs = " (" + h.Needs + ")"
		}
		fmt.Fprintf(w, "  %s%s: SSH in a new boot after %.1fs, Ready after %.1fs\n", h.Name, needs, float64(h.SSHMS)/1000, float64(h.ReadyMS)/1000)
	}
	for _, n := range r.Nodes {
		ready := "Ready"
		if !n.Ready {
			ready = "NotReady"
		}
		fmt.Fprintf(w, "  %-20s %-8s %s\n", n.Name, ready, n.Version)
	}
}
