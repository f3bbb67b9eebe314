package playbooks

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/etcdmember"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/manifests"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/transport"
)

// etcdHosts are the run's hosts of an external etcd cluster (none when etcd is stacked).
func (d *deployment) etcdHosts(p *plan) []*inventory.Host {
	if !d.e.Inv.ExternalEtcd() {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(p.hosts), func(h *inventory.Host) bool { return !h.Has(inventory.RoleEtcd) })
}

// etcdMembership asks, with external etcd, a member of the running etcd cluster for its members (the first
// etcd host that answers; with none, the cluster is new) and finds which of the run's etcd hosts join it
// and which are members already (nil, nil: a new cluster, or etcd is stacked).
func (d *deployment) etcdMembership(ctx context.Context, p *plan) (join map[string][]manifests.EtcdMember, members []string, err error) {
	if len(d.etcdHosts(p)) == 0 {
		return nil, nil, nil
	}
	var list []etcdmember.Member
	for _, h := range d.e.Inv.EtcdHosts() {
		if f := p.facts[h.Name]; f != nil && !f.ListensOn(kubeadm.PortEtcdClient) {
			continue // no member running there
		}
		if res, err := Connect(ctx, d.e, []*inventory.Host{h}, 1); err != nil || res[0].Err != nil {
			continue
		}
		c, err := d.e.etcdOn(ctx, h)
		if err != nil {
			continue // not made by this cluster (yet): no certificate for it
		}
		l, err := c.List(ctx)
		c.Close()
		if err == nil {
			list = l
			break
		}
	}
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	if list == nil {
		return nil, nil, nil // a new cluster: every etcd host starts with all the others
	}
	var started []manifests.EtcdMember
	for _, m := range list {
		if m.Started {
			started = append(started, manifests.EtcdMember{Name: m.Name, PeerURL: m.PeerURL})
		}
	}
	join = map[string][]manifests.EtcdMember{}
	for _, h := range d.etcdHosts(p) {
		peer, err := d.e.peerURL(ctx, h)
		if err != nil {
			return nil, nil, err
		}
		if m := etcdmember.Find(list, peer); m != nil && m.Started {
			members = append(members, h.Name)
			continue
		}
		join[h.Name] = slices.DeleteFunc(slices.Clone(started), func(m manifests.EtcdMember) bool { return m.PeerURL == peer })
		d.e.say("render", h.Name, "joins the running etcd cluster of %d members", len(join[h.Name]))
	}
	return join, members, nil
}

// startEtcd starts the external etcd members of hosts that are not running and restarts, one at a time,
// those whose unit or binary changed; a host joining the running cluster is added as a learner first and
// promoted once it has caught up. Then it waits until every member of the cluster is healthy and listed.
func (d *deployment) startEtcd(ctx context.Context, p *plan, play string, hosts []*inventory.Host) error {
	start := func(ctx context.Context, name string) (bool, error) {
		out, err := apply.Etcd(ctx, d.e.Conn(name), scripts.EtcdParams{Dry: d.o.DryRun, RestartTimeout: int(d.o.Timeout / time.Second)})
		d.record(name, out)
		return out.Changed(), err
	}
	var running, joining []*inventory.Host
	for _, h := range hosts {
		if _, ok := p.etcdJoin[h.Name]; ok {
			joining = append(joining, h)
		} else {
			running = append(running, h)
		}
	}
	if _, err := d.e.play(ctx, Play{Name: play, Hosts: names(running), Policy: transport.Policy{Limit: 1}, Run: start}); err != nil {
		return err
	}
	for _, h := range joining {
		if d.o.DryRun {
			if _, err := d.e.play(ctx, Play{Name: play, Hosts: []string{h.Name}, Run: start}); err != nil {
				return err
			}
			continue
		}
		if err := d.joinEtcd(ctx, play, h, start); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	if d.o.DryRun {
		return nil
	}
	members := d.e.Inv.EtcdHosts()
	if _, err := Connect(ctx, d.e, members, 0); err != nil {
		return err
	}
	peers := map[string]string{}
	for _, h := range members {
		p, err := d.e.peerURL(ctx, h)
		if err != nil {
			return err
		}
		peers[h.Name] = p
	}
	return d.e.poll(ctx, play, "", d.o.Timeout, func() (bool, string, error) { return etcdQuorum(ctx, d.e, members, peers) })
}

// joinEtcd adds h's member to the running etcd cluster as a learner (through another member), starts it,
// and promotes it once it has caught up.
func (d *deployment) joinEtcd(ctx context.Context, play string, h *inventory.Host, start func(context.Context, string) (bool, error)) error {
	ec, err := d.e.etcdExcept(ctx, h)
	if err != nil {
		return err
	}
	defer ec.Close()
	peer, err := d.e.peerURL(ctx, h)
	if err != nil {
		return err
	}
	m, added, err := ec.AddLearner(ctx, peer)
	if err != nil {
		return fmt.Errorf("adding its etcd member: %w", err)
	}
	if added {
		d.e.say(play, h.Name, "etcd member %x added as a learner (%s)", m.ID, peer)
	}
	if _, err := d.e.play(ctx, Play{Name: play, Hosts: []string{h.Name}, Run: start}); err != nil {
		return err
	}
	if m.Learner {
		if err := ec.Promote(ctx, m.ID, d.o.Timeout); err != nil {
			return err
		}
		d.e.say(play, h.Name, "etcd member %x promoted to voting member", m.ID)
	}
	return nil
}
