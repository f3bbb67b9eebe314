package playbooks

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/nodes"
)

// Rolling kubelet restarts: what a rotation does to every kubelet (a new trust bundle, client or serving
// certificate), a batch of nodes at a time, so that a workload spread over nodes keeps a ready endpoint.

// A kubeletRoll is what rollKubelets does on each host.
type kubeletRoll struct {
	// need, when set, says whether a host's kubelet is to restart (read on the host, every host at once
	// before the first batch): the batches are made of those that are, and no other host's Pods are
	// listed. Unset: every host's.
	need func(ctx context.Context, name string) (bool, error)
	// restart restarts a host's kubelet, or leaves it alone, and returns when it restarted it, by the
	// host's clock (zero: it did not).
	restart func(ctx context.Context, name string) (time.Time, error)
	// each, when set, runs at every check of the waits (the approval of the serving certificates restarted
	// kubelets request).
	each func(context.Context) error
}

// rollKubelets runs r.restart on hosts a batch at a time: control-plane nodes one at a time, then the
// others d.o.KubeletBatch at a time (at least one). After each batch it waits until every kubelet it
// restarted has its Node Ready by a status posted since, and the Pods that were Ready on that node before
// are Ready again by that kubelet's word (nodes.NotReadyAgain: a restarted kubelet reports containers with a
// readiness probe NotReady until their first probe).
func (d *deployment) rollKubelets(ctx context.Context, play string, hosts []string, r kubeletRoll) error {
	if r.need != nil {
		var err error
		if hosts, err = d.kubeletsToRestart(ctx, play, hosts, r.need); err != nil {
			return err
		}
	}
	var admin *apiclient.Client
	for _, batch := range d.kubeletBatches(hosts) {
		if admin == nil {
			var err error
			if admin, err = d.e.Admin(ctx); err != nil {
				return err
			}
		}
		before := map[string][]nodes.ReadyPod{}
		for _, name := range batch {
			node := d.e.Inv.Host(name).NodeName
			pods, err := nodes.PodsOn(ctx, admin.Kube, node)
			if err != nil {
				return fmt.Errorf("the Pods of %s, before its kubelet restarts: %w", node, err)
			}
			before[name] = nodes.ReadyPods(pods)
		}
		var mu sync.Mutex
		started := map[string]time.Time{}
		if _, err := d.e.play(ctx, Play{Name: play, Hosts: batch, Run: func(ctx context.Context, name string) (bool, error) {
			at, err := r.restart(ctx, name)
			if err == nil && !at.IsZero() {
				mu.Lock()
				started[name] = at
				mu.Unlock()
			}
			return !at.IsZero(), err
		}}); err != nil {
			return err
		}
		if err := d.kubeletsBack(ctx, play, admin, started, before, r.each); err != nil {
			return err
		}
	}
	return nil
}

// kubeletsToRestart are the hosts, in their order, whose kubelet need says is to restart, asked of every
// host at once.
func (d *deployment) kubeletsToRestart(ctx context.Context, play string, hosts []string, need func(ctx context.Context, name string) (bool, error)) ([]string, error) {
	var mu sync.Mutex
	needs := map[string]bool{}
	if _, err := d.e.play(ctx, Play{Name: play, Hosts: hosts, Quiet: true, Run: func(ctx context.Context, name string) (bool, error) {
		ok, err := need(ctx, name)
		mu.Lock()
		needs[name] = ok
		mu.Unlock()
		return false, err
	}}); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(slices.Clone(hosts), func(name string) bool { return !needs[name] }), nil
}

// podsBefore are the Pods Ready on a control-plane node but its static ones (CoreDNS tolerates the
// control-plane taint; an untainted node runs workloads), listed when its kubelet runs and is to restart
// (its files changed): cpRoll waits for them Ready again (podsBack) before it goes on, as rollKubelets does
// between workers.
func (d *deployment) podsBefore(ctx context.Context, p *plan, play string, h *inventory.Host) []nodes.ReadyPod {
	if f := p.facts[h.Name]; d.o.DryRun || f == nil || !f.KubeletActive || !d.restartPending(h.Name) {
		return nil
	}
	admin, err := d.e.Admin(ctx)
	if err == nil {
		var pods []corev1.Pod
		if pods, err = nodes.PodsOn(ctx, admin.Kube, h.NodeName); err == nil {
			return nodes.ReadyPods(slices.DeleteFunc(pods, nodes.Mirror))
		}
	}
	d.e.say(play, h.Name, "the Pods of %s not listed before its kubelet restarts, not waited for after (%s)", h.NodeName, firstLine(err.Error()))
	return nil
}

// podsBack waits until a control-plane node's kubelet, restarted, has its Node Ready by a status posted
// since, and the Pods Ready on it before (podsBefore) are Ready again by its word.
func (d *deployment) podsBack(ctx context.Context, play string, h *inventory.Host, before []nodes.ReadyPod) error {
	started := d.started(h.Name)
	if len(before) == 0 || started.IsZero() {
		return nil
	}
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return err
	}
	return d.kubeletsBack(ctx, play, admin, map[string]time.Time{h.Name: started}, map[string][]nodes.ReadyPod{h.Name: before}, nil)
}

