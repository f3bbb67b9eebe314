package playbooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/etcdmember"
	"github.com/clusterctl/clusterctl/tasks/hooks"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/reboot"
	"github.com/clusterctl/clusterctl/tasks/statedir"
	"github.com/clusterctl/clusterctl/transport"
)

// RebootOptions tune `clusterctl reboot`.
type RebootOptions struct {
	// MaxUnavailable is how many workers reboot at once (default 1); control-plane and etcd hosts always
	// reboot one at a time.
	MaxUnavailable int
	// IfNeeded reboots only the hosts that say they need it (/run/reboot-required, needs-restarting -r).
	IfNeeded bool
	// DrainTimeout bounds a node's drain (evictions a PodDisruptionBudget refuses are retried until then).
	DrainTimeout time.Duration
	// NodeTimeout bounds a host's return: SSH with a new boot, its Node Ready, its static Pods Ready, etcd
	// healthy on every member.
	NodeTimeout time.Duration
	DryRun      bool
	Now         func() time.Time
}

// RebootResult is what a reboot did, or in a dry run would do.
type RebootResult struct {
	Resumed bool `json:"resumed,omitempty"`
	// Order is the plan, in the order it runs: one line per host.
	Order []string `json:"order"`
	// Rebooted are the hosts rebooted, each with how long it took from the reboot to SSH with a new
	// boot, and to the node Ready (its static Pods and etcd too on a control-plane host) and uncordoned.
	Rebooted []RebootTiming `json:"rebooted"`
	// NotNeeded are the hosts --if-needed left alone: they did not ask for a reboot.
	NotNeeded []string      `json:"notNeeded,omitempty"`
	Phases    []PhaseTiming `json:"phases"`
	Nodes     []NodeStatus  `json:"nodes,omitempty"`
}

// RebootTiming is one host's reboot.
type RebootTiming struct {
	Name string `json:"name"`
	// Needs is why the host asked for it (--if-needed): reboot-required, needs-restarting.
	Needs string `json:"needs,omitempty"`
	// SSHMS is from the reboot command to SSH answering in the new boot; ReadyMS to everything the host
	// runs being Ready again.
	SSHMS   int64 `json:"sshMS"`
	ReadyMS int64 `json:"readyMS"`
}

// ErrRebootRefused is wrapped by the reasons a reboot refuses to start.
var ErrRebootRefused = errors.New("reboot refused")

// kindReboot is the kind of a reboot's journal: done "reboot/<host>"; current the hosts being rebooted.
const kindReboot = "reboot"

// rebootData is what a reboot keeps in its journal.
type rebootData struct {
	// Cordoned are the nodes the reboot cordoned (it uncordons those only).
	Cordoned []string `json:"cordoned,omitempty"`
	// BootIDs are the boot IDs of the hosts being rebooted, read before their reboot: another one means
	// the reboot happened (a resumed run waits for the host, it does not reboot it again).
	BootIDs map[string]string `json:"bootIDs,omitempty"`
	// Issued is when each host's reboot was asked for (Unix milliseconds).
	Issued map[string]int64 `json:"issued,omitempty"`
}

type rebootRun struct {
	e       *Env
	clients map[string]*apiclient.Client // clients of control-plane nodes' own API servers, by host
	o       RebootOptions
	res     *RebootResult
	st      *statedir.Journal[rebootData] // nil in a dry run
	state   map[string]reboot.State       // each host's state before its reboot
	todo    []*inventory.Host             // the run's hosts that reboot, in inventory order
}

