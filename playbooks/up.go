package playbooks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/hooks"
)

// Up brings up a cluster on the session's hosts (and the first control-plane host), kubeadm's way. Every
// step is idempotent; the state directory holds the PKI and the token between runs. add-node is Up on the
// hosts it adds.
func Up(ctx context.Context, e *Env, o UpOptions) (*UpResult, error) {
	orDefault(&o.APITimeout, defaultWait)
	orDefault(&o.NodeTimeout, defaultWait)
	orDefault(&o.TokenTTL, time.Hour)
	d, p, err := newDeployment(e, e.Hosts, deployOptions{Now: o.Now, DryRun: o.DryRun, TokenTTL: o.TokenTTL, Timeout: o.APITimeout,
		KubeletBatch: o.MaxUnavailable, KubeletTimeout: o.NodeTimeout})
	if err != nil {
		return nil, err
	}
	u := &upRun{deployment: d, o: o, res: &UpResult{}}
	defer func() {
		for _, h := range e.Inv.Hosts {
			if c := e.Conn(h.Name); c != nil {
				u.res.BytesPushed += c.BytesWritten()
			}
		}
		if o.DryRun {
			u.res.Plan = u.hostPlans(p)
		}
	}()
	u.res.Phases, err = runSteps(ctx, runOptions{Sink: e.Sink, DryRun: o.DryRun, Held: e.held, Before: func(int) error { return u.laterFailed() }}, p, u.steps())
	if _, eerr := u.earlyEnded(err != nil); err == nil {
		err = eerr
	}
	u.othersEnded() // nothing left running on the session's connections
	if u.later != nil {
		if err != nil {
			u.later.cancel() // a step failed: the run ends now, its later push too
		}
		if lerr := u.pushed(ctx); err == nil {
			err = lerr
		}
	}
	return u.res, err
}

func (u *upRun) preflightStep(ctx context.Context, p *plan) (*plan, error) {
	report, p, err := u.preflight(ctx, p, u.o.Preflight)
	u.res.Preflight = report
	return p, err
}

func (u *upRun) renderStep(ctx context.Context, p *plan) (*plan, error) {
	if err := u.sameVersion(ctx, p); err != nil {
		return nil, err
	}
	p, err := u.render(ctx, p)
	if err != nil {
		return nil, err
	}
	u.res.Endpoint = p.rendered.Endpoint
	u.res.AdminKubeconfig = u.e.adminKubeconfig()
	if abs, err := filepath.Abs(u.res.AdminKubeconfig); err == nil {
		u.res.AdminKubeconfig = abs
	}
	return p, u.prepare(p)
}

// pushStep puts every host's files and applies them. Control-plane plays stop at the first failure; workers
// tolerate none either here, since a cluster missing a worker is not what was asked for.
//
// The hosts the control plane starts with (the first control-plane node, external etcd hosts) are pushed
// first and alone: the other hosts' pushes (workers, the other control-plane nodes) go on in the background
// while the first control-plane node starts, and the steps that start their kubelets wait for them
// (pushed). Pushes share the workstation's and, in a lab, the hosts' CPUs: measured on a 1+2 lab, the
// first control-plane node's push took ~10 s alone and ~19 s beside the workers', and its API server came
// only after the last push ended. A new cluster's first control-plane node gets its scheduler's manifest
// once its API server is ready (holdScheduler). On a running cluster (a re-run, add-node) nothing waits
// for the first node's push, which mostly finds its files right: the others' start with it, and a new
// worker's push (its binaries and images, the longest part of add-node) no longer waits for that check.
// A dry run pushes all hosts in one play.
func (u *upRun) pushStep(ctx context.Context, p *plan) error {
	u.prefetchOthers(ctx, p)
	first, rest := u.pushOrder(p)
	if u.o.DryRun || len(first) == 0 || len(rest) == 0 {
		_, err := u.pushPart(ctx, p, "push", names(p.hosts), u.e.Forks, u.hold(p))
		return err
	}
	running := !u.newCluster(p)
	if running {
		u.pushLater(ctx, p, rest, "beside the first control-plane node's")
	}
	if _, err := u.pushPart(ctx, p, "push", names(first), u.e.Forks, u.hold(p)); err != nil {
		return err
	}
	if !running {
		u.pushLater(ctx, p, rest, "beside the control plane's start")
	}
	return nil
}

