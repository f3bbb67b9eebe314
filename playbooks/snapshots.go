package playbooks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/snapshots"
	"github.com/clusterctl/clusterctl/transport"
)

// MemberSnapshots are one etcd host's scheduled snapshots, or why they could not be read.
type MemberSnapshots struct {
	Host string `json:"host"`
	snapshots.State
	Error string `json:"error,omitempty"`
	// NotJoined: the host is in the inventory, and add-node has not joined it yet (Error says so).
	NotJoined bool `json:"notJoined,omitempty"`
}

// snapshotDir is where the members keep their scheduled snapshots: the inventory's directory, else the
// default one (a schedule the inventory no longer has left its snapshots there).
func snapshotDir(inv *inventory.Inventory) string {
	if s := inv.Cluster.Etcd.Snapshots; s != nil {
		return s.Dir
	}
	return inventory.DefaultSnapshotDir
}

// EtcdSnapshots lists the scheduled snapshots on every etcd host (the control-plane hosts when etcd is
// stacked), side by side, with each host's schedule's state. Unreachable hosts are entries with an error;
// it fails only when no host answers.
func EtcdSnapshots(ctx context.Context, e *Env) (list []MemberSnapshots, err error) {
	hosts := e.Inv.EtcdHosts()
	if len(hosts) == 0 {
		return nil, errors.New("the inventory has no etcd host (no control-plane host, and none with the etcd role)")
	}
	dir := snapshotDir(e.Inv)
	hosts, pending := clusterHostsOf(ctx, e, hosts, "")
	defer func() {
		for _, h := range pending {
			list = append(list, MemberSnapshots{Host: h.Name, Error: notJoined(e, h), NotJoined: true})
		}
	}()
	out := make([]MemberSnapshots, len(hosts))
	index := map[string]int{}
	var reachable []string
	conn, _ := Connect(ctx, e, hosts, 1)
	failed := map[string]error{}
	for _, r := range conn {
		if r.Err != nil {
			failed[r.Host] = r.Err
		}
	}
	for i, h := range hosts {
		out[i].Host, index[h.Name] = h.Name, i
		if err := failed[h.Name]; err != nil {
			out[i].Error = err.Error()
		} else {
			reachable = append(reachable, h.Name)
		}
	}
	var mu sync.Mutex
	_, _ = e.play(ctx, Play{Name: "etcd-snapshots", Hosts: reachable, Policy: transport.Policy{MaxFail: 1}, Quiet: true, Run: func(ctx context.Context, name string) (bool, error) {
		st, err := snapshots.List(ctx, e.Conn(name), dir)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			out[index[name]].Error = err.Error()
			return false, err
		}
		out[index[name]].State = st
		return false, nil
	}})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, m := range out {
		if m.Error == "" {
			return out, nil
		}
	}
	return out, fmt.Errorf("no etcd host could be read (%s: %s)", out[0].Host, out[0].Error)
}

// maxSnapshot bounds a scheduled snapshot fetched from a host: etcd's largest supported database.
const maxSnapshot = 16 << 30

// FetchSnapshot copies a scheduled snapshot from an etcd host into dir on the workstation (0600, as
// HOST-NAME, written as .part and renamed once whole) and returns its path: NAME, or the host's newest with
// "latest". A copy already there (an earlier run's) is used again.
func FetchSnapshot(ctx context.Context, e *Env, host, name, dir string) (string, error) {
	h := e.Inv.Host(host)
	if h == nil || !slices.Contains(e.Inv.EtcdHosts(), h) {
		return "", fmt.Errorf("%s is not an etcd host of the inventory", host)
	}
	if name != "latest" && !snapshots.NameRE.MatchString(name) {
		return "", fmt.Errorf("%q is not a scheduled snapshot's name (etcd-snapshot-<UTC time>.db) or latest", name)
	}
	if r, _ := Connect(ctx, e, []*inventory.Host{h}, 0); len(r) == 1 && r[0].Err != nil {
		return "", r[0].Err
	}
	st, err := snapshots.List(ctx, e.Conn(host), snapshotDir(e.Inv))
	if err != nil {
		return "", fmt.Errorf("%s: listing its snapshots: %w", host, err)
	}
	var pick *snapshots.Snapshot
	for i, s := range st.Snapshots {
		if name == "latest" && i == 0 || s.Name == name {
			pick = &st.Snapshots[i]
			break
		}
	}
	if pick == nil {
		return "", fmt.Errorf("%s has no snapshot %s in %s (clusterctl etcd snapshots list shows them)", host, name, snapshotDir(e.Inv))
	}
	local := filepath.Join(dir, host+"-"+pick.Name)
	if fi, err := os.Stat(local); err == nil && fi.Mode().IsRegular() && fi.Size() == pick.Size {
		e.say("etcd-restore", host, "using %s, fetched before", local)
		return local, nil
	}
	part := local + ".part"
	_ = os.Remove(part)
	e.say("etcd-restore", host, "fetching %s (%s bytes) to %s", pick.Name, strconv.FormatInt(pick.Size, 10), local)
	if err := e.Conn(host).GetFile(ctx, path.Join(snapshotDir(e.Inv), pick.Name), part, maxSnapshot); err != nil {
		return "", err
	}
	if err := os.Rename(part, local); err != nil {
		_ = os.Remove(part)
		return "", err
	}
	return local, nil
}
