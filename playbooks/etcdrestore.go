package playbooks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/etcdmember"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// RestoreOptions shape a restore.
type RestoreOptions struct {
	// From is the snapshot file.
	From string
	// Timeout bounds each wait: the members stopping, quorum, each API server.
	Timeout time.Duration
	// DryRun checks the snapshot and every host as a restore does first, and says what it would do in Plan;
	// nothing is stopped or written.
	DryRun bool
}

// RestoreResult is what a restore did.
type RestoreResult struct {
	// Plan is what a dry run would do, in order.
	Plan     []string `json:"plan,omitempty"`
	Snapshot string   `json:"snapshot"`
	SHA256   string   `json:"sha256"`
	// Revision is the snapshot's; the restored store continues at Revision + a billion.
	Revision int64 `json:"revision"`
	// Members are the hosts the new etcd cluster runs on.
	Members []string     `json:"members"`
	Nodes   []NodeStatus `json:"nodes,omitempty"`
}

// kindRestore is the kind of a restore's journal, so that a re-run with the same snapshot onto the same
// members resumes it: its key the snapshot's hash and the new cluster's --initial-cluster; done its steps
// and "restore/<host>" for each member restored; data the new cluster's token (every member must be
// restored with the same).
const kindRestore = "etcd-restore"

type restoreData struct {
	Token string `json:"token"`
}

// restoreBump is how far a restore moves the store's revision past the snapshot's: more than any cluster
// writes between a snapshot and a restore, so that no client sees a revision again with other contents.
// With --mark-compacted, every watch from before the restore ends with "compacted" and its client lists
// again (what Kubernetes' informers do), instead of trusting a cache newer than the data.
const restoreBump = 1_000_000_000

// EtcdRestore replaces the etcd cluster of the inventory's etcd hosts (the control-plane hosts, when etcd
// is stacked) with a new one restored from a snapshot: every member and control plane is stopped (static
// Pods' manifests held aside, external members' units stopped), each member's data directory is restored
// from the snapshot with etcdutl (the old one kept as /var/lib/etcd.before-restore), etcd is started on all
// of them and quorum awaited, then the control plane is started again and each API server awaited. Every
// etcd and control-plane host of the inventory must be reachable: hosts that are lost are left out of the
// inventory, and added back with add-node afterwards.
func EtcdRestore(ctx context.Context, e *Env, o RestoreOptions) (*RestoreResult, error) {
	orDefault(&o.Timeout, defaultWait)
	r := &restoreRun{e: e, o: o, cps: e.Inv.ControlPlanes(), ext: e.Inv.ExternalEtcd(), members: e.Inv.EtcdHosts(), peers: map[string]string{}}
	if len(r.cps) == 0 {
		return nil, errors.New("the inventory has no control-plane host")
	}
	r.all = slices.Clone(r.members)
	for _, h := range r.cps {
		if !slices.Contains(r.all, h) {
			r.all = append(r.all, h)
		}
	}
	size, sum, err := etcdmember.VerifySnapshot(o.From)
	if err != nil {
		return nil, err
	}
	rev, err := etcdmember.SnapshotRevision(o.From)
	if err != nil {
		return nil, err
	}
	r.res = &RestoreResult{Snapshot: o.From, SHA256: sum, Revision: rev, Members: names(r.members)}
	if err := snapshotReadable(ctx, e, o.From); err != nil {
		return r.res, err
	}
	e.say("etcd-restore", "", "snapshot %s: %d bytes at revision %d, integrity hash and pages checked, sha256 %s", o.From, size, rev, sum)
	if err := r.check(ctx); err != nil {
		return r.res, err
	}
	if o.DryRun {
		r.res.Plan = []string{
			fmt.Sprintf("stop etcd and the control plane on %s (everything written after revision %d is lost)", strings.Join(names(r.all), ", "), rev),
			fmt.Sprintf("restore each member's data directory from the snapshot, a new cluster of %s (the old data kept as %s.before-restore)", strings.Join(r.initial, ","), kubeadm.EtcdDataDir),
			"start etcd, wait for quorum; start the control plane, wait for each API server and every node",
		}
		return r.res, nil
	}
	if r.st, err = openRestoreJournal(e.StateDir, sum+" "+strings.Join(r.initial, ","), time.Now()); err != nil {
		return r.res, err
	}
	r.started = time.Now()
	if _, err := runSteps(ctx, runOptions{Sink: e.Sink, Journal: r.st, Progress: r.st}, nil, r.steps()); err != nil {
		return r.res, err
	}
	return r.res, r.st.Remove()
}

// restoreRun is one etcd restore.
type restoreRun struct {
	e   *Env
	o   RestoreOptions
	res *RestoreResult
	st  *statedir.Journal[restoreData]
	// cps are the control-plane hosts; members the hosts of the restored cluster (the control-plane hosts,
	// when etcd is stacked; the etcd hosts, each a unit, when external: ext); all both.
	cps, members, all []*inventory.Host
	ext               bool
	// peers are the members' peer URLs by host, initial the new cluster's --initial-cluster.
	peers   map[string]string
	initial []string
	// started is when etcd was started again (a resumed run: this run's start).
	started time.Time
}