// pushLater starts the push of hosts in the background (u.later); the steps that need them wait for it
// (pushed).
func (u *upRun) pushLater(ctx context.Context, p *plan, hosts []*inventory.Host, beside string) {
	lctx, cancel := context.WithCancel(ctx)
	u.later = &laterPush{hosts: names(hosts), cancel: cancel, ended: make(chan struct{})}
	u.e.say("push", "", "pushing %d more hosts %s: %s", len(hosts), beside, strings.Join(u.later.hosts, ", "))
	go func(l *laterPush) {
		_, err := u.pushPart(lctx, p, "push", l.hosts, u.e.Forks, u.hold(p))
		l.result = err
		close(l.ended)
	}(u.later)
}

// pushOrder splits the run's hosts into those the control plane starts with (the first control-plane node
// and external etcd hosts, when they are in the run) and the rest.
func (u *upRun) pushOrder(p *plan) (first, rest []*inventory.Host) {
	etcd := u.etcdHosts(p)
	for _, h := range p.hosts {
		if h == p.cp1 || slices.Contains(etcd, h) {
			first = append(first, h)
		} else {
			rest = append(rest, h)
		}
	}
	return first, rest
}

func (u *upRun) etcdStep(ctx context.Context, p *plan) error {
	return u.startEtcd(ctx, p, "etcd", u.etcdHosts(p))
}

func (u *upRun) noEtcdHosts(p *plan) string {
	switch {
	case !u.e.Inv.ExternalEtcd():
		return "etcd is stacked: each control-plane node's kubelet runs its member"
	case len(u.etcdHosts(p)) == 0:
		return "no etcd host in this run"
	}
	return ""
}

func (u *upRun) startControlPlane(ctx context.Context, p *plan) error {
	return u.startKubelet(ctx, p, "control-plane", []string{p.cp1.Name})
}

// join starts the workers' kubelets, which TLS-bootstrap with the token; clusterctl approves their client
// certificates (see csr.CheckClient), the controller-manager signs them. Running workers whose kubelet
// files changed restart in turn (rollKubelets: each batch's Nodes and Pods Ready again before the next).
func (u *upRun) join(ctx context.Context, p *plan) error {
	u.startEarlyNetwork(ctx, p)
	if err := u.pushed(ctx); err != nil {
		return err
	}
	if err := u.waitSigner(ctx); err != nil {
		return err
	}
	var start, roll []string
	for _, h := range p.workers() {
		if !u.o.DryRun && !p.joining[h.Name] && u.restartPending(h.Name) {
			roll = append(roll, h.Name)
		} else {
			start = append(start, h.Name)
		}
	}
	if err := u.startKubelet(ctx, p, "join", start); err != nil {
		return err
	}
	return u.rollKubelets(ctx, "join", roll, kubeletRoll{restart: func(ctx context.Context, name string) (time.Time, error) {
		out, err := u.kubeletOn(ctx, p, name)
		return out.Started, err
	}})
}

func (u *upRun) noWorkers(p *plan) string {
	if len(p.workers()) == 0 {
		return "no worker in this run"
	}
	return ""
}

