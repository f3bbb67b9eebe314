package playbooks

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/network"
	"github.com/clusterctl/clusterctl/tasks/wait"
)

// startEarlyNetwork gives, in the background, the run's nodes their pod network before the network step,
// when the network can, while the workers' pushes end and their kubelets join: they turn Ready and CoreDNS
// starts on them meanwhile, and the network's DaemonSet is there when the workers register. An Early
// network does the nodes that have their pod range (the first control-plane node: the controller-manager
// allocates it when its node-ipam controller starts). Measured on a 1+2 lab with flannel, done in the
// join's wait for the signers it held the workers' kubelets back ~0.6 s. A Staged one does each node of the
// run on its own (stagedNetwork). The network step (earlyEnded) waits for it, then does the rest.
func (u *upRun) startEarlyNetwork(ctx context.Context, p *plan) {
	early, isEarly := p.net.(network.Early)
	staged, isStaged := p.net.(network.Staged)
	if !isEarly && !isStaged || u.o.DryRun || u.early != nil {
		return
	}
	actx, cancel := context.WithCancel(ctx)
	wctx, stop := context.WithCancel(actx)
	e := &earlyRun{done: make(chan error, 1), stop: stop, cancel: cancel}
	u.early = e
	go func() {
		if isStaged {
			e.done <- u.stagedNetwork(actx, p, staged, e)
		} else {
			e.done <- u.earlyNetwork(p, actx, wctx, early)
		}
	}()
}

// earlyNetwork waits (under wctx) until a node of the run has its range, then applies the network to the
// run's nodes that have one (under ctx: once begun, it ends).
func (u *upRun) earlyNetwork(p *plan, ctx, wctx context.Context, early network.Early) error {
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return err
	}
	var c *network.Cluster
	err = wait.Poll(wctx, wait.Options{Timeout: u.o.NodeTimeout, Interval: upPoll}, func() (bool, string, error) {
		list, err := admin.Kube.CoreV1().Nodes().List(wctx, metav1.ListOptions{})
		if err != nil {
			return false, "the list of Nodes", nil // the API server restarting: ask again
		}
		if c, err = u.networkCluster(wctx, p, list.Items, false); err != nil {
			return false, "", err
		}
		some := false
		for i := range c.Nodes {
			n := &c.Nodes[i]
			n.InRun = n.InRun && n.PodCIDR != ""
			some = some || n.InRun
		}
		return some, "a node's pod range", nil
	})
	if wctx.Err() != nil && ctx.Err() == nil {
		return nil // stopped: the network step does every node
	}
	if err != nil {
		return err
	}
	return early.ApplyEarly(ctx, u.networkEnv(), c)
}

// earlyEnded ends the early network's wait for a range, if it is still waiting, and waits for its apply,
// if begun (failed: cancels it); its error is the run's. It returns the nodes a staged network did.
func (u *upRun) earlyEnded(failed bool) (map[string]bool, error) {
	e := u.early
	if e == nil {
		return nil, nil
	}
	u.early = nil
	e.stop()
	if failed {
		e.cancel()
	}
	err := <-e.done
	e.cancel()
	return e.did, err
}

