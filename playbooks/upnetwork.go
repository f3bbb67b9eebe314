package playbooks

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/network"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/wait"
)

// startEarlyNetwork gives, in the background, the run's nodes that have their pod range (the first
// control-plane node: the controller-manager allocates it when its node-ipam controller starts) their pod
// network, when the network can (network.Early), while the workers' pushes end and their kubelets join:
// they turn Ready and CoreDNS starts on them meanwhile, and flanneld's DaemonSet is there when the workers
// register. Measured on a 1+2 lab with flannel, done in the join's wait for the signers it held the
// workers' kubelets back ~0.6 s. The network step (earlyEnded) waits for it, then does every node.
func (u *upRun) startEarlyNetwork(ctx context.Context, p *plan) {
	early, ok := p.net.(network.Early)
	if !ok || u.o.DryRun || u.early != nil {
		return
	}
	actx, cancel := context.WithCancel(ctx)
	wctx, stop := context.WithCancel(actx)
	e := &earlyRun{done: make(chan error, 1), stop: stop, cancel: cancel}
	u.early = e
	go func() { e.done <- u.earlyNetwork(p, actx, wctx, early) }()
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
// if begun (failed: cancels it); its error is the run's.
func (u *upRun) earlyEnded(failed bool) error {
	e := u.early
	if e == nil {
		return nil
	}
	u.early = nil
	e.stop()
	if failed {
		e.cancel()
	}
	err := <-e.done
	e.cancel()
	return err
}

// network sets up the pod network (the run's plugin), once every node of the run is registered with its
// pod range when the plugin sets up nodes.
func (u *upRun) network(ctx context.Context, p *plan) error {
	if err := u.earlyEnded(false); err != nil {
		return err
	}
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
	c, err := u.networkCluster(ctx, p, list, true)
	if err != nil {
		return err
	}
	out, err := p.net.Apply(ctx, u.networkEnv(), c)
	u.res.SkippedRoutes = out.Skipped
	if err != nil || len(u.e.Inv.Cluster.NetworkAddons()) == 0 {
		return err
	}
	return u.networkAddon(ctx, p)
}

// networkCluster is the cluster as the network step sees it: the run's nodes, and with others the
// inventory's other nodes that are the cluster's (connected: they get their routes), each with its Node's
// range and address; the cluster's Nodes that are no host of the inventory by name.
func (u *upRun) networkCluster(ctx context.Context, p *plan, list []corev1.Node, others bool) (*network.Cluster, error) {
	c := &network.Cluster{Inv: u.e.Inv, Images: p.images, Unknown: map[string][]string{}}
	if p.rendered != nil {
		c.APIEndpoint = p.rendered.NodeEndpoint
	}
	byName := map[string]*corev1.Node{}
	for i := range list {
		byName[list[i].Name] = &list[i]
	}
	run := p.nodes()
	hosts := slices.Clone(run)
	var rest []*inventory.Host
	for i := range u.e.Inv.Hosts {
		if h := &u.e.Inv.Hosts[i]; others && byName[h.NodeName] != nil && !slices.Contains(run, h) {
			rest = append(rest, h)
		}
	}
	restFacts, err := u.otherFacts(ctx, rest)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, h := range append(hosts, rest...) {
		ips, err := u.e.NodeIPs(ctx, h)
		if err != nil {
			return nil, err
		}
		f := p.facts[h.Name]
		if f == nil {
			f = restFacts[h.Name]
		}
		n := network.Node{Host: h.Name, Name: h.NodeName, IP: ips[0].String(), IPs: ips.Strings(), InRun: slices.Contains(run, h), Facts: f}
		if obj := byName[h.NodeName]; obj != nil {
			n.PodCIDR, n.Reported = obj.Spec.PodCIDR, nodes.InternalIP(obj)
			n.PodCIDRs, n.ReportedIPs = podCIDRs(obj), nodes.InternalIPs(obj)
		}
		known[h.NodeName] = true
		c.Nodes = append(c.Nodes, n)
	}
	for name, obj := range byName {
		if !known[name] {
			c.Unknown[name] = podCIDRs(obj)
		}
	}
	return c, nil
}

// networkEnv is what the network's plugin uses of the run.
func (u *upRun) networkEnv() network.Env { return networkEnv{u} }

type networkEnv struct{ u *upRun }

func (n networkEnv) Admin(ctx context.Context) (*apiclient.Client, error) { return n.u.e.Admin(ctx) }
func (n networkEnv) Timeout() time.Duration                               { return n.u.o.NodeTimeout }
func (n networkEnv) Say(host, format string, args ...any) {
	n.u.e.say("network", host, format, args...)
}

// Poll checks at up's interval for a new cluster: what a network waits for (node ranges, its Pods'
// Node annotations) is one List, and comes within seconds.
func (n networkEnv) Poll(ctx context.Context, check wait.Check) error {
	return n.u.e.pollEvery(ctx, "network", "", n.u.o.NodeTimeout, upPoll, check)
}

func (n networkEnv) OnHosts(ctx context.Context, hosts []string, fn func(context.Context, string, apply.Host) (apply.Outcome, error)) error {
	_, err := n.u.e.play(ctx, Play{Name: "network", Hosts: hosts, Run: func(ctx context.Context, name string) (bool, error) {
		out, err := fn(ctx, name, n.u.e.Conn(name))
		n.u.record(name, out)
		return out.Changed(), err
	}})
	return err
}

// podCIDRs are a Node's pod ranges: one of each family of a dual-stack cluster (spec.podCIDRs), else its
// one range.
func podCIDRs(n *corev1.Node) []string {
	if len(n.Spec.PodCIDRs) > 0 {
		return n.Spec.PodCIDRs
	}
	if n.Spec.PodCIDR != "" {
		return []string{n.Spec.PodCIDR}
	}
	return nil
}

// otherFacts connects to the cluster's nodes outside the run that get their routes (add-node, up --limit)
// and gathers their facts, all at once: a node's routes depend on them (a host without a default route
// routes the Service range out of its interface), and routes written without them would drop that route
// from the node's routes, and from networkd's, which puts back only what it has.
func (u *upRun) otherFacts(ctx context.Context, rest []*inventory.Host) (map[string]*facts.Facts, error) {
	if len(rest) == 0 {
		return nil, nil
	}
	if _, err := Connect(ctx, u.e, rest, 0); err != nil {
		return nil, err
	}
	var names []string
	for _, h := range rest {
		names = append(names, h.Name)
	}
	var mu sync.Mutex
	out := map[string]*facts.Facts{}
	_, err := u.e.play(ctx, Play{Name: "network", Hosts: names, Quiet: true, Run: func(ctx context.Context, name string) (bool, error) {
		f, err := u.e.Facts(ctx, u.e.Inv.Host(name))
		mu.Lock()
		out[name] = f
		mu.Unlock()
		return false, err
	}})
	return out, err
}