// steps are Up's steps, in order. Up keeps no journal: every step finds from the hosts and the API what is
// left to do (the files each host has, the kubelets running, the Nodes registered), so a run killed anywhere
// is finished by running it again, and add-node is the same steps on the hosts it adds.
func (u *upRun) steps() []Step {
	return []Step{
		// connect, gather facts, kubeadm's checks per role and across hosts
		{Name: "preflight", Plan: u.preflightStep, Dry: true, Reads: true},
		// PKI, kubeconfigs, static Pods, kubelet and runtime configuration, made locally
		{Name: "render", Plan: u.renderStep, Dry: true, Reads: true},
		// nothing to do when every host is as this plan has it (its stamp) and every Node Ready: the run
		// ends here (a dry run, diff and status's drift too: nothing would change), without taking the
		// cluster's lock (it reads only, and fails as before when another run holds the lock)
		{Name: "settled", Run: u.settled, Skip: u.full, Dry: true, Reads: true},
		// the inventory's hooks before anything is pushed (hooks.up.before, or addNode.before)
		{Name: "hooks-before", Run: do(u.hooksStep("before")), Dry: true},
		// every host's files, binaries and images (air-gapped), the runtime configured
		// (the hosts the control plane does not start with go on in the background until the workers join)
		{Name: "push", Run: u.pushStep, Dry: true, Until: "join"},
		// external etcd: each etcd host's member started (a changed one restarted, one at a time), until
		// every member is healthy
		{Name: "etcd", Run: u.etcdStep, Skip: u.noEtcdHosts, Dry: true},
		// the first control-plane node's kubelet starts etcd and the control plane
		{Name: "control-plane", Run: u.startControlPlane, Dry: true},
		// until the API server is ready (the kubelet and static Pods reported meanwhile)
		{Name: "wait-api", Run: u.waitAPI},
		// through the API: RBAC, token, cluster-info, kubeadm-config, kube-proxy, CoreDNS
		{Name: "bootstrap", Run: u.bootstrap},
		// the other control-plane nodes one at a time: etcd learner, static Pods, promotion
		{Name: "control-plane-join", Run: u.joinControlPlanes, Skip: u.noControlPlaneJoins, Dry: true},
		// workers' kubelets start and TLS-bootstrap with the token
		// (the pod network of the nodes that can have it already is set up beside it, in the background)
		{Name: "join", Run: u.join, Skip: u.noWorkers, Dry: true, Until: "network"},
		// pod network: the bridge plugin with each node's range and routes, or the user's CNI
		{Name: "network", Run: u.network},
		// serving certificates approved (after checks), all Nodes Ready, addons available, token deleted
		{Name: "ready", Run: u.ready},
		// objects of the encrypted resources written before (in clear, or under an older key) stored again
		// under the write key
		{Name: "encryption", Run: do(u.encryption)},
		// the inventory's add-ons: Helm charts and manifests installed, upgraded or uninstalled
		{Name: "addons", Run: u.addons, Skip: u.noAddons, Dry: true},
		// the inventory's hooks once the nodes are Ready
		{Name: "hooks-after", Run: do(u.hooksStep("after")), Dry: true},
		// every host stamped: as this plan has it
		{Name: "stamp", Run: u.stamp},
	}
}

// hooksStep runs the inventory's hooks of up (or add-node) at when on the hosts they are for.
func (u *upRun) hooksStep(when string) func(context.Context) error {
	return func(ctx context.Context) error {
		command, hosts := u.o.Hooks, u.e.Hosts
		if command == "" {
			command = inventory.HookUp
		}
		if u.o.HookHosts != nil {
			hosts = nil
			for _, name := range u.o.HookHosts {
				if h := u.e.Inv.Host(name); h != nil {
					hosts = append(hosts, h)
				}
			}
		}
		return u.e.runHooks(ctx, hooks.Point{Command: command, When: when}, hosts, u.o.DryRun, func(host, action string) {
			u.record(host, apply.Outcome{Actions: []string{action}})
		})
	}
}

// sameVersion refuses to change the version of a running cluster: up would replace every node's binaries
// and static Pods at once, where upgrade moves it node by node after its checks. A cluster whose API does
// not answer (not up yet, an interrupted first run) is not asked.
func (u *upRun) sameVersion(ctx context.Context, p *plan) error {
	f := p.facts[p.cp1.Name]
	if f == nil || !f.ListensOn(u.e.Inv.Cluster.APIServer.BindPort) {
		return nil
	}
	if _, err := os.Stat(u.e.adminKubeconfig()); err != nil {
		return nil
	}
	c, err := u.e.Admin(ctx)
	if err != nil {
		return nil
	}
	v, err := serverVersion(ctx, c)
	if err != nil {
		return nil
	}
	if want := u.e.Inv.Cluster.KubernetesVersion; "v"+v.String() != want {
		return fmt.Errorf("the cluster runs Kubernetes v%s and the inventory asks for %s: `clusterctl upgrade` moves a running cluster to another version, node by node, after its checks (up would replace every node's binaries at once)", v, want)
	}
	return nil
}
