package playbooks

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/csr"
	"github.com/clusterctl/clusterctl/tasks/etcdmember"
	"github.com/clusterctl/clusterctl/tasks/hooks"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/nodes"
)

// RemoveOptions tune remove-node.
type RemoveOptions struct {
	// DrainTimeout bounds the eviction of a node's Pods (PodDisruptionBudgets are respected: an eviction
	// they refuse is retried until then).
	DrainTimeout time.Duration
	// DryRun changes nothing: Record gets, per host, what the removal would do (read from the cluster,
	// etcd and the host).
	DryRun bool
	Record func(host, action string)
}

// RemoveNode takes hosts out of the cluster one at a time: cordon, drain (evictions, which respect
// PodDisruptionBudgets; DaemonSet and static Pods stay), for a control-plane node its etcd member removed
// (refused if etcd would lose quorum), the Node deleted, then the host reset as `clusterctl reset` does. A
// host that cannot be reached is still removed from the cluster, and reported.
func RemoveNode(ctx context.Context, e *Env, hostNames []string, o RemoveOptions) error {
	orDefault(&o.DrainTimeout, defaultWait)
	cp1, err := e.firstControlPlane()
	if err != nil {
		return err
	}
	var hosts []*inventory.Host
	for _, n := range hostNames {
		h := e.Inv.Host(n)
		if h == nil {
			return fmt.Errorf("%s is not in the inventory", n)
		}
		if h == cp1 {
			return fmt.Errorf("%s is the first control-plane host of the inventory, through which clusterctl reaches the cluster: list another control-plane host first, then remove it", n)
		}
		hosts = append(hosts, h)
	}
	admin, err := e.Admin(ctx)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		r := &removal{e: e, o: o, h: h, admin: admin}
		if o.DryRun {
			if err := r.plan(ctx); err != nil {
				return fmt.Errorf("%s: %w", h.Name, err)
			}
			continue
		}
		if _, err := runSteps(ctx, runOptions{Sink: e.Sink}, nil, r.steps()); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	return nil
}

// removal is the removal of one host.
type removal struct {
	e     *Env
	o     RemoveOptions
	h     *inventory.Host
	admin *apiclient.Client
	node  *corev1.Node // nil: not a Node (never joined, or deleted by an earlier run)
	// wasReset: the reset step reset the host.
	wasReset bool
}

// steps are a host's removal, in order. A removal killed half-way is finished by running it again: each step
// finds what is left of its work (the Node, the member, the host's files).
func (r *removal) steps() []Step {
	return []Step{
		// hooks.removeNode.before on the host, when it can be reached
		{Name: "hooks-before", Run: do(r.hooks("before"))},
		{Name: "cordon", Run: do(r.cordon)},
		{Name: "drain", Run: do(r.drain), Skip: unless(r.notANode)},
		{Name: "etcd-member", Run: do(r.removeMember), Skip: unless(r.notEtcdMember)},
		{Name: "delete-node", Run: do(r.deleteNode), Skip: unless(r.notANode)},
		{Name: "reset", Run: do(r.reset)},
		// hooks.removeNode.after on the host, when it was reset
		{Name: "hooks-after", Run: do(r.hooks("after")), Skip: unless(r.notReset)},
	}
}

