package playbooks

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/etcdmember"
	"github.com/clusterctl/clusterctl/tasks/hooks"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/reboot"
)

// Reboot reboots the run's hosts (all of the inventory's, or --limit's) so that the cluster serves
// throughout: the control-plane and etcd hosts one at a time, then the workers MaxUnavailable at a time;
// each node cordoned, drained (PodDisruptionBudgets respected), the inventory's hooks.reboot.before run,
// rebooted, waited for (SSH in a new boot, its Node Ready with a lease renewed since, its static Pods
// running again and Ready, etcd healthy on every member), hooks.reboot.after, and uncordoned if the
// reboot cordoned it. It refuses a cluster that is not healthy before it starts. Each host is recorded in
// the state directory: the same command resumes a killed reboot, without rebooting a host twice.
func Reboot(ctx context.Context, e *Env, o RebootOptions) (*RebootResult, error) {
	o.MaxUnavailable = max(o.MaxUnavailable, 1)
	orDefault(&o.DrainTimeout, defaultWait)
	orDefault(&o.NodeTimeout, defaultWait)
	o.Now = clockOr(o.Now)
	r := &rebootRun{e: e, o: o, res: &RebootResult{Order: []string{}, Rebooted: []RebootTiming{}}, state: map[string]reboot.State{}, notJoined: map[string]bool{},
		clients: map[string]*apiclient.Client{}, etcd: map[string]*etcdmember.Client{}}
	defer r.closeEtcd()
	if err := r.loadState(); err != nil {
		return nil, err
	}
	var err error
	r.res.Phases, err = runSteps(ctx, runOptions{Sink: e.Sink, DryRun: o.DryRun, Progress: r.st}, nil, r.steps())
	return r.res, err
}

// steps are a reboot's; its reboot step resumes host by host (Step.Resume), and the journal keeps each
// host's boot ID before its reboot and the nodes it cordoned beside it.
func (r *rebootRun) steps() []Step {
	return []Step{
		// connect; each host's boot ID, and whether it asks for a reboot
		{Name: "connect", Run: do(r.connect), Dry: true},
		// every Node Ready, etcd healthy with every member: refuse before anything changes
		{Name: "check", Run: do(r.check), Dry: true},
		// what a dry run shows: the order
		{Name: "plan", Run: do(r.plan), Dry: true},
		// control-plane and etcd hosts one at a time, then workers in batches
		{Name: "reboot", Resume: r.reboot},
		// every Node's status; the record of the reboot removed
		{Name: "done", Run: do(r.done)},
	}
}

// connect reaches every host of the run and reads its boot state; with --if-needed the hosts that do not
// ask for a reboot are left out (a host a killed run was rebooting is kept: it is finished).
func (r *rebootRun) connect(ctx context.Context) error {
	hosts, out := clusterHostsOf(ctx, r.e, r.e.Hosts, "connect")
	for _, h := range out {
		r.notJoined[h.Name] = true
	}
	if _, err := Connect(ctx, r.e, hosts, 0); err != nil {
		return err
	}
	for _, h := range hosts {
		if r.isDone(h) {
			continue
		}
		s, err := r.bootState(ctx, h)
		if err != nil {
			return err
		}
		r.state[h.Name] = s
		if r.o.IfNeeded && s.Needs == "" && !r.wasCurrent(h) {
			r.res.NotNeeded = append(r.res.NotNeeded, h.Name)
			continue
		}
		r.todo = append(r.todo, h)
	}
	if r.o.IfNeeded {
		r.e.say("connect", "", "%d of %d hosts ask for a reboot", len(r.todo), len(hosts))
	}
	return nil
}

