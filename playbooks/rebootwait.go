package playbooks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/etcdmember"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/reboot"
)

// What the reboot waits for, and asks, of a host that reboots: SSH in a new boot, then its Node Ready,
// its static Pods running since, and etcd healthy on every member.

// waitBoot waits for the host to answer SSH in a boot other than before, and returns how long after
// issued it did and the new boot's ID.
func (r *rebootRun) waitBoot(ctx context.Context, h *inventory.Host, before string, issued time.Time) (time.Duration, string, error) {
	var took time.Duration
	var boot string
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
		took, boot = r.o.Now().Sub(issued), s.BootID
		return true, "", nil
	})
	if err != nil && ctx.Err() == nil {
		return 0, "", fmt.Errorf("%s did not come back within %s (--node-timeout): %w", h.Name, r.o.NodeTimeout, err)
	}
	if err == nil {
		r.e.say("reboot", h.Name, "back: SSH answers in a new boot %.1fs after the reboot", took.Seconds())
	}
	return took, boot, err
}

// waitReady waits for what the host runs: its Node Ready by a status its kubelet posted in the new boot
// (boot: the kubelet reports the host's boot ID with every status, so no clocks are compared); on a
// control-plane node its static Pods running since the reboot and Ready; on an etcd member's host, etcd
// healthy on every member.
func (r *rebootRun) waitReady(ctx context.Context, h *inventory.Host, issued time.Time, boot string) error {
	err := r.e.pollEvery(ctx, "reboot", h.Name, r.o.NodeTimeout, time.Second, func() (bool, string, error) {
		if h.IsNode() {
			admin, err := r.api(ctx, h)
			if err != nil {
				return false, "the API (" + firstLine(err.Error()) + ")", nil
			}
			n, err := admin.Kube.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
			if err != nil {
				return false, "the API (" + firstLine(err.Error()) + ")", nil
			}
			if n.Status.NodeInfo.BootID != boot {
				// The status is the previous boot's: Ready there says nothing of this one, whose kubelet
				// may report NotReady first.
				return false, h.NodeName + "'s kubelet to report from the new boot", nil
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

// etcdUnhealthy lists what is wrong with etcd: a member that is not started, or whose host's member does
// not answer healthy (through that host's SSH connection). The hosts skip says are not asked (a host a
// killed run was rebooting: it is waited for).
func (r *rebootRun) etcdUnhealthy(ctx context.Context, skip func(*inventory.Host) bool) []string {
	var out []string
	hosts := r.etcdHosts()
	for _, h := range hosts {
		if skip != nil && skip(h) {
			continue
		}
		c, err := r.etcdClient(ctx, h)
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
		if err != nil {
			r.dropEtcd(h.Name) // asked again through a new client
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

// etcdHosts are the inventory's etcd hosts that are part of the cluster: a control-plane host not joined
// yet has no member.
func (r *rebootRun) etcdHosts() []*inventory.Host {
	var out []*inventory.Host
	for _, h := range r.e.Inv.EtcdHosts() {
		if !r.notJoined[h.Name] {
			out = append(out, h)
		}
	}
	return out
}

// etcdClient is a client of the member on h, made once and kept until its host is forgotten.
func (r *rebootRun) etcdClient(ctx context.Context, h *inventory.Host) (*etcdmember.Client, error) {
	if c := r.etcd[h.Name]; c != nil {
		return c, nil
	}
	c, err := r.e.etcdOn(ctx, h)
	if err != nil {
		return nil, err
	}
	r.etcd[h.Name] = c
	return c, nil
}

// dropEtcd closes the client of the member on a host, if any.
func (r *rebootRun) dropEtcd(name string) {
	if c := r.etcd[name]; c != nil {
		_ = c.Close()
		delete(r.etcd, name)
	}
}

// closeEtcd closes every etcd client at the end of the run.
func (r *rebootRun) closeEtcd() {
	for name := range r.etcd {
		r.dropEtcd(name)
	}
}

// bootState asks a connected host its boot ID and whether it asks for a reboot.
func (r *rebootRun) bootState(ctx context.Context, h *inventory.Host) (reboot.State, error) {
	conn := r.e.Conn(h.Name)
	if conn == nil {
		return reboot.State{}, fmt.Errorf("%s: not connected", h.Name)
	}
	return reboot.ReadState(ctx, conn)
}

// api is a client of an API server that is not on the host being rebooted (avoid), when the cluster has
// another control-plane node; else the admin client, which answers again once that node is back.
func (r *rebootRun) api(ctx context.Context, avoid *inventory.Host) (*apiclient.Client, error) {
	if avoid != nil && avoid.Has(inventory.RoleControlPlane) {
		for _, h := range r.e.Inv.ControlPlanes() {
			if h == avoid || r.notJoined[h.Name] {
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
	r.dropEtcd(name)
	r.e.forget(name)
	delete(r.clients, name)
}
