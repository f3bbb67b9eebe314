package playbooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/pki"
)

// RemoveOptions tune remove-node.
type RemoveOptions struct {
	StateDir string
	// DrainTimeout bounds the eviction of a node's Pods (PodDisruptionBudgets are respected: an eviction
	// they refuse is retried until then).
	DrainTimeout time.Duration
}

// RemoveNode takes hosts out of the cluster one at a time: cordon, drain (evictions, which respect
// PodDisruptionBudgets; DaemonSet and static Pods stay), for a control-plane node its etcd member removed
// (refused if etcd would lose quorum), the Node deleted, then the host reset as `clusterctl reset` does. A
// host that cannot be reached is still removed from the cluster, and reported.
func RemoveNode(ctx context.Context, e *Env, names []string, o RemoveOptions) error {
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 2 * time.Minute
	}
	cps := e.Inv.ControlPlanes()
	if len(cps) == 0 {
		return errors.New("the inventory has no control-plane host")
	}
	cp1 := cps[0]
	var hosts []*inventory.Host
	for _, n := range names {
		h := e.Inv.Host(n)
		if h == nil {
			return fmt.Errorf("%s is not in the inventory", n)
		}
		if h == cp1 {
			return fmt.Errorf("%s is the first control-plane host of the inventory, through which clusterctl reaches the cluster: list another control-plane host first, then remove it", n)
		}
		hosts = append(hosts, h)
	}
	if _, err := Connect(ctx, e, []*inventory.Host{cp1}, 0); err != nil {
		return err
	}
	u := &up{e: e, o: UpOptions{StateDir: o.StateDir}, inv: e.Inv, cp1: cp1, res: &UpResult{}, nodeIPs: map[string]string{}}
	u.nodeIPs[cp1.Name] = cp1.InternalAddress
	if u.nodeIPs[cp1.Name] == "" {
		f, err := factsOf(ctx, e, cp1)
		if err != nil {
			return err
		}
		u.nodeIPs[cp1.Name] = NodeIP(cp1, f)
	}
	admin, err := pki.ReadSecret(filepath.Join(o.StateDir, "admin.conf"))
	if err != nil {
		return err
	}
	if u.admin, err = u.client(admin); err != nil {
		return err
	}
	for _, h := range hosts {
		if err := u.removeOne(ctx, h, o); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	return nil
}

func (u *up) removeOne(ctx context.Context, h *inventory.Host, o RemoveOptions) error {
	nodes := u.admin.Kube.CoreV1().Nodes()
	node, err := nodes.Get(ctx, h.NodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		node = nil
	case err != nil:
		return err
	}
	if node != nil && !node.Spec.Unschedulable {
		node.Spec.Unschedulable = true
		if _, err := nodes.Update(ctx, node, metav1.UpdateOptions{FieldManager: apiclient.FieldManager}); err != nil {
			return fmt.Errorf("cordon: %w", err)
		}
		u.say("remove-node", h.Name, "cordoned")
	}
	if node != nil {
		if err := u.drain(ctx, h, o.DrainTimeout); err != nil {
			return err
		}
	}
	if h.Has(inventory.RoleControlPlane) {
		ip := h.InternalAddress
		if ip == "" && node != nil {
			for _, a := range node.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					ip = a.Address
					break
				}
			}
		}
		ec, err := u.etcdClient()
		if err != nil {
			return err
		}
		removed, err := ec.Remove(ctx, "https://"+net.JoinHostPort(ip, strconv.Itoa(kubeadm.PortEtcdPeer)))
		ec.Close()
		if err != nil {
			return err
		}
		if removed {
			u.say("remove-node", h.Name, "etcd member removed")
		}
	}
	if node != nil {
		if err := nodes.Delete(ctx, h.NodeName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		u.say("remove-node", h.Name, "Node deleted")
	}
	// The host itself: as reset. A dead host is out of the cluster already; say so and go on.
	sub := &Env{Inv: u.e.Inv, Hosts: []*inventory.Host{h}, Dialer: u.e.Dialer, Forks: 1, Sink: u.e.Sink, Log: u.e.Log}
	defer sub.Close()
	results, err := Reset(ctx, sub, ResetOptions{StateDir: o.StateDir})
	for _, r := range results {
		if r.Err != nil {
			u.say("remove-node", h.Name, "could not reset the host (it is out of the cluster): %v", r.Err)
			return nil
		}
	}
	return err
}

// drain evicts the node's Pods but DaemonSet and static ones, retrying evictions a PodDisruptionBudget
// refuses, until they are gone or the timeout. Once the node is not Ready (a dead host: the node controller
// marks it so within its grace period, 40 s by default), evicted Pods are not waited for: its kubelet never
// confirms, and deleting the Node removes them.
func (u *up) drain(ctx context.Context, h *inventory.Host, timeout time.Duration) error {
	pods := u.admin.Kube.CoreV1().Pods("")
	err := u.poll(ctx, "remove-node", h.Name, timeout, func() (bool, string, error) {
		node, err := u.admin.Kube.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		ready := nodeReady(node)
		list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + h.NodeName})
		if err != nil {
			return false, "", err
		}
		var left []string
		for i := range list.Items {
			p := &list.Items[i]
			if daemon(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			if p.DeletionTimestamp != nil {
				// A dead node's kubelet never confirms: deleting the Node removes its Pods.
				if ready {
					left = append(left, p.Namespace+"/"+p.Name)
				}
				continue
			}
			left = append(left, p.Namespace+"/"+p.Name)
			ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
			err := u.admin.Kube.CoreV1().Pods(p.Namespace).EvictV1(ctx, ev)
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsTooManyRequests(err) {
				return false, "", fmt.Errorf("evicting %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
		return len(left) == 0, "Pods still on the node: " + strings.Join(left, ", "), nil
	})
	switch {
	case err == nil:
		u.say("remove-node", h.Name, "drained")
	case ctx.Err() == nil:
		err = fmt.Errorf("drain: %w (a PodDisruptionBudget may forbid their eviction)", err)
	}
	return err
}

// daemon reports whether a Pod stays on its node through a drain: DaemonSet Pods and static Pods.
func daemon(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

func factsOf(ctx context.Context, e *Env, h *inventory.Host) (*tasks.Facts, error) {
	return tasks.GatherFacts(ctx, e.Conn(h.Name), e.Inv.Cluster.ContainerRuntimeEndpoint)
}