// check refuses, with every reason found, a reboot of a cluster in trouble: a Node not Ready (but a host
// a killed run was rebooting), etcd without every member healthy.
func (r *rebootRun) check(ctx context.Context) error {
	admin, err := r.e.Admin(ctx)
	if err != nil {
		return fmt.Errorf("%w: the API server does not answer: %w", ErrRebootRefused, err)
	}
	var reasons []string
	list, err := admin.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("%w: listing the Nodes: %w", ErrRebootRefused, err)
	}
	byName := map[string]*corev1.Node{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	var notReady []string
	for _, h := range r.e.Inv.Nodes() {
		n := byName[h.NodeName]
		switch {
		case n == nil:
			// Not joined yet (connect said so for the run's hosts): no Node to drain, no etcd member.
			r.notJoined[h.Name] = true
		case !nodes.Ready(n) && !r.wasCurrent(h):
			notReady = append(notReady, h.NodeName)
		}
	}
	if len(notReady) > 0 {
		reasons = append(reasons, fmt.Sprintf("Nodes not Ready: %s (kubectl describe node tells why); a reboot starts from a healthy cluster", strings.Join(notReady, ", ")))
	}
	if unhealthy := r.etcdUnhealthy(ctx, r.wasCurrent); len(unhealthy) > 0 {
		reasons = append(reasons, "etcd: "+strings.Join(unhealthy, "; ")+" (every member healthy before a member's host reboots)")
	}
	if len(reasons) > 0 {
		return fmt.Errorf("%w:\n  - %s", ErrRebootRefused, strings.Join(reasons, "\n  - "))
	}
	r.e.say("check", "", "%d Nodes Ready, etcd healthy on %d members", len(list.Items), len(r.etcdHosts()))
	return nil
}

// order is the run's hosts in the order they reboot: control-plane and etcd hosts one at a time, in
// inventory order, then the workers in batches.
func (r *rebootRun) order() [][]*inventory.Host {
	var out [][]*inventory.Host
	var workers []*inventory.Host
	for _, h := range r.todo {
		if h.Has(inventory.RoleControlPlane) || h.Has(inventory.RoleEtcd) {
			out = append(out, []*inventory.Host{h})
		} else {
			workers = append(workers, h)
		}
	}
	return append(out, reboot.Batches(workers, r.o.MaxUnavailable)...)
}

func (r *rebootRun) plan(context.Context) error {
	batches := r.order()
	for i, batch := range batches {
		for _, h := range batch {
			what := "control-plane node"
			switch {
			case !h.IsNode():
				what = "etcd host"
			case !h.Has(inventory.RoleControlPlane):
				what = fmt.Sprintf("worker, batch %d of %d", i+1, len(batches))
			}
			needs := ""
			if s := r.state[h.Name]; s.Needs != "" {
				needs = " (" + s.Needs + ")"
			}
			line := fmt.Sprintf("%s (%s)%s: ", h.Name, what, needs)
			if h.IsNode() {
				line += fmt.Sprintf("cordon, drain (up to %s), ", r.o.DrainTimeout)
			}
			line += hookWords(r.e.Inv, h, inventory.HookReboot, "before") + "reboot, SSH in a new boot"
			switch {
			case h.Has(inventory.RoleControlPlane):
				line += ", Node Ready, static Pods Ready, etcd healthy on every member"
			case h.IsNode():
				line += ", Node Ready"
			default:
				line += ", etcd healthy on every member"
			}
			line += ", " + hookWords(r.e.Inv, h, inventory.HookReboot, "after")
			if h.IsNode() {
				line += "uncordon"
			}
			r.res.Order = append(r.res.Order, strings.TrimSuffix(line, ", "))
		}
	}
	if len(r.res.Order) == 0 {
		r.e.say("plan", "", "no host to reboot")
	}
	return nil
}

func (r *rebootRun) reboot(ctx context.Context, _ *plan, g progress) error {
	for _, batch := range r.order() {
		if err := r.batch(ctx, g, batch); err != nil {
			return err
		}
	}
	return nil
}

