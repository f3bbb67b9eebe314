package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/clusterctl/clusterctl/playbooks"
	"github.com/clusterctl/clusterctl/tasks/charts"
)

type upOptions struct {
	// need is what the command needs of the state directory: up makes it, add-node needs a cluster.
	need        stateNeed
	ssh         sshOptions
	preflight   preflightFlags
	apiTimeout  time.Duration
	nodeTimeout time.Duration
	// maxUnavailable: how many running workers' kubelets restart at once (up only).
	maxUnavailable int
	dryRun         bool
	full           bool
	// hooks is the command whose inventory hooks run (up's by default), on hookHosts (default: all).
	hooks     string
	hookHosts []string
}

func newUpCmd(g *globalOptions) *cobra.Command {
	o := &upOptions{}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Build a cluster from the inventory's hosts: control-plane nodes (stacked etcd) and workers",
		Long: `Bring up a Kubernetes cluster the way kubeadm does, driven from this workstation over SSH:

  preflight      connect to every host, gather facts, kubeadm's checks for each role and across hosts
  render         PKI, kubeconfigs, static Pods, kubelet and containerd configuration, made here, kept in
                 the state directory
  settled        nothing to do when every host is stamped with this plan, unchanged since, and every Node
                 Ready: the run ends here (--full runs every step anyway)
  hooks-before   the inventory's hooks.up.before on each host (add-node: hooks.addNode, on the hosts added)
  push           each host's files (workers get no CA key; the encryption keys, audit policy and Pod
                 Security configuration go to control-plane nodes only); with cluster.artifacts, the kubelet, kubectl
                 and the image archives, imported with ctr (air-gapped installs); runtime configured
  control-plane  the first control-plane node's kubelet starts etcd, API server, controller-manager,
                 scheduler as static Pods
  wait-api       until the API server is ready; the kubelet's and the static Pods' state every 10 s, the
                 last logs if it does not come up
  bootstrap      through the API (dialled through the control-plane host's SSH connection: no route to
                 port 6443 needed): RBAC, a short-lived bootstrap token, cluster-info, kubeadm-config,
                 kube-proxy and CoreDNS
  control-plane-join  the other control-plane nodes one at a time: etcd learner added through the etcd
                 API, kubelet started, learner promoted, API server ready
  join           workers' kubelets start and join by TLS bootstrap with the token and the pinned CA;
                 running workers whose kubelet files changed restart --max-unavailable at a time, each
                 batch's Nodes and the Pods Ready on them before Ready again before the next
  network        cni.plugin bridge: each node's pod range and routes between nodes; flannel: its VXLAN
                 (nodes on routed subnets); manifests: yours; none with an add-on network: true
  ready          kubelet serving certificates approved after checking the requesting node and every
                 name and address against the inventory; all Nodes Ready; the token deleted
  encryption     objects of the encrypted resources (cluster.security.encryption) found in etcd in clear or
                 under an older key, written before encryption was on, stored again under the write key
  hooks-after    the inventory's hooks.up.after (add-node: hooks.addNode.after)
  stamp          each host stamped with this plan's digest and the state of the files written

A re-run changes nothing that is right and finishes what an interrupted run left; --dry-run shows what
would change. The admin kubeconfig is left in the state directory (admin.conf). Exit codes: 0 done,
1 failed (a host, a command and its stderr are named), 2 bad usage or inventory, 130 interrupted.`,
		Example: `  clusterctl up -i hosts.yaml
  clusterctl up -i hosts.yaml --ssh-accept-new        # first contact: record the hosts' keys
  clusterctl up -i hosts.yaml --dry-run               # what would change, per host; nothing is touched
  clusterctl up -i hosts.yaml --output json | jq 'select(.type=="up_result")'
  export KUBECONFIG=$(dirname hosts.yaml)/.clusterctl/<cluster>/admin.conf; kubectl get nodes`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUp(cmd, g, o)
		},
	}
	o.ssh.addFlags(cmd)
	o.preflight.addFlags(cmd)
	cmd.Flags().BoolVar(&o.full, "full", false, "run every step even when every host is settled (stamped with this plan, unchanged since): puts back the cluster's objects changed through the API and images removed from the runtime, which the stamps do not see")
	cmd.Flags().DurationVar(&o.apiTimeout, "api-timeout", 5*time.Minute, "how long to wait for the first API server")
	cmd.Flags().DurationVar(&o.nodeTimeout, "node-timeout", 5*time.Minute, "how long to wait for nodes to register and be Ready")
	cmd.Flags().IntVar(&o.maxUnavailable, "max-unavailable", 1, "how many running workers' kubelets restart at once when their files changed, each batch's Nodes and Pods Ready again before the next")
	addLockFlag(cmd, g)
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "go through the steps up to the kubelets' start recording, not making, each change: print what each host would receive and which services would (re)start; change nothing on the hosts")
	return cmd
}