// Reboot reboots the run's hosts (all of the inventory's, or --limit's) so that the cluster serves
// throughout: the control-plane and etcd hosts one at a time, then the workers MaxUnavailable at a time;
// each node cordoned, drained (PodDisruptionBudgets respected), the inventory's hooks.reboot.before run,
// rebooted, waited for (SSH in a new boot, its Node Ready with a lease renewed since, its static Pods
// running again and Ready, etcd healthy on every member), hooks.reboot.after, and uncordoned if the
// reboot cordoned it. It refuses a cluster that is not healthy before it starts. Each host is recorded in
// the state directory: the same command resumes a killed reboot, without rebooting a host twice.
func Reboot(ctx context.Context, e *Env, o RebootOptions) (*RebootResult, error) {
	if o.MaxUnavailable < 1 {
		o.MaxUnavailable = 1
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 5 * time.Minute
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &rebootRun{e: e, o: o, res: &RebootResult{Order: []string{}, Rebooted: []RebootTiming{}}, state: map[string]reboot.State{}, clients: map[string]*apiclient.Client{}}
	if err := r.loadState(); err != nil {
		return nil, err
	}
	var err error
	r.res.Phases, err = runSteps(ctx, runOptions{Sink: e.Sink, DryRun: o.DryRun}, r.steps())
	return r.res, err
}

func (r *rebootRun) steps() []Step {
	return []Step{
		// connect; each host's boot ID, and whether it asks for a reboot
		{Name: "connect", Run: r.connect, Dry: true},
		// every Node Ready, etcd healthy with every member: refuse before anything changes
		{Name: "check", Run: r.check, Dry: true},
		// what a dry run shows: the order
		{Name: "plan", Run: r.plan, Dry: true},
		// control-plane and etcd hosts one at a time, then workers in batches
		{Name: "reboot", Run: r.reboot},
		// every Node's status; the record of the reboot removed
		{Name: "done", Run: r.done},
	}
}

func (r *rebootRun) loadState() error {
	path := statedir.JournalPath(r.e.StateDir, kindReboot)
	st, err := statedir.OpenJournal[rebootData](path, kindReboot)
	if err != nil {
		return err
	}
	if st != nil {
		r.st, r.res.Resumed = st, true
		return nil
	}
	if !r.o.DryRun {
		r.st = statedir.NewJournal[rebootData](path, kindReboot, kindReboot, r.o.Now())
	}
	return nil
}

func (r *rebootRun) save(change func(*rebootData)) error {
	if r.st == nil {
		return nil
	}
	return r.st.Update(func(j *statedir.Journal[rebootData]) { change(&j.Data) })
}

func (r *rebootRun) journal() rebootData {
	var d rebootData
	if r.st != nil {
		r.st.View(func(j *statedir.Journal[rebootData]) {
			d.Cordoned = slices.Clone(j.Data.Cordoned)
			d.BootIDs, d.Issued = map[string]string{}, map[string]int64{}
			for k, v := range j.Data.BootIDs {
				d.BootIDs[k] = v
			}
			for k, v := range j.Data.Issued {
				d.Issued[k] = v
			}
		})
	}
	return d
}

func (r *rebootRun) isDone(h *inventory.Host) bool {
	return r.st != nil && r.st.IsDone("reboot/"+h.Name)
}

func (r *rebootRun) wasCurrent(h *inventory.Host) bool { return r.st != nil && r.st.IsCurrent(h.Name) }

// connect reaches every host of the run and reads its boot state; with --if-needed the hosts that do not
// ask for a reboot are left out (a host a killed run was rebooting is kept: it is finished).
func (r *rebootRun) connect(ctx context.Context) error {
	if _, err := Connect(ctx, r.e, r.e.Hosts, 0); err != nil {
		return err
	}
	for _, h := range r.e.Hosts {
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
		r.e.say("connect", "", "%d of %d hosts ask for a reboot", len(r.todo), len(r.e.Hosts))
	}
	return nil
}

// bootState asks a connected host its boot ID and whether it asks for a reboot.
func (r *rebootRun) bootState(ctx context.Context, h *inventory.Host) (reboot.State, error) {
	conn := r.e.Conn(h.Name)
	if conn == nil {
		return reboot.State{}, fmt.Errorf("%s: not connected", h.Name)
	}
	res, err := conn.Run(ctx, reboot.StateCommand, nil)
	if err != nil {
		return reboot.State{}, fmt.Errorf("%s: %w", h.Name, err)
	}
	s, err := reboot.ParseState(string(res.Stdout))
	if err != nil {
		return reboot.State{}, fmt.Errorf("%s: %w", h.Name, err)
	}
	return s, nil
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
			reasons = append(reasons, fmt.Sprintf("%s is not a Node of the cluster: join it first (clusterctl add-node %s), or leave it out of the inventory", h.Name, h.Name))
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
	r.e.say("check", "", "%d Nodes Ready, etcd healthy on %d members", len(list.Items), len(r.e.Inv.EtcdHosts()))
	return nil
}

// etcdUnhealthy lists what is wrong with etcd: a member that is not started, or whose host's member does
// not answer healthy (through that host's SSH connection). The hosts skip says are not asked (a host a
// killed run was rebooting: it is waited for).
func (r *rebootRun) etcdUnhealthy(ctx context.Context, skip func(*inventory.Host) bool) []string {
	var out []string
	hosts := r.e.Inv.EtcdHosts()
	for _, h := range hosts {
		if skip != nil && skip(h) {
			continue
		}
		c, err := r.e.etcdOn(ctx, h)
		if err != nil {
			out = append(out, fmt.Sprintf("%s's member does not answer (%s)", h.Name, firstLine(err.Error())))
			continue
		}
		s, err := c.Status(ctx)
		if err == nil && !s.Healthy {
			err = errors.New(strings.Join(s.Errors, "; "))
		}
		var members []etcdmember.Member
		if err == nil {
			members, err = c.List(ctx)
		}
		_ = c.Close()
		if err != nil {
			out = append(out, fmt.Sprintf("%s's member is not healthy (%s)", h.Name, firstLine(err.Error())))
			continue
		}
		var started int
		for _, m := range members {
			if m.Started && !m.Learner {
				started++
			}
		}
		if started < len(hosts) {
			out = append(out, fmt.Sprintf("%s's member sees %d started voting members of %d", h.Name, started, len(hosts)))
		}
	}
	return out
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

// hookWords is how the plan names the hooks a node runs inside its drain window at when ("" for none).
func (r *rebootRun) hookWords(h *inventory.Host, when string) string {
	var w string
	for _, hk := range r.e.Inv.HooksFor(h, inventory.HookReboot, when) {
		w += fmt.Sprintf("hook reboot.%s %q, ", when, hk.Run)
	}
	return w
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
			line += r.hookWords(h, "before") + "reboot, SSH in a new boot"
			switch {
			case h.Has(inventory.RoleControlPlane):
				line += ", Node Ready, static Pods Ready, etcd healthy on every member"
			case h.IsNode():
				line += ", Node Ready"
			default:
				line += ", etcd healthy on every member"
			}
			line += ", " + r.hookWords(h, "after")
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

func (r *rebootRun) reboot(ctx context.Context) error {
	for _, batch := range r.order() {
		if err := r.batch(ctx, batch); err != nil {
			return err
		}
	}
	return nil
}

// batch reboots hosts together: drain, hooks, reboot, wait, hooks, uncordon. A host that does not come
// back within NodeTimeout stops the run, named; the others of its batch are waited for and uncordoned.
func (r *rebootRun) batch(ctx context.Context, batch []*inventory.Host) error {
	if err := r.st.Begin(names(batch)...); err != nil {
		return err
	}
	// The hosts not rebooted yet (a resumed run finds a new boot ID on those it had rebooted).
	j := r.journal()
	var fresh []*inventory.Host
	for _, h := range batch {
		if old, ok := j.BootIDs[h.Name]; ok && old != r.state[h.Name].BootID {
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
	j = r.journal()
	var failed []string
	var back []*inventory.Host
	for _, h := range batch {
		issued := time.UnixMilli(j.Issued[h.Name])
		ssh, err := r.waitBoot(ctx, h, j.BootIDs[h.Name], issued)
		if err == nil {
			err = r.waitReady(ctx, h, issued)
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
		if err := r.st.MarkDone("reboot/"+h.Name, h.Name); err != nil {
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
	for _, h := range todo {
		n, err := admin.Kube.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		cordoned, err := nodes.Cordon(ctx, admin.Kube, n)
		if err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		if cordoned {
			r.e.say("reboot", h.Name, "cordoned")
			if err := r.save(func(d *rebootData) { d.Cordoned = append(d.Cordoned, h.NodeName) }); err != nil {
				return err
			}
		}
	}
	for _, h := range todo {
		err := r.e.poll(ctx, "reboot", h.Name, r.o.DrainTimeout, func() (bool, string, error) {
			left, err := nodes.DrainRound(ctx, admin.Kube, h.NodeName)
			return len(left) == 0, "Pods still on the node: " + strings.Join(left, ", "), err
		})
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			return fmt.Errorf("%s: drain: %w (a PodDisruptionBudget may forbid an eviction; the node stays cordoned, the cluster serves; the same command resumes)", h.Name, err)
		}
		r.e.say("reboot", h.Name, "drained")
	}
	return nil
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
	_, err := conn.Run(ctx, reboot.Command, nil)
	var ce *transport.CommandError
	if errors.As(err, &ce) && ce.ExitCode > 0 {
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.e.say("reboot", h.Name, "rebooting")
	r.forget(h.Name)
	return nil
}

// waitBoot waits for the host to answer SSH in a boot other than before, and returns how long after
// issued it did.
func (r *rebootRun) waitBoot(ctx context.Context, h *inventory.Host, before string, issued time.Time) (time.Duration, error) {
	var took time.Duration
	err := r.e.pollEvery(ctx, "reboot", h.Name, r.o.NodeTimeout, time.Second, func() (bool, string, error) {
		if r.e.Conn(h.Name) == nil {
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			c, err := r.e.Dialer.Dial(dctx, TargetFor(r.e.Inv, h))
			cancel()
			if err != nil {
				return false, "SSH (" + firstLine(err.Error()) + ")", nil
			}
			r.e.adopt(h.Name, c)
		}
		s, err := r.bootState(ctx, h)
		if err != nil {
			r.forget(h.Name)
			return false, "SSH (" + firstLine(err.Error()) + ")", nil
		}
		if s.BootID == before {
			r.forget(h.Name) // still the old boot, going down
			return false, "the host to go down", nil
		}
		took = r.o.Now().Sub(issued)
		return true, "", nil
	})
	if err != nil && ctx.Err() == nil {
		return 0, fmt.Errorf("%s did not come back within %s (--node-timeout): %w", h.Name, r.o.NodeTimeout, err)
	}
	if err == nil {
		r.e.say("reboot", h.Name, "back: SSH answers in a new boot %.1fs after the reboot", took.Seconds())
	}
	return took, err
}

// waitReady waits for what the host runs: its Node Ready with a lease renewed since the reboot; on a
// control-plane node its static Pods running since the reboot and Ready; on an etcd member's host, etcd
// healthy on every member.
func (r *rebootRun) waitReady(ctx context.Context, h *inventory.Host, issued time.Time) error {
	err := r.e.pollEvery(ctx, "reboot", h.Name, r.o.NodeTimeout, time.Second, func() (bool, string, error) {
		if h.IsNode() {
			admin, err := r.api(ctx, h)
			if err != nil {
				return false, "the API (" + firstLine(err.Error()) + ")", nil
			}
			if w := nodes.LeasesWaiting(ctx, admin.Kube, []string{h.NodeName}, issued); len(w) > 0 {
				return false, strings.Join(w, ", "), nil
			}
			n, err := admin.Kube.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
			if err != nil {
				return false, "the API (" + firstLine(err.Error()) + ")", nil
			}
			if !nodes.Ready(n) {
				return false, h.NodeName + " Ready", nil
			}
			if h.Has(inventory.RoleControlPlane) {
				if w := staticPodsSince(ctx, admin, h.NodeName, staticPods(r.e.Inv), issued); len(w) > 0 {
					return false, strings.Join(w, ", "), nil
				}
			}
		}
		if h.Has(inventory.RoleEtcd) || (h.Has(inventory.RoleControlPlane) && !r.e.Inv.ExternalEtcd()) {
			if w := r.etcdUnhealthy(ctx, nil); len(w) > 0 {
				return false, strings.Join(w, "; "), nil
			}
		}
		return true, "", nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s is back but not Ready within %s (--node-timeout): %w", h.Name, r.o.NodeTimeout, err)
	}
	return err
}

// api is a client of an API server that is not on the host being rebooted (avoid), when the cluster has
// another control-plane node; else the admin client, which answers again once that node is back.
func (r *rebootRun) api(ctx context.Context, avoid *inventory.Host) (*apiclient.Client, error) {
	if avoid != nil && avoid.Has(inventory.RoleControlPlane) {
		for _, h := range r.e.Inv.ControlPlanes() {
			if h == avoid {
				continue
			}
			if c := r.clients[h.Name]; c != nil {
				return c, nil
			}
			c, err := r.e.nodeClient(ctx, h)
			if err != nil {
				return nil, err
			}
			r.clients[h.Name] = c
			return c, nil
		}
	}
	return r.e.Admin(ctx)
}

// forget drops a host's connection and every client made through it.
func (r *rebootRun) forget(name string) {
	r.e.forget(name)
	delete(r.clients, name)
}

// staticPodsSince lists the node's control-plane mirror Pods that are not Ready with every container
// started since a time (after a reboot, a mirror Pod may show its old boot's status until the kubelet
// reports the new one).
func staticPodsSince(ctx context.Context, admin *apiclient.Client, node string, components []string, since time.Time) []string {
	var waiting []string
	for _, c := range components {
		p, err := admin.Kube.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, c+"-"+node, metav1.GetOptions{})
		if err != nil {
			waiting = append(waiting, c+" ("+firstLine(err.Error())+")")
			continue
		}
		started := len(p.Status.ContainerStatuses) > 0
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running == nil || cs.State.Running.StartedAt.Time.Before(since) {
				started = false
			}
		}
		if !started || !nodes.PodReady(p) {
			waiting = append(waiting, c+" running and Ready")
		}
	}
	return waiting
}

// uncordon makes a node the reboot cordoned schedulable again (a node cordoned before is left so).
func (r *rebootRun) uncordon(ctx context.Context, h *inventory.Host) error {
	if !h.IsNode() || !slices.Contains(r.journal().Cordoned, h.NodeName) {
		return nil
	}
	admin, err := r.api(ctx, nil)
	if err != nil {
		return err
	}
	changed, err := nodes.Uncordon(ctx, admin.Kube, h.NodeName)
	if err != nil {
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	if changed {
		r.e.say("reboot", h.Name, "uncordoned")
	}
	return r.save(func(d *rebootData) {
		d.Cordoned = slices.DeleteFunc(d.Cordoned, func(n string) bool { return n == h.NodeName })
	})
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