func (r *removal) cordon(ctx context.Context) error {
	node, err := r.admin.Kube.CoreV1().Nodes().Get(ctx, r.h.NodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	r.node = node
	cordoned, err := nodes.Cordon(ctx, r.admin.Kube, node)
	if cordoned {
		r.e.say("remove-node", r.h.Name, "cordoned")
	}
	return err
}

func (r *removal) notANode() string {
	if r.node == nil {
		return r.h.NodeName + " is not a Node of the cluster"
	}
	return ""
}

func (r *removal) notEtcdMember() string {
	switch {
	case r.e.Inv.ExternalEtcd() && !r.h.Has(inventory.RoleEtcd):
		return "not an etcd host"
	case !r.e.Inv.ExternalEtcd() && !r.h.Has(inventory.RoleControlPlane):
		return "not a control-plane host"
	}
	return ""
}

// drain evicts the node's Pods but DaemonSet and static ones, retrying evictions a PodDisruptionBudget
// refuses, until they are gone or the timeout (see nodes.DrainRound).
func (r *removal) drain(ctx context.Context) error {
	err := r.e.drainNode(ctx, r.admin.Kube, "remove-node", r.h, r.o.DrainTimeout)
	switch {
	case err == nil:
		r.e.say("remove-node", r.h.Name, "drained")
	case ctx.Err() == nil:
		err = fmt.Errorf("drain: %w (a PodDisruptionBudget may forbid their eviction)", err)
	}
	return err
}

// removeMember removes the host's etcd member, through another member (etcdmember refuses if etcd would
// lose quorum).
func (r *removal) removeMember(ctx context.Context) error {
	peer, ec, err := r.etcdOfOthers(ctx)
	if err != nil {
		return err
	}
	defer ec.Close()
	removed, err := ec.Remove(ctx, peer)
	if removed {
		r.e.say("remove-node", r.h.Name, "etcd member removed")
	}
	return err
}

// etcdOfOthers is the host's etcd peer URL and a client of etcd through another member; the caller
// closes it.
func (r *removal) etcdOfOthers(ctx context.Context) (string, *etcdmember.Client, error) {
	peer, err := r.peer()
	if err != nil {
		return "", nil, err
	}
	ec, err := r.e.etcdExcept(ctx, r.h)
	return peer, ec, err
}

// peer is the host's etcd peer URL: its internalAddress, else its Node's, else its address.
func (r *removal) peer() (string, error) {
	var learned inventory.NodeAddrs
	if r.node != nil {
		learned = inventory.ParseNodeAddrs(nodes.InternalIP(r.node))
	}
	ip := inventory.AddrText(r.h.NodeIP(learned))
	if ip == "" && net.ParseIP(r.h.Address) != nil {
		ip = r.h.Address
	}
	if ip == "" {
		return "", fmt.Errorf("cannot tell %s's etcd peer address: set its internalAddress in the inventory", r.h.Name)
	}
	return kubeadm.EtcdPeerURL(ip), nil
}

func (r *removal) deleteNode(ctx context.Context) error {
	if err := r.admin.Kube.CoreV1().Nodes().Delete(ctx, r.h.NodeName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	r.e.say("remove-node", r.h.Name, "Node deleted")
	// Its addresses are no longer its own: a host that gets them next may have them.
	learned, err := csr.LoadLearned(r.e.StateDir)
	if err != nil || !learned.Forget(r.h.Name) {
		return err
	}
	return learned.Save(r.e.StateDir)
}

// reset resets the host as reset does. A dead host is out of the cluster already: say so and go on.
func (r *removal) reset(ctx context.Context) error {
	results, err := Reset(ctx, r.e, ResetOptions{Hosts: []*inventory.Host{r.h}})
	for _, res := range results {
		if res.Err != nil {
			r.e.say("remove-node", r.h.Name, "could not reset the host (it is out of the cluster): %v", res.Err)
			return nil
		}
	}
	r.wasReset = err == nil
	return err
}

// plan records, through o.Record, what a removal of the host would do, reading the cluster and the host and
// changing neither.
func (r *removal) plan(ctx context.Context) error {
	say := func(format string, a ...any) { r.o.Record(r.h.Name, fmt.Sprintf(format, a...)) }
	dryHooks := func(when string) error {
		return r.e.runHooks(ctx, hooks.Point{Command: inventory.HookRemoveNode, When: when}, []*inventory.Host{r.h}, true, r.o.Record)
	}
	if err := dryHooks("before"); err != nil {
		return err
	}
	node, err := r.admin.Kube.CoreV1().Nodes().Get(ctx, r.h.NodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		say("%s is not a Node of the cluster: no cordon, drain or delete", r.h.NodeName)
	case err != nil:
		return err
	default:
		r.node = node
		pods, err := nodes.Evictable(ctx, r.admin.Kube, r.h.NodeName)
		if err != nil {
			return err
		}
		say("cordon %s", r.h.NodeName)
		if len(pods) == 0 {
			say("drain: no Pod to evict")
		} else {
			say("drain: evict %d Pod(s) (PodDisruptionBudgets respected, up to %s): %s", len(pods), r.o.DrainTimeout, strings.Join(pods, ", "))
		}
	}
	if r.notEtcdMember() == "" {
		peer, ec, err := r.etcdOfOthers(ctx)
		if err != nil {
			return err
		}
		defer ec.Close()
		m, err := ec.CanRemove(ctx, peer)
		switch {
		case err != nil:
			return err
		case m == nil:
			say("no etcd member at %s: nothing to remove", peer)
		default:
			say("remove etcd member %s (%s) through another member; quorum is kept", m.Name, peer)
		}
	}
	if r.node != nil {
		say("delete Node %s", r.h.NodeName)
	}
	if _, err := Reset(ctx, r.e, ResetOptions{Hosts: []*inventory.Host{r.h}, DryRun: true, Record: func(_, a string) { say("reset: %s", a) }}); err != nil {
		say("reset: %v (the host is removed from the cluster all the same)", err)
	}
	return dryHooks("after")
}

func (r *removal) notReset() string {
	if !r.wasReset {
		return "the host was not reset"
	}
	return ""
}

// hooks runs the inventory's hooks of remove-node at when on the host; a host that cannot be reached (it
// is removed from the cluster all the same) runs none, and that is said.
func (r *removal) hooks(when string) func(context.Context) error {
	return func(ctx context.Context) error {
		p := hooks.Point{Command: inventory.HookRemoveNode, When: when}
		if len(r.e.Inv.HooksFor(r.h, p.Command, p.When)) == 0 {
			return nil
		}
		if res, _ := Connect(ctx, r.e, []*inventory.Host{r.h}, 1); len(res) == 1 && res[0].Err != nil {
			r.e.say("remove-node", r.h.Name, "hooks %s not run: the host cannot be reached", p)
			return nil
		}
		return r.e.runHooks(ctx, p, []*inventory.Host{r.h}, false, nil)
	}
}