func runUp(cmd *cobra.Command, g *globalOptions, o *upOptions) error {
	if cmd.Flags().Lookup("max-unavailable") != nil && o.maxUnavailable < 1 {
		return usageError("--max-unavailable must be at least 1")
	}
	view := g.progressView()
	env, created, err := openEnvNeeding(g, &o.ssh, view, o.need)
	if err != nil {
		return err
	}
	defer env.Close()
	lock := mutating(cmd, g, env, o.dryRun)
	if lock != nil {
		lock.o.Beside = true // the cluster's lock is read beside up's facts, render and settled check, taken after them
	}
	return change[playbooks.UpResult]{g: g, view: view, result: "up_result", lock: lock,
		play: func(ctx context.Context) (*playbooks.UpResult, error) {
			return playbooks.Up(ctx, env, playbooks.UpOptions{APITimeout: o.apiTimeout, NodeTimeout: o.nodeTimeout, MaxUnavailable: o.maxUnavailable,
				DryRun: o.dryRun, Full: o.full, Preflight: o.preflight.options(), Hooks: o.hooks, HookHosts: o.hookHosts})
		},
		notes: func(res *playbooks.UpResult, err error) {
			if res != nil && res.Preflight != nil && (errors.Is(err, playbooks.ErrPreflight) || res.Preflight.Errors+res.Preflight.Warnings > 0) && g.Output != "json" {
				printPreflight(g.stderr, res.Preflight, true)
			}
		},
		failed: func(_ *playbooks.UpResult, err error) error {
			if !errors.Is(err, playbooks.ErrPreflight) {
				return failedOnHosts(err)
			}
			if created {
				dropNewState(env.StateDir)
			}
			return &exitError{code: exitFailed, err: errReported}
		},
		report: func(w io.Writer, res *playbooks.UpResult, took time.Duration) {
			if o.dryRun {
				printPlan(w, res)
			} else {
				printUp(w, res, took)
			}
		},
	}.run(cmd.Context())
}

func printPlan(w io.Writer, r *playbooks.UpResult) {
	total := printHostPlans(w, r.Plan)
	addons := printAddonChanges(w, r.Addons, true)
	fmt.Fprintf(w, "dry run: %d change(s) on %d host(s), %d add-on change(s); nothing was changed\n", total, len(r.Plan), addons)
	if total > 0 {
		fmt.Fprintln(w, "then, through the API: control plane started and waited for, bootstrap objects applied, workers joined, pod network, serving certificates approved")
	}
}

// planRecorder collects a dry run's actions per host; record is called from many goroutines.
type planRecorder struct {
	mu      sync.Mutex
	actions map[string][]string
}

func (p *planRecorder) record(host, action string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.actions == nil {
		p.actions = map[string][]string{}
	}
	p.actions[host] = append(p.actions[host], action)
}

// plans are the actions recorded for each of hosts, in their order.
func (p *planRecorder) plans(hosts []string) []playbooks.HostPlan {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]playbooks.HostPlan, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, playbooks.HostPlan{Host: h, Files: []playbooks.PlannedFile{}, Actions: p.actions[h]})
	}
	return out
}

// printDryPlans prints each host's actions and the dry run's closing line.
func printDryPlans(w io.Writer, plans []playbooks.HostPlan) {
	total := printHostPlans(w, plans)
	fmt.Fprintf(w, "dry run: %d action(s) on %d host(s); nothing was changed\n", total, len(plans))
}

// printHostPlans prints what a dry run found would change on each host; it returns the number of changes.
func printHostPlans(w io.Writer, plans []playbooks.HostPlan) int {
	total := 0
	for _, p := range plans {
		if len(p.Files)+len(p.Actions) == 0 {
			fmt.Fprintf(w, "%s: nothing to change\n", p.Host)
			continue
		}
		fmt.Fprintf(w, "%s:\n", p.Host)
		for _, f := range p.Files {
			fmt.Fprintf(w, "  %-8s %s (%d bytes)\n", f.Change, f.Path, f.Size)
		}
		for _, a := range p.Actions {
			fmt.Fprintf(w, "  %s\n", a)
		}
		total += len(p.Files) + len(p.Actions)
	}
	return total
}

func printUp(w io.Writer, r *playbooks.UpResult, took time.Duration) {
	var phases []string
	for _, p := range r.Phases {
		phases = append(phases, fmt.Sprintf("%s %.1fs", p.Name, float64(p.DurationMS)/1000))
	}
	fmt.Fprintf(w, "cluster up in %.1fs (%s)\n", took.Seconds(), strings.Join(phases, ", "))
	for _, n := range r.Nodes {
		ready := "Ready"
		if !n.Ready {
			ready = "NotReady"
		}
		fmt.Fprintf(w, "  %-20s %-8s %-14s %s %s\n", n.Name, ready, strings.Join(n.Roles, ","), n.Version, n.PodCIDR)
	}
	for name, why := range r.Unapproved {
		fmt.Fprintf(w, "left unapproved: %s: %s\n", name, why)
	}
	printAddonChanges(w, r.Addons, false)
	fmt.Fprintf(w, "API server: %s\nadmin kubeconfig: %s\n  export KUBECONFIG=%s\n  kubectl get nodes\n", r.Endpoint, r.AdminKubeconfig, r.AdminKubeconfig)
}

// printAddonChanges writes the add-ons' changes (with the values' diffs in a dry run) and returns how many
// are not "unchanged".
func printAddonChanges(w io.Writer, changes []charts.Change, diffs bool) int {
	n := 0
	for _, ch := range changes {
		if ch.Action == charts.Unchanged {
			continue
		}
		n++
		verb := ch.Done()
		if diffs {
			verb = "would " + ch.Action
		}
		fmt.Fprintln(w, ch.Line(verb))
		if diffs && ch.Diff != "" {
			for _, l := range strings.Split(strings.TrimSuffix(ch.Diff, "\n"), "\n") {
				fmt.Fprintln(w, "  "+l)
			}
		}
	}
	return n
}
