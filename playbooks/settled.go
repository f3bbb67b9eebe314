package playbooks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/transport"
)

// errSettled is what a step returns when the run has nothing left to do: the runner ends the run there,
// without an error (the settled step of up).
var errSettled = errors.New("nothing left to do")

// A run of up that ends with every host as its plan has it stamps each host (stamp): the plan's digest
// (stampOf) and the state of the files it wrote, in kubeadm.HostStamp. The next run reads the stamp with
// the facts (one round trip per host); when every host's stamp has the digest of the new plan, its files
// are as they were, its kubelet runs and every Node is Ready with its labels and taints (one request to
// the API server), the run ends after render (settled): a no-op up costs the facts and the render.
// A push empties the stamp with the host's files (apply.Push), so that a run that stopped half-way leaves
// no host stamped.

// buildID names the code that made a plan: the same plan from other code may be applied otherwise.
var buildID = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	id := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" || s.Key == "vcs.modified" || s.Key == "vcs.time" {
			id += " " + s.Value
		}
	}
	return id
})

// stampOf is a host's stamp for the plan: the digest of what the run leaves there and in the cluster
// (the inventory but how clusterctl logs in, the artifacts, the host's files, binaries and images, the
// code) and the paths of the files whose state the stamp keeps. What only a joining host gets (joinOnly)
// is left out: a stamp is of a host that has joined.
func (d *deployment) stampOf(p *plan, name string) (string, []string, error) {
	n, err := d.node(p, name)
	if err != nil {
		return "", nil, err
	}
	inv := *d.e.Inv
	inv.SSH = inventory.SSH{}
	inv.Hosts = slices.Clone(inv.Hosts)
	for i := range inv.Hosts {
		inv.Hosts[i].SSH = inventory.HostSSH{}
	}
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, v := range []any{buildID(), &inv, p.manifest, n.Images, n.Runtime, n.EtcdUnit, n.EtcdOnly,
		n.NetworkUnits, n.PodRoutes, n.PodRoutesUnit, n.Networkd, n.Snapshots} {
		if err := enc.Encode(v); err != nil {
			return "", nil, err
		}
	}
	files := append([]transport.File{n.Mark}, n.Files...)
	paths := make([]string, 0, len(files)+2)
	for _, f := range files {
		if slices.Contains(joinOnly, f.Path) {
			continue
		}
		fmt.Fprintf(h, "%s %o %d %d %s\n", f.Path, f.Mode, f.UID, f.GID, fileDigest(f))
		paths = append(paths, f.Path)
	}
	// Files the steps after the push write: the pod routes, a worker's kubelet kubeconfig (pointed at the
	// endpoint nodes use).
	if n.PodRoutes != "" {
		paths = append(paths, n.PodRoutes)
	}
	if !n.EtcdOnly {
		paths = append(paths, kubeadm.KubeletKubeconfig)
	}
	slices.Sort(paths)
	return hex.EncodeToString(h.Sum(nil)), slices.Compact(paths), nil
}

// joinOnly are the files a host gets only until it has joined: a node's bootstrap kubeconfig, an etcd
// host's initial cluster (written only before its member is in the cluster, read only when etcd makes its
// data directory). The first run's plan has them and a re-run's has not.
var joinOnly = []string{kubeadm.BootstrapKubeconfig, kubeadm.EtcdInitialEnv}

// fileDigest is the sha256 of a file's content: its source's, or its data's.
func fileDigest(f transport.File) string {
	if f.Source != "" {
		return f.SHA256
	}
	sum := sha256.Sum256(f.Data)
	return hex.EncodeToString(sum[:])
}

// settled ends the run when there is nothing to do (see above), with the Nodes' status; otherwise it
// says why not, and every step runs.
func (u *upRun) settled(ctx context.Context, p *plan) error {
	why, err := u.unsettledHost(p)
	if err != nil {
		return err
	}
	if why == "" {
		why = u.unsettledNodes(ctx, p)
	}
	if why != "" {
		u.e.say("settled", "", "every step runs: %s", why)
		return nil
	}
	u.e.say("settled", "", "nothing to do: every host is as this plan has it (its stamp), every Node Ready")
	return errSettled
}

// full skips the settled step when the run is asked to run every step (up --full).
func (u *upRun) full(*plan) string {
	if u.o.Full {
		return "--full: every step runs"
	}
	return ""
}

// unsettledHost says why a host of the run is not as the plan has it, "" when each is: no stamp, a stamp
// of another plan, a file changed since, the kubelet not running or the runtime not answering.
func (u *upRun) unsettledHost(p *plan) (string, error) {
	if !u.e.Inv.Hooks.Up.IsZero() || !u.e.Inv.Hooks.AddNode.IsZero() {
		return "the inventory has hooks, which run on every up", nil
	}
	for _, h := range p.hosts {
		f := p.facts[h.Name]
		digest, _, err := u.stampOf(p, h.Name)
		if err != nil {
			return "", err
		}
		if f == nil {
			return h.Name + ": no facts", nil
		}
		switch why := f.Unsettled(digest); {
		case why != "":
			return h.Name + ": " + why, nil
		case h.IsNode() && !f.KubeletActive:
			return h.Name + ": the kubelet is not running", nil
		case f.CRIAnswers == "fail":
			return h.Name + ": the container runtime does not answer", nil
		}
	}
	return "", nil
}

// unsettledNodes says why the cluster's Nodes are not as the plan has them, "" when they are (each of the
// run's nodes registered, Ready, with its labels and taints); it keeps their status for the result.
func (u *upRun) unsettledNodes(ctx context.Context, p *plan) string {
	admin, err := u.e.Admin(ctx)
	if err != nil {
		return "the API server: " + err.Error()
	}
	list, err := admin.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "listing the Nodes: " + err.Error()
	}
	byName := map[string]*corev1.Node{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	var waiting []string
	for _, h := range p.nodes() {
		n := byName[h.NodeName]
		switch {
		case n == nil:
			waiting = append(waiting, h.NodeName+" is not registered")
		case !nodes.Ready(n):
			waiting = append(waiting, h.NodeName+" is not Ready")
		case !nodes.Reconciled(n, h, u.e.Inv.NodeSettings(h)):
			waiting = append(waiting, h.NodeName+"'s labels or taints differ from the inventory's")
		}
	}
	if len(waiting) > 0 {
		return strings.Join(waiting, ", ")
	}
	u.res.Nodes = statusesOf(list.Items)
	return ""
}

// stamp stamps every host of the run: the run has left each as the plan has it.
func (u *upRun) stamp(ctx context.Context, p *plan) error {
	_, err := u.e.play(ctx, Play{Name: "stamp", Hosts: names(p.hosts), Run: func(ctx context.Context, name string) (bool, error) {
		digest, paths, err := u.stampOf(p, name)
		if err != nil {
			return false, err
		}
		n, err := u.node(p, name)
		if err != nil {
			return false, err
		}
		return false, apply.Stamp(ctx, u.e.Conn(name), digest, paths, n.PodRoutes)
	}})
	return err
}
