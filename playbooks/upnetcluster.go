package playbooks

import (
	"context"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/network"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/wait"
)

// networkCluster is the cluster as the network step sees it: the run's nodes and the inventory's other
// nodes that are the cluster's, each with its Node's range and address; the cluster's Nodes that are no
// host of the inventory by name. With others, the other nodes are connected and their facts read: they
// get their routes. Without (the early pass, which writes the run's nodes alone), they are still there,
// so that a run's node already in the cluster (the first control-plane node of add-node) keeps its routes
// to them: a run that fails between the two passes must not leave it cut off from the other nodes' Pods.
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
		if h := &u.e.Inv.Hosts[i]; byName[h.NodeName] != nil && !slices.Contains(run, h) {
			rest = append(rest, h)
		}
	}
	restFacts := map[string]*facts.Facts{}
	if others {
		var err error
		if restFacts, err = u.otherFacts(ctx, rest); err != nil {
			return nil, err
		}
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
// Node annotations) is one List, and comes within seconds. Each check also approves the kubelets' serving
// requests that pass (the ready step's approver, which says why when it refuses one): made as soon as the
// new kubelets have their client certificates, they waited for the ready step, 1 s and more after the
// network was ready on a 1+2 lab. An error there is left to the ready step, which approves them again.
func (n networkEnv) Poll(ctx context.Context, check wait.Check) error {
	return n.u.e.pollEvery(ctx, "network", "", n.u.o.NodeTimeout, upPoll, func() (bool, string, error) {
		if n.u.approver.Kube != nil {
			_, _ = n.u.approver.Round(ctx)
		}
		return check()
	})
}

// OnHosts runs fn as a play of the network step's name; none when there is no host (every node done by a
// staged network).
func (n networkEnv) OnHosts(ctx context.Context, hosts []string, fn func(context.Context, string, apply.Host) (apply.Outcome, error)) error {
	if len(hosts) == 0 {
		return nil
	}
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

// otherFacts are the network facts (facts.GatherNet) of the cluster's nodes outside the run that get their
// routes (add-node, up --limit), all at once: a node's routes depend on them (a host without a default
// route routes the Service range out of its interface), and routes written without them would drop that
// route from the node's routes, and from networkd's, which puts back only what it has. Those the run
// gathered beside its push and join (prefetchOthers) are taken from there; the others are connected to and
// asked now, each failure reported.
func (u *upRun) otherFacts(ctx context.Context, rest []*inventory.Host) (map[string]*facts.Facts, error) {
	out := map[string]*facts.Facts{}
	var missing []*inventory.Host
	for _, h := range rest {
		if f := u.otherFetched(h.Name); f != nil {
			out[h.Name] = f
		} else {
			missing = append(missing, h)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	if _, err := Connect(ctx, u.e, missing, 0); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	_, err := u.e.play(ctx, Play{Name: "network", Hosts: names(missing), Quiet: true, Run: func(ctx context.Context, name string) (bool, error) {
		f, err := facts.GatherNet(ctx, u.e.Conn(name))
		mu.Lock()
		out[name] = f
		mu.Unlock()
		return false, err
	}})
	return out, err
}

// prefetchOthers connects, in the background, to the inventory's nodes outside the run and asks their
// network facts, for the network step's routes (otherFacts): on add-node to a running cluster, a
// connection and a command per node then overlap the new node's push and join instead of coming after
// them. Best effort and silent: a node it cannot reach, or that has not joined, is left to the network step.
// Not for a staged network, whose nodes outside the run get nothing.
func (u *upRun) prefetchOthers(ctx context.Context, p *plan) {
	run := p.nodes()
	var rest []*inventory.Host
	for i := range u.e.Inv.Hosts {
		if h := &u.e.Inv.Hosts[i]; h.IsNode() && !slices.Contains(run, h) {
			rest = append(rest, h)
		}
	}
	if _, staged := p.net.(network.Staged); staged || u.o.DryRun || u.others != nil || len(rest) == 0 {
		return // a staged network leaves the other nodes alone (network)
	}
	ctx, cancel := context.WithCancel(ctx)
	o := &othersRun{hosts: map[string]*otherFacts{}, cancel: cancel}
	for _, h := range rest {
		o.hosts[h.Name] = &otherFacts{done: make(chan struct{})}
	}
	u.others = o
	go func() {
		var g errgroup.Group
		g.SetLimit(max(u.e.Forks, 1))
		for _, h := range rest {
			g.Go(func() error {
				of := o.hosts[h.Name]
				defer close(of.done)
				if u.e.dial(ctx, h) == nil {
					of.facts, _ = facts.GatherNet(ctx, u.e.Conn(h.Name))
				}
				return nil
			})
		}
		_ = g.Wait()
	}()
}

// otherFetched waits for the background gathering of a node's network facts (prefetchOthers) and returns
// them; nil when it was not asked, or could not be.
func (u *upRun) otherFetched(name string) *facts.Facts {
	if u.others == nil || u.others.hosts[name] == nil {
		return nil
	}
	of := u.others.hosts[name]
	<-of.done
	return of.facts
}

// othersEnded ends the background gathering of the other nodes' facts, if any, and waits for it.
func (u *upRun) othersEnded() {
	if u.others == nil {
		return
	}
	u.others.cancel()
	for _, of := range u.others.hosts {
		<-of.done
	}
}