// network sets up the pod network (the run's plugin), once every node of the run is registered with its
// pod range when the plugin sets up nodes. The early network goes on meanwhile: this step's wait approves
// the kubelets' requests, which the nodes' ranges wait for.
func (u *upRun) network(ctx context.Context, p *plan) error {
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return err
	}
	var list []corev1.Node
	if len(p.net.Binaries()) > 0 { // it sets up nodes: with their ranges
		err = u.waitNodes(ctx, p, "network", func(byName map[string]*corev1.Node) (bool, string) {
			var missing []string
			for _, h := range p.nodes() {
				switch n := byName[h.NodeName]; {
				case n == nil:
					missing = append(missing, h.NodeName+" (not registered)")
				case n.Spec.PodCIDR == "":
					missing = append(missing, h.NodeName+" (no pod range)")
				}
			}
			return len(missing) == 0, "nodes: " + strings.Join(missing, ", ")
		})
		if err != nil {
			return err
		}
	}
	did, err := u.earlyEnded(false)
	if err != nil {
		return err
	}
	if len(p.net.Binaries()) > 0 {
		err = wait.Retry(ctx, u.o.NodeTimeout, "the list of Nodes", func() error {
			l, err := admin.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err == nil {
				list = l.Items
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	// A staged network's files on a node need no other node's range: the nodes outside the run (add-node,
	// up --limit) have nothing new, and are neither connected to nor asked their facts.
	_, staged := p.net.(network.Staged)
	c, err := u.networkCluster(ctx, p, list, !staged)
	if err != nil {
		return err
	}
	for i := range c.Nodes {
		c.Nodes[i].Done = did[c.Nodes[i].Host]
	}
	out, err := p.net.Apply(ctx, u.networkEnv(), c)
	u.res.SkippedRoutes = out.Skipped
	if err != nil || len(u.e.Inv.Cluster.NetworkAddons()) == 0 {
		return err
	}
	return u.networkAddon(ctx, p)
}

// stagedNetwork gives each node of the run, in the background of the join, its routes once its push has
// ended and its CNI configuration once its Node has its range (the first of them applies the network's
// objects), as one play of the network step's name: each node turns Ready as soon as it can, where the
// network step would wait for the last node's range before writing any. Measured on a 1+5 lab with
// flannel: each worker's routes script took 0.3-1.9 s before or beside its kubelet's start, and its
// configuration came 0.1-1.5 s after its Node registered (each Node Ready within 2 s of registering);
// in the network step, after the last range, the two had taken 3.5-6.3 s beside five kubelets starting
// their first Pods. The nodes done are marked in e for the network step.
func (u *upRun) stagedNetwork(ctx context.Context, p *plan, staged network.Staged, e *earlyRun) error {
	c, err := u.networkCluster(ctx, p, nil, false) // the run's nodes, with their addresses and facts
	if err != nil {
		return err
	}
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return err
	}
	env := u.networkEnv()
	var names []string
	for _, n := range c.Run() {
		names = append(names, n.Name)
	}
	ranges := watchRanges(ctx, admin.Kube, names, u.o.NodeTimeout)
	objects := sync.OnceValue(func() error { return staged.Objects(ctx, env, c) })
	byHost := map[string]network.Node{}
	for _, n := range c.Run() {
		byHost[n.Host] = n
	}
	return env.OnHosts(ctx, slices.Sorted(maps.Keys(byHost)), func(ctx context.Context, host string, h apply.Host) (apply.Outcome, error) {
		if !u.pushedHost(ctx, host) {
			return apply.Outcome{}, nil // its push failed or was cut short: the run ends with that error
		}
		n := byHost[host]
		out, err := staged.NodeRoutes(ctx, env, c, n, h)
		if err != nil {
			return out, err
		}
		node, err := ranges.wait(ctx, n.Name)
		if err != nil {
			return out, err
		}
		n.PodCIDR, n.PodCIDRs = node.Spec.PodCIDR, podCIDRs(node)
		if err := objects(); err != nil {
			return out, err
		}
		conf, err := staged.NodeConfig(ctx, c, n, h)
		out.Add(conf)
		if err == nil {
			e.markDone(host)
		}
		return out, err
	})
}

// pushedHost waits until a host's push has ended (at once for one pushed before the control plane
// started); false when it failed or ctx ended first.
func (u *upRun) pushedHost(ctx context.Context, host string) bool {
	l := u.later
	if l == nil || !slices.Contains(l.hosts, host) {
		return true
	}
	select {
	case <-l.ended:
		return l.result == nil
	case <-ctx.Done():
		return false
	}
}

// rangeWatch is one List of the Nodes every upPoll for the nodes waiting for their range (wait), until
// each has it or the node timeout passes.
type rangeWatch struct {
	ready map[string]chan struct{} // closed once the Node has its range (nodes holds it)
	nodes map[string]*corev1.Node
	mu    sync.Mutex
	ended chan struct{} // closed when the watch has ended; err is why, when some node has no range
	err   error
}

// watchRanges starts the watch of the named Nodes' ranges, for at most timeout.
func watchRanges(ctx context.Context, kube kubernetes.Interface, names []string, timeout time.Duration) *rangeWatch {
	w := &rangeWatch{ready: map[string]chan struct{}{}, nodes: map[string]*corev1.Node{}, ended: make(chan struct{})}
	for _, name := range names {
		w.ready[name] = make(chan struct{})
	}
	go func() {
		defer close(w.ended)
		w.err = wait.Poll(ctx, wait.Options{Timeout: timeout, Interval: upPoll}, func() (bool, string, error) {
			list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "the list of Nodes", nil // the API server restarting: ask again
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			for i := range list.Items {
				n := &list.Items[i]
				if ch := w.ready[n.Name]; ch != nil && w.nodes[n.Name] == nil && n.Spec.PodCIDR != "" {
					w.nodes[n.Name] = n
					close(ch)
				}
			}
			return len(w.nodes) == len(w.ready), "the nodes' pod ranges", nil
		})
	}()
	return w
}

// wait returns a node's Node once it has its range.
func (w *rangeWatch) wait(ctx context.Context, name string) (*corev1.Node, error) {
	select {
	case <-w.ready[name]:
	case <-w.ended:
		select {
		case <-w.ready[name]:
		default:
			return nil, fmt.Errorf("node %s: no pod range: %w", name, w.err)
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.nodes[name], nil
}