// steps are a restore's, resumed from its journal: step by step (runOptions.Journal), and the restore
// step member by member (Step.Resume).
func (r *restoreRun) steps() []Step {
	return []Step{
		{Name: "hold", Run: do(r.hold)},
		{Name: "restore", Resume: r.restore},
		{Name: "etcd", Run: do(r.startEtcd)},
		{Name: "control-plane", Run: do(r.startControlPlane)},
		{Name: "nodes", Run: do(r.waitNodes)},
	}
}

// check makes sure, before anything stops, that every host is reachable and every member able to take
// part, and learns the members' peer URLs.
func (r *restoreRun) check(ctx context.Context) error {
	e := r.e
	results, err := Connect(ctx, e, r.all, 1)
	var lost []string
	for _, res := range results {
		if res.Err != nil {
			lost = append(lost, fmt.Sprintf("%s (%v)", res.Host, res.Err))
		}
	}
	if len(lost) > 0 {
		return fmt.Errorf("hosts unreachable: %s: a restore makes a new etcd cluster of every etcd host of the inventory (its control-plane hosts, when etcd is stacked) and restarts every control plane; "+
			"leave hosts that are lost out of the inventory, restore onto the others, then add-node them back", strings.Join(lost, "; "))
	}
	if err != nil {
		return err
	}
	for _, h := range r.members {
		p, err := e.peerURL(ctx, h)
		if err != nil {
			return err
		}
		r.peers[h.Name] = p
		r.initial = append(r.initial, h.NodeName+"="+p)
	}
	var missing []string
	var mu sync.Mutex
	if _, err := e.play(ctx, Play{Name: "check", Hosts: names(r.members), Run: func(ctx context.Context, name string) (bool, error) {
		lacks, err := apply.RestoreCheck(ctx, e.Conn(name), r.ext)
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lacks {
			missing = append(missing, name+": "+l)
		}
		return false, err
	}}); err != nil {
		return err
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("nothing was changed: %s; a host that is not a control-plane node of this cluster (lost and reinstalled) is left out of the inventory for the restore and added back with add-node", strings.Join(missing, "; "))
	}
	return nil
}

// hold stops every member before any is restored: no API server writes to the old cluster after the
// snapshot is the truth.
func (r *restoreRun) hold(ctx context.Context) error {
	e := r.e
	tries := int(r.o.Timeout / (500 * time.Millisecond))
	if r.ext {
		// External members first: a control-plane host that is also an etcd host waits below until
		// nothing of etcd or the control plane runs.
		if _, err := e.play(ctx, Play{Name: "hold", Hosts: names(r.members), Run: func(ctx context.Context, name string) (bool, error) {
			return apply.HoldEtcdUnit(ctx, e.Conn(name))
		}}); err != nil {
			return err
		}
	}
	_, err := e.play(ctx, Play{Name: "hold", Hosts: names(r.cps), Run: func(ctx context.Context, name string) (bool, error) {
		return apply.HoldControlPlane(ctx, e.Conn(name), tries)
	}})
	return err
}

// restore puts the snapshot on each member not restored yet and restores its data directory from it.
func (r *restoreRun) restore(ctx context.Context, _ *plan, g progress) error {
	e := r.e
	_, err := e.play(ctx, Play{Name: "restore", Hosts: names(r.members), Run: func(ctx context.Context, name string) (bool, error) {
		if g.Done(name) {
			return false, nil
		}
		h := e.Inv.Host(name)
		snap := kubeadm.StateDir + "/etcd-restore/snapshot.db"
		conn := e.Conn(name)
		// Streamed, not read into memory: a snapshot is as large as the database (gigabytes).
		if err := conn.PutFile(ctx, r.o.From, snap, 0o600); err != nil {
			return false, err
		}
		if err := apply.RestoreMember(ctx, conn, scripts.EtcdRestoreParams{Snapshot: snap, Name: h.NodeName,
			PeerURL: r.peers[name], InitialCluster: strings.Join(r.initial, ","), Token: r.st.Data.Token, Bump: restoreBump}); err != nil {
			return false, err
		}
		return true, g.Finish(name)
	}})
	return err
}

// startEtcd starts every member at once (none is ready before the others are up) and waits for quorum.
func (r *restoreRun) startEtcd(ctx context.Context) error {
	e := r.e
	release := apply.ReleaseEtcd
	if r.ext {
		release = apply.ReleaseEtcdUnit
	}
	if _, err := e.play(ctx, Play{Name: "etcd", Hosts: names(r.members), Run: func(ctx context.Context, name string) (bool, error) {
		return release(ctx, e.Conn(name))
	}}); err != nil {
		return err
	}
	r.started = time.Now()
	return e.poll(ctx, "etcd", "", r.o.Timeout, func() (bool, string, error) {
		return etcdQuorum(ctx, e, r.members, r.peers)
	})
}