// kubeletBatches are hosts in the order their kubelets restart: control-plane nodes alone, in the order
// given, then the others d.o.KubeletBatch at a time.
func (d *deployment) kubeletBatches(hosts []string) [][]string {
	var out [][]string
	var others []string
	for _, name := range hosts {
		if d.e.Inv.Host(name).Has(inventory.RoleControlPlane) {
			out = append(out, []string{name})
		} else {
			others = append(others, name)
		}
	}
	return append(out, slices.Collect(slices.Chunk(others, max(d.o.KubeletBatch, 1)))...)
}

// kubeletsBack waits until each host's kubelet restarted at started has its Node Ready by a status posted
// since, and the Pods Ready on it before (before) are Ready again by that kubelet's word.
func (d *deployment) kubeletsBack(ctx context.Context, play string, admin *apiclient.Client, started map[string]time.Time, before map[string][]nodes.ReadyPod, each func(context.Context) error) error {
	if len(started) == 0 {
		return nil
	}
	var names, nodeNames []string
	for name := range started {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		nodeNames = append(nodeNames, d.e.Inv.Host(name).NodeName)
	}
	begin := time.Now()
	readyAt := map[string]time.Time{} // by the workstation's clock: when the Node was seen Ready from the restarted kubelet
	timeout := d.o.KubeletTimeout
	if timeout == 0 {
		timeout = d.o.Timeout
	}
	err := d.e.pollEvery(ctx, play, "", timeout, 500*time.Millisecond, func() (bool, string, error) {
		if each != nil {
			if err := each(ctx); err != nil {
				return false, "", err
			}
		}
		var waiting []string
		for i, name := range names {
			node := nodeNames[i]
			if readyAt[name].IsZero() {
				n, err := admin.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
				if err != nil {
					waiting = append(waiting, "Node "+node+" ("+firstLine(err.Error())+")")
					continue
				}
				if !nodes.ReadySince(n, started[name]) {
					waiting = append(waiting, node+"'s restarted kubelet to report its Node Ready")
					continue
				}
				readyAt[name] = time.Now()
			}
			pods, err := nodes.PodsOn(ctx, admin.Kube, node)
			if err != nil {
				waiting = append(waiting, "the Pods of "+node+" ("+firstLine(err.Error())+")")
				continue
			}
			if w := nodes.NotReadyAgain(before[name], pods, started[name], time.Since(readyAt[name])); len(w) > 0 {
				waiting = append(waiting, "Pods of "+node+" Ready again: "+strings.Join(w, ", "))
			}
		}
		return len(waiting) == 0, strings.Join(waiting, "; "), nil
	})
	if err != nil {
		if ctx.Err() == nil {
			err = fmt.Errorf("after restarting the kubelet of %s (the next restarts wait for its Node and the Pods Ready on it before; --node-timeout): %w", strings.Join(nodeNames, ", "), err)
		}
		return err
	}
	d.e.say(play, "", "kubelet of %s restarted: its Node and the %d Pods Ready on it before are Ready again (%.1fs)", strings.Join(nodeNames, ", "), podCount(before, names), time.Since(begin).Seconds())
	return nil
}

func podCount(before map[string][]nodes.ReadyPod, names []string) int {
	n := 0
	for _, name := range names {
		n += len(before[name])
	}
	return n
}

// renewServing has the kubelets of hosts whose serving certificate is stale request a new one (stale is
// given nil for a node that has none): the current one is removed and the kubelet restarted, a rolling
// restart (rollKubelets) whose waits approve the requests after csr.CheckServing; the wait ends when each
// node's new certificate is issued and its Node is Ready again.
func (d *deployment) renewServing(ctx context.Context, play string, hosts []string, stale func(*x509.Certificate) bool) ([]string, error) {
	since := time.Now().Add(-time.Second)
	var mu sync.Mutex
	var renewing []string
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return nil, err
	}
	d.approver.Kube = admin.Kube
	approve := func(ctx context.Context) error {
		_, err := d.approver.Round(ctx)
		return err
	}
	err = d.rollKubelets(ctx, play, hosts, kubeletRoll{
		need: func(ctx context.Context, name string) (bool, error) {
			cur, err := apply.ReadCert(ctx, d.e.Conn(name), kubeadm.KubeletServerCurrent)
			return err == nil && stale(cur), err
		},
		restart: func(ctx context.Context, name string) (time.Time, error) {
			at, err := apply.RenewServing(ctx, d.e.Conn(name))
			if err != nil {
				return at, err
			}
			mu.Lock()
			renewing = append(renewing, d.e.Inv.Host(name).NodeName)
			mu.Unlock()
			return at, nil
		},
		each: approve,
	})
	if err != nil || len(renewing) == 0 {
		return renewing, err
	}
	slices.Sort(renewing)
	return renewing, d.e.poll(ctx, play, "", d.o.Timeout, func() (bool, string, error) {
		list, err := d.approver.Round(ctx)
		if err != nil {
			return false, "", err
		}
		issued := map[string]bool{}
		for _, c := range list {
			if c.CreationTimestamp.After(since) && len(c.Status.Certificate) > 0 {
				issued[strings.TrimPrefix(c.Spec.Username, "system:node:")] = true
			}
		}
		var waiting []string
		for _, n := range renewing {
			if !issued[n] {
				waiting = append(waiting, n)
			}
		}
		return len(waiting) == 0, "the serving certificates of " + strings.Join(waiting, ", "), nil
	})
}
