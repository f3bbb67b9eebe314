package playbooks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/etcdmember"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/transport"
)

// peerURL is a member's peer URL as its manifest advertises it.
func (e *Env) peerURL(ctx context.Context, h *inventory.Host) (string, error) {
	ip, err := e.NodeIP(ctx, h)
	if err != nil {
		return "", err
	}
	return kubeadm.EtcdPeerURL(ip.String()), nil
}

// EtcdMember is one etcd member, or one etcd host that is not a member, as `clusterctl etcd status`
// shows it.
type EtcdMember struct {
	// Host is the inventory host that runs it; empty for a member on no inventory host.
	Host    string `json:"host,omitempty"`
	Name    string `json:"name"`
	PeerURL string `json:"peerURL"`
	// Member: the cluster lists it (false: a host of the inventory that is not a member; nil, null in JSON:
	// unknown, no member answered with the list).
	Member *bool `json:"member"`
	// Started: it has started and joined (a member added but never started has no name).
	Started bool               `json:"started"`
	Status  *etcdmember.Status `json:"status,omitempty"`
	// Error says why there is no status (the host or its member does not answer).
	Error string `json:"error,omitempty"`
	// NotJoined: the host is in the inventory, and add-node has not joined it yet (Error says so).
	NotJoined bool `json:"notJoined,omitempty"`
}

// EtcdStatus asks every etcd host's member, through that host's own connection, for its status and
// health, and the cluster for its member list (from the first member that answers): one entry per
// member, then per etcd host that is not one. Unreachable hosts are entries with an error, not a failure;
// it fails only when no member answers.
func EtcdStatus(ctx context.Context, e *Env) ([]EtcdMember, error) {
	hosts := e.Inv.EtcdHosts()
	if len(hosts) == 0 {
		return nil, errors.New("the inventory has no etcd host (no control-plane host, and none with the etcd role)")
	}
	hosts, pending := clusterHostsOf(ctx, e, hosts, "")
	seen := probeEtcd(ctx, e, hosts)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var members []etcdmember.Member
	for _, h := range hosts {
		if l, ok := seen.lists[h.Name]; ok {
			members = l
			break
		}
	}
	out := seen.members(hosts, members)
	for _, h := range pending {
		out = append(out, EtcdMember{Host: h.Name, Name: h.NodeName, Error: notJoined(e, h), NotJoined: true})
	}
	if members == nil {
		return out, errors.New("no etcd member is healthy: etcd has no quorum, or no host could be reached")
	}
	return out, nil
}

// etcdSeen is what each etcd host's member said, by host: its status, the member list (when healthy), its
// peer URL, or why it could not be asked.
type etcdSeen struct {
	mu       sync.Mutex
	statuses map[string]*etcdmember.Status
	lists    map[string][]etcdmember.Member
	peers    map[string]string
	failed   map[string]error
}

// probeEtcd asks every etcd host's own member, side by side.
func probeEtcd(ctx context.Context, e *Env, hosts []*inventory.Host) *etcdSeen {
	seen := &etcdSeen{statuses: map[string]*etcdmember.Status{}, lists: map[string][]etcdmember.Member{}, peers: map[string]string{}, failed: map[string]error{}}
	conn, _ := Connect(ctx, e, hosts, 1)
	for _, r := range conn {
		if r.Err != nil {
			seen.failed[r.Host] = r.Err
		}
	}
	var reachable []string
	for _, h := range hosts {
		if seen.failed[h.Name] == nil {
			reachable = append(reachable, h.Name)
		}
	}
	_, _ = e.play(ctx, Play{Name: "etcd-status", Hosts: reachable, Policy: transport.Policy{MaxFail: 1}, Quiet: true, Run: func(ctx context.Context, name string) (bool, error) {
		h := e.Inv.Host(name)
		peer, err := e.peerURL(ctx, h)
		if err != nil {
			return false, err
		}
		c, err := e.etcdOn(ctx, h)
		if err != nil {
			return false, err
		}
		defer c.Close()
		st, err := c.Status(ctx)
		var list []etcdmember.Member
		listed := false
		if err == nil && st.Healthy {
			list, err = c.List(ctx)
			listed = err == nil
		}
		seen.mu.Lock()
		defer seen.mu.Unlock()
		if listed {
			seen.lists[name] = list
		}
		seen.peers[name] = peer
		if err != nil && st == nil {
			seen.failed[name] = err
			return false, err
		}
		seen.statuses[name] = st
		return false, nil
	}})
	return seen
}