// startControlPlane starts each control plane again and waits for its API server.
func (r *restoreRun) startControlPlane(ctx context.Context) error {
	e := r.e
	_, err := e.play(ctx, Play{Name: "control-plane", Hosts: names(r.cps), Run: func(ctx context.Context, name string) (bool, error) {
		released, err := apply.ReleaseControlPlane(ctx, e.Conn(name))
		if err != nil {
			return false, err
		}
		c, err := e.nodeClient(ctx, e.Inv.Host(name))
		if err != nil {
			return false, err
		}
		return released, e.poll(ctx, "control-plane", name, r.o.Timeout, func() (bool, string, error) {
			if err := c.Ready(ctx); err != nil {
				return false, fmt.Sprintf("the API server (last: %v)", firstLine(err.Error())), nil
			}
			return true, "", nil
		})
	}})
	return err
}

// waitNodes waits for every control-plane node's static Pods to be Ready, and every node's kubelet to be
// heard from since etcd came back (the Ready conditions restored are the snapshot's).
func (r *restoreRun) waitNodes(ctx context.Context) error {
	e := r.e
	admin, err := e.Admin(ctx)
	if err != nil {
		return err
	}
	// The inventory's hosts that the restored cluster has as Nodes (one not joined yet is add-node's).
	var nodeNames []string
	err = e.poll(ctx, "nodes", "", r.o.Timeout, func() (bool, string, error) {
		if nodeNames == nil {
			list, err := admin.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "the API (" + firstLine(err.Error()) + ")", nil
			}
			nodeNames = []string{}
			for _, h := range e.Inv.Hosts {
				if slices.ContainsFunc(list.Items, func(n corev1.Node) bool { return n.Name == h.NodeName }) {
					nodeNames = append(nodeNames, h.NodeName)
				}
			}
		}
		var waiting []string
		for _, h := range r.cps {
			// No annotation and no image asked for: the mirror Pods' readiness only.
			waiting = append(waiting, nodes.StaticPodsWaiting(ctx, admin.Kube, h.NodeName, "", nil, staticPods(e.Inv))...)
		}
		waiting = append(waiting, nodes.LeasesWaiting(ctx, admin.Kube, nodeNames, r.started)...)
		return len(waiting) == 0, strings.Join(waiting, ", "), nil
	})
	if err != nil {
		return err
	}
	r.res.Nodes, err = nodeStatuses(ctx, admin)
	return err
}

// openRestoreJournal reads the journal of a restore under way from the same snapshot onto the same members
// (key), or starts a new one (a new cluster token), written at once; a journal of another snapshot or other
// members is replaced: nothing is started before every member is restored, and such a restore restores
// every member again.
func openRestoreJournal(stateDir, key string, now time.Time) (*statedir.Journal[restoreData], error) {
	path := statedir.JournalPath(stateDir, kindRestore)
	if err := statedir.CheckLegacy(filepath.Join(stateDir, "etcd-restore.json"), kindRestore); err != nil {
		return nil, err
	}
	st, err := statedir.OpenJournal[restoreData](path, kindRestore)
	if err != nil || st != nil && st.Key == key && st.Data.Token != "" {
		return st, err
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	st = statedir.NewJournal[restoreData](path, kindRestore, key, now)
	return st, st.Update(func(j *statedir.Journal[restoreData]) { j.Data.Token = "clusterctl-restore-" + hex.EncodeToString(b) })
}

// etcdQuorum reports whether every host's member is a started voting member of one cluster of exactly
// those members, and healthy. Each poll dials afresh: a client made while a member is still down would
// wait out gRPC's growing redial back-off after the member is up.
func etcdQuorum(ctx context.Context, e *Env, hosts []*inventory.Host, peers map[string]string) (bool, string, error) {
	var waiting []string
	for _, h := range hosts {
		c, err := e.etcdOn(ctx, h)
		if err != nil {
			return false, "", err
		}
		st, err := c.Status(ctx)
		var list []etcdmember.Member
		if err == nil && st.Healthy {
			list, err = c.List(ctx)
		}
		c.Close()
		switch {
		case err != nil:
			waiting = append(waiting, fmt.Sprintf("%s (%s)", h.Name, firstLine(err.Error())))
		case !st.Healthy:
			waiting = append(waiting, fmt.Sprintf("%s (%s)", h.Name, strings.Join(st.Errors, "; ")))
		case len(list) != len(hosts) || etcdmember.Quorum(list) != nil:
			waiting = append(waiting, fmt.Sprintf("%s (%d members listed)", h.Name, len(list)))
		default:
			for _, o := range hosts {
				if etcdmember.Find(list, peers[o.Name]) == nil {
					waiting = append(waiting, fmt.Sprintf("%s (%s not listed)", h.Name, o.Name))
				}
			}
		}
	}
	if len(waiting) > 0 {
		return false, "etcd members " + strings.Join(waiting, ", "), nil
	}
	return true, "", nil
}