// batch reboots hosts together: drain, hooks, reboot, wait, hooks, uncordon. A host that does not come
// back within NodeTimeout stops the run, named; the others of its batch are waited for and uncordoned.
func (r *rebootRun) batch(ctx context.Context, g progress, batch []*inventory.Host) error {
	if err := g.Begin(names(batch)...); err != nil {
		return err
	}
	// The hosts not rebooted yet (a resumed run finds a new boot ID on those it had rebooted).
	var fresh []*inventory.Host
	for _, h := range batch {
		if old, _, ok := r.issuedBefore(h); ok && old != r.state[h.Name].BootID {
			r.e.say("reboot", h.Name, "rebooted by the run that was interrupted: waiting for it")
			continue
		}
		fresh = append(fresh, h)
	}
	if err := r.drain(ctx, fresh); err != nil {
		return err
	}
	if err := r.e.runHooks(ctx, hooks.Point{Command: inventory.HookReboot, When: "before"}, fresh, false, nil); err != nil {
		return err
	}
	for _, h := range fresh {
		if err := r.issue(ctx, h); err != nil {
			return err
		}
	}
	var failed []string
	var back []*inventory.Host
	for _, h := range batch {
		before, issued, _ := r.issuedBefore(h)
		ssh, boot, err := r.waitBoot(ctx, h, before, issued)
		if err == nil {
			err = r.waitReady(ctx, h, issued, boot)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failed = append(failed, err.Error())
			continue
		}
		back = append(back, h)
		r.res.Rebooted = append(r.res.Rebooted, RebootTiming{Name: h.Name, Needs: r.state[h.Name].Needs,
			SSHMS: ssh.Milliseconds(), ReadyMS: r.o.Now().Sub(issued).Milliseconds()})
	}
	if err := r.e.runHooks(ctx, hooks.Point{Command: inventory.HookReboot, When: "after"}, back, false, nil); err != nil {
		return err
	}
	for _, h := range back {
		if err := r.uncordon(ctx, h); err != nil {
			return err
		}
		if err := g.Finish(h.Name); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s (the hosts not reached yet are untouched; once it is back, the same command finishes the reboot)", strings.Join(failed, "; "))
	}
	return nil
}

// drain cordons and drains the nodes among hosts (an etcd host is not a node).
func (r *rebootRun) drain(ctx context.Context, hosts []*inventory.Host) error {
	var todo []*inventory.Host
	for _, h := range hosts {
		if h.IsNode() {
			todo = append(todo, h)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	admin, err := r.api(ctx, nil)
	if err != nil {
		return err
	}
	return r.drainWindow().open(ctx, admin.Kube, todo)
}

// drainWindow is the reboot's drain window; the journal keeps what it cordoned.
func (r *rebootRun) drainWindow() drainWindow {
	return drainWindow{e: r.e, play: "reboot", timeout: r.o.DrainTimeout,
		ours: journalCordons[rebootData]{st: r.st, list: func(d *rebootData) *[]string { return &d.Cordoned }}}
}

// issue records the host's boot ID, then asks it to reboot and drops its connection and the clients made
// through it. The session may end before the command returns (sshd stops): that is not a failure, the
// new boot ID says whether it rebooted.
func (r *rebootRun) issue(ctx context.Context, h *inventory.Host) error {
	now := r.o.Now()
	if err := r.save(func(d *rebootData) {
		if d.BootIDs == nil {
			d.BootIDs, d.Issued = map[string]string{}, map[string]int64{}
		}
		d.BootIDs[h.Name], d.Issued[h.Name] = r.state[h.Name].BootID, now.UnixMilli()
	}); err != nil {
		return err
	}
	conn := r.e.Conn(h.Name)
	if conn == nil {
		return fmt.Errorf("%s: not connected", h.Name)
	}
	if err := reboot.Reboot(ctx, conn); err != nil {
		return err
	}
	r.e.say("reboot", h.Name, "rebooting")
	r.forget(h.Name)
	return nil
}

// uncordon makes a node the reboot cordoned schedulable again (a node cordoned before is left so).
func (r *rebootRun) uncordon(ctx context.Context, h *inventory.Host) error {
	w := r.drainWindow()
	if !h.IsNode() || !w.ours.has(h.NodeName) {
		return nil
	}
	admin, err := r.api(ctx, nil)
	if err != nil {
		return err
	}
	return w.close(ctx, admin.Kube, h)
}

// done reports every Node's status and removes the record of the reboot.
func (r *rebootRun) done(ctx context.Context) error {
	admin, err := r.e.Admin(ctx)
	if err != nil {
		return err
	}
	if r.res.Nodes, err = nodeStatuses(ctx, admin); err != nil {
		return err
	}
	return r.st.Remove()
}