// members are the cluster's members (as a healthy member lists them), each with its host and what it said,
// then the hosts that are not members, in the inventory's order.
func (seen *etcdSeen) members(hosts []*inventory.Host, members []etcdmember.Member) []EtcdMember {
	var out []EtcdMember
	isMember := map[string]bool{}
	for _, m := range members {
		em := EtcdMember{Name: m.Name, PeerURL: m.PeerURL, Member: ptr(true), Started: m.Started}
		for _, h := range hosts {
			if seen.peers[h.Name] == m.PeerURL {
				em.Host = h.Name
				isMember[h.Name] = true
				em.Status = seen.statuses[h.Name]
				if err := seen.failed[h.Name]; err != nil {
					em.Error = firstLine(err.Error())
				}
			}
		}
		if em.Host == "" {
			em.Error = "on no host of the inventory"
		}
		out = append(out, em)
	}
	for _, h := range hosts {
		if isMember[h.Name] {
			continue
		}
		em := EtcdMember{Host: h.Name, Name: h.NodeName, PeerURL: seen.peers[h.Name], Status: seen.statuses[h.Name]}
		switch {
		case seen.failed[h.Name] != nil:
			em.Error = firstLine(seen.failed[h.Name].Error())
			if members != nil {
				em.Member = ptr(false)
			}
		case members != nil:
			em.Member = ptr(false)
			em.Error = "not a member of the cluster the others form"
		default:
			em.Error = "no healthy member answered with the member list"
		}
		out = append(out, em)
	}
	order := map[string]int{}
	for i, h := range hosts {
		order[h.Name] = i
	}
	slices.SortStableFunc(out, func(a, b EtcdMember) int {
		ia, oka := order[a.Host]
		ib, okb := order[b.Host]
		switch {
		case oka && okb:
			return ia - ib
		case oka:
			return -1
		case okb:
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// SnapshotResult is what `clusterctl etcd snapshot` made.
type SnapshotResult struct {
	File string `json:"file"`
	// Host is the member the snapshot was taken from.
	Host string `json:"host"`
	etcdmember.SnapshotInfo
}

// EtcdSnapshot streams a snapshot from a healthy voting member (a follower when there is one: the leader
// has the most to do) to out on the workstation, through the host's SSH connection: nothing is written on
// the host. The file is written as out.part (0600), synced, and renamed to out once complete and its
// integrity hash checked; an existing out is refused.
func EtcdSnapshot(ctx context.Context, e *Env, out string) (*SnapshotResult, error) {
	if _, err := os.Lstat(out); err == nil {
		return nil, fmt.Errorf("%s exists: choose another --out", out)
	}
	members, err := EtcdStatus(ctx, e)
	if err != nil {
		return nil, err
	}
	var from *inventory.Host
	for _, leader := range []bool{false, true} {
		for _, m := range members {
			if from == nil && m.Host != "" && m.Status != nil && m.Status.Healthy && !m.Status.Learner && m.Status.Leader == leader {
				from = e.Inv.Host(m.Host)
			}
		}
	}
	if from == nil {
		return nil, errors.New("no healthy voting etcd member to take a snapshot from (clusterctl etcd status shows why)")
	}
	c, err := e.etcdOn(ctx, from)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	part := out + ".part"
	_ = os.Remove(part)
	f, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	e.say("etcd-snapshot", from.Name, "streaming a snapshot to %s", out)
	info, err := c.Snapshot(ctx, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && info.Revision == 0 {
		// etcd sends no header with the stream: the revision is the database's newest.
		info.Revision, err = etcdmember.SnapshotRevision(part)
	}
	if err == nil {
		err = os.Rename(part, out)
	}
	if err != nil {
		_ = os.Remove(part)
		return nil, fmt.Errorf("snapshot from %s: %w", from.Name, err)
	}
	return &SnapshotResult{File: out, Host: from.Name, SnapshotInfo: *info}, nil
}

func ptr[T any](v T) *T { return &v }

// IsMember reports whether the cluster lists m (false when unknown).
func (m EtcdMember) IsMember() bool { return m.Member != nil && *m.Member }
