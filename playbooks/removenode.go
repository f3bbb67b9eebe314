package playbooks

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/hooks"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/nodes"
)

// RemoveOptions tune remove-node.
type RemoveOptions struct {
	// DrainTimeout bounds the eviction of a node's Pods (PodDisruptionBudgets are respected: an eviction
	// they refuse is retried until then).
	DrainTimeout time.Duration
}

// RemoveNode takes hosts out of the cluster one at a time: cordon, drain (evictions, which respect
// PodDisruptionBudgets; DaemonSet and static Pods stay), for a control-plane node its etcd member removed
// (refused if etcd would lose quorum), the Node deleted, then the host reset as `clusterctl reset` does. A
// host that cannot be reached is still removed from the cluster, and reported.
func RemoveNode(ctx context.Context, e *Env, hostNames []string, o RemoveOptions) error {
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 2 * time.Minute
	}
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
		steps := []Step{
			// hooks.removeNode.before on the host, when it can be reached
			{Name: "hooks-before", Run: r.hooks("before")},
			{Name: "cordon", Run: r.cordon},
			{Name: "drain", Run: r.drain, Skip: r.notANode},
			{Name: "etcd-member", Run: r.removeMember, Skip: r.notEtcdMember},
			{Name: "delete-node", Run: r.deleteNode, Skip: r.notANode},
			{Name: "reset", Run: r.reset},
			// hooks.removeNode.after on the host, when it was reset
			{Name: "hooks-after", Run: r.hooks("after"), Skip: r.notReset},
		}
		if _, err := runSteps(ctx, runOptions{Sink: e.Sink}, steps); err != nil {
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
	err := r.e.poll(ctx, "remove-node", r.h.Name, r.o.DrainTimeout, func() (bool, string, error) {
		left, err := nodes.DrainRound(ctx, r.admin.Kube, r.h.NodeName)
		return len(left) == 0, "Pods still on the node: " + strings.Join(left, ", "), err
	})
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
	ip := r.h.InternalAddress
	if ip == "" && r.node != nil {
		ip = nodes.InternalIP(r.node)
	}
	if ip == "" && net.ParseIP(r.h.Address) != nil {
		ip = r.h.Address
	}
	if ip == "" {
		return fmt.Errorf("cannot tell %s's etcd peer address: set its internalAddress in the inventory", r.h.Name)
	}
	ec, err := r.e.etcdExcept(ctx, r.h)
	if err != nil {
		return err
	}
	defer ec.Close()
	removed, err := ec.Remove(ctx, "https://"+net.JoinHostPort(ip, strconv.Itoa(kubeadm.PortEtcdPeer)))
	if removed {
		r.e.say("remove-node", r.h.Name, "etcd member removed")
	}
	return err
}

func (r *removal) deleteNode(ctx context.Context) error {
	if err := r.admin.Kube.CoreV1().Nodes().Delete(ctx, r.h.NodeName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	r.e.say("remove-node", r.h.Name, "Node deleted")
	return nil
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
