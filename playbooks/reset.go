package playbooks

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/transport"
)

// ResetOptions tune reset.
type ResetOptions struct {
	// Hosts are the hosts reset (the session's when nil).
	Hosts []*inventory.Host
	// Force resets hosts that do not carry this cluster's mark (another cluster's, or none).
	Force bool
}

// ErrNotMember is the error of a host reset refuses: it carries another cluster's mark.
var ErrNotMember = errors.New("not a host of this cluster")

// Reset undoes what Up made on each host that carries this cluster's membership mark, the hosts in
// parallel: kubelet stopped and disabled, every container of the Kubernetes namespace removed, mounts,
// network namespaces, the cni0 bridge and pod routes, the KUBE- iptables chains and the rules that jump to
// them (by name, nothing else of the tables touched), clusterctl's files and units, the kubelet's and etcd's
// state, and the binaries pushed from an artifacts directory; then the host's own files that up replaced
// are put back. Unrelated files are left alone; image archives already imported into containerd are kept
// (a later up then imports nothing). A host with no mark has nothing of clusterctl's and is skipped; one
// with another cluster's mark is refused; Force resets both. An unreachable host is reported and the others
// are reset.
func Reset(ctx context.Context, e *Env, o ResetOptions) ([]transport.HostResult, error) {
	if o.Hosts == nil {
		o.Hosts = e.Hosts
	}
	results, err := Connect(ctx, e, o.Hosts, 1)
	if err != nil {
		return results, err
	}
	var reachable []string
	for _, r := range results {
		if r.Err == nil {
			reachable = append(reachable, r.Host)
		}
	}
	marks := memberMarks(e.Inv.Cluster.Name, e.StateDir)
	var binaries []string
	if e.Inv.Cluster.Artifacts != "" {
		for _, b := range []string{"kubelet", "kubectl", "etcdctl"} {
			binaries = append(binaries, kubeadm.Binary(b))
		}
	}
	script := []byte(scripts.Reset(binaries, transport.BackupDir, transport.AbsentSuffix))
	out, err := e.play(ctx, Play{Name: "reset", Hosts: reachable, Policy: transport.Policy{MaxFail: 1}, Run: func(ctx context.Context, name string) (bool, error) {
		conn := e.Conn(name)
		mark, err := conn.Get(ctx, kubeadm.MemberPath)
		switch {
		case errors.Is(err, fs.ErrNotExist) && !o.Force:
			e.say("reset", name, "no %s: clusterctl made nothing here; left alone (--force resets it anyway)", kubeadm.MemberPath)
			return false, transport.ErrSkipped
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return false, err
		case err == nil && !slices.Contains(marks, strings.TrimSpace(string(mark))) && !o.Force:
			return false, fmt.Errorf("%s: %w: its mark %s says %q, and this cluster's is %s; reset only touches hosts this cluster's up marked (--force resets it anyway)",
				name, ErrNotMember, kubeadm.MemberPath, strings.TrimSpace(string(mark)), strings.Join(quoteAll(marks), " or "))
		}
		_, err = conn.Run(ctx, "sh -s", script)
		return err == nil, err
	}})
	for _, r := range results {
		if r.Err != nil {
			out = append(out, r)
		}
	}
	return out, err
}

// memberMarks are the marks of this cluster's hosts: with its CA from the state directory, and during a CA
// rotation the other CA too. None when the state directory has no CA.
func memberMarks(cluster, stateDir string) []string {
	var marks []string
	if data, err := os.ReadFile(filepath.Join(stateDir, "pki", "ca.crt")); err == nil {
		if ca, err := pki.ParseCert(data); err == nil {
			marks = append(marks, MemberMark(cluster, pki.CAHash(ca)))
		}
	}
	store := &pki.Store{Dir: filepath.Join(stateDir, "pki")}
	if rot, err := store.Rotation(); err == nil && rot != nil && rot.Done >= pki.StageGenerate {
		if others, err := store.Others(rot); err == nil {
			marks = append(marks, MemberMark(cluster, pki.CAHash(others.CAs["ca"].Cert)))
		}
	}
	return marks
}

func quoteAll(ss []string) []string {
	if len(ss) == 0 {
		return []string{"unknown (no CA in the state directory)"}
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
