package playbooks

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/artifacts/pull"
	"github.com/clusterctl/clusterctl/tasks/hooks"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/transport"
)

// ResetOptions tune reset.
type ResetOptions struct {
	// Hosts are the hosts reset (the session's when nil).
	Hosts []*inventory.Host
	// Force resets hosts that do not carry this cluster's mark (another cluster's, or none).
	Force bool
	// Hooks runs the inventory's hooks of reset before and after, on the hosts reached (remove-node runs
	// its own instead).
	Hooks bool
	// DryRun changes nothing: Record gets, per host, what reset would do there (the membership check and
	// the hooks are the real ones; the rest is read from the host).
	DryRun bool
	Record func(host, action string)
	// RemoveSnapshots removes the etcd members' scheduled snapshots too (the directory of
	// cluster.etcd.snapshots, else the default one); they are kept otherwise.
	RemoveSnapshots bool
}

// ErrNotMember is the error of a host reset refuses: it carries another cluster's mark.
var ErrNotMember = apply.ErrNotMember

// Reset undoes what Up made on each host that carries this cluster's membership mark, the hosts in
// parallel: kubelet stopped and disabled, every container of the Kubernetes namespace removed, mounts,
// network namespaces, the cni0 bridge and pod routes, the KUBE- iptables chains and the rules that jump to
// them (by name, nothing else of the tables touched), kube-proxy's nftables tables, clusterctl's files and units, the kubelet's and etcd's
// state, and the binaries pushed from an artifacts directory; then the host's own files that up replaced
// are put back. Unrelated files are left alone; image archives already imported into containerd are kept
// (a later up then imports nothing). A host with no mark has nothing of clusterctl's and is skipped; one
// with another cluster's mark is refused; Force resets both. An unreachable host is reported and the others
// are reset.
func Reset(ctx context.Context, e *Env, o ResetOptions) ([]transport.HostResult, error) {
	if o.Hosts == nil {
		o.Hosts = e.Hosts
	}
	r := &resetRun{e: e, o: o}
	_, err := runSteps(ctx, runOptions{Sink: e.Sink}, nil, r.steps())
	return append(r.results, r.unreachable...), err
}

// steps are a reset's, in order. A reset killed half-way is finished by running it again: the reset script
// undoes whatever of clusterctl's is left on a host.
func (r *resetRun) steps() []Step {
	return []Step{
		// every host at once; one that cannot be reached is reported, and the others are reset
		{Name: "connect", Run: do(r.connect)},
		// the inventory's hooks.reset.before on the hosts reached
		{Name: "hooks-before", Run: do(r.hooks("before", func() []string { return r.reachable })), Skip: unless(r.noHooks)},
		// each host that carries this cluster's mark (see apply.CheckMember), in parallel
		{Name: "reset", Run: do(r.reset), Skip: unless(r.noneReachable)},
		// hooks.reset.after on the hosts reset
		{Name: "hooks-after", Run: do(r.hooks("after", r.resetHosts)), Skip: unless(r.noHooks)},
	}
}

// resetRun is one run of Reset.
type resetRun struct {
	e           *Env
	o           ResetOptions
	reachable   []string
	unreachable []transport.HostResult
	results     []transport.HostResult
}

func (r *resetRun) connect(ctx context.Context) error {
	results, err := Connect(ctx, r.e, r.o.Hosts, 1)
	for _, res := range results {
		if res.Err == nil {
			r.reachable = append(r.reachable, res.Host)
		} else {
			r.unreachable = append(r.unreachable, res)
		}
	}
	return err
}

func (r *resetRun) noHooks() string {
	if !r.o.Hooks {
		return "hooks are the caller's"
	}
	return ""
}

// resetHosts are the hosts the reset play succeeded on.
func (r *resetRun) resetHosts() []string {
	var out []string
	for _, res := range r.results {
		if res.Err == nil && res.Status != transport.StatusSkipped {
			out = append(out, res.Host)
		}
	}
	return out
}

func (r *resetRun) hooks(when string, on func() []string) func(context.Context) error {
	return func(ctx context.Context) error {
		var hosts []*inventory.Host
		for _, name := range on() {
			hosts = append(hosts, r.e.Inv.Host(name))
		}
		return r.e.runHooks(ctx, hooks.Point{Command: inventory.HookReset, When: when}, hosts, r.o.DryRun, r.o.Record)
	}
}

func (r *resetRun) noneReachable() string {
	if len(r.reachable) == 0 {
		return "no host reachable"
	}
	return ""
}

func (r *resetRun) reset(ctx context.Context) error {
	e := r.e
	marks := memberMarks(e.Inv.Cluster.Name, e.StateDir)
	var binaries, runtime []string
	for _, b := range append(slices.Clone(pull.KubernetesBinaries), pull.EtcdBinaries...) {
		binaries = append(binaries, kubeadm.Binary(b))
	}
	if e.Inv.Cluster.InstallsRuntime() {
		for _, b := range append(slices.Clone(pull.ContainerdBinaries), "runc", "crictl") {
			runtime = append(runtime, kubeadm.RuntimeBinary(b))
		}
		for _, p := range pull.CNIPlugins {
			runtime = append(runtime, kubeadm.CNIPlugin(p))
		}
		runtime = append(runtime, kubeadm.ContainerdUnit)
	}
	files := apply.ResetFiles{Binaries: binaries, Runtime: runtime, Network: networkLeftovers()}
	if r.o.RemoveSnapshots {
		files.SnapshotsDir = inventory.DefaultSnapshotDir
		if s := e.Inv.Cluster.Etcd.Snapshots; s != nil {
			files.SnapshotsDir = s.Dir
		}
	}
	var err error
	r.results, err = e.play(ctx, Play{Name: "reset", Hosts: r.reachable, Policy: transport.Policy{MaxFail: 1}, Run: func(ctx context.Context, name string) (bool, error) {
		conn := e.Conn(name)
		if err := apply.CheckMember(ctx, conn, marks, r.o.Force); err != nil {
			if errors.Is(err, transport.ErrSkipped) {
				e.say("reset", name, "no %s: clusterctl made nothing here; left alone (--force resets it anyway)", kubeadm.MemberPath)
			}
			return false, err
		}
		if r.o.DryRun {
			actions, err := apply.ResetPlan(ctx, conn, files, transport.BackupDir)
			if len(actions) == 0 && err == nil {
				actions = []string{"nothing of clusterctl's is left to undo"}
			}
			for _, a := range actions {
				r.o.Record(name, a)
			}
			return false, err
		}
		err := apply.Reset(ctx, conn, files, transport.BackupDir, transport.AbsentSuffix)
		return err == nil, err
	}})
	return err
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
	if rot, err := store.Rotation(); err == nil && rot != nil && pki.StagesDone(rot) >= pki.StageGenerate {
		if others, err := store.Others(rot); err == nil {
			marks = append(marks, MemberMark(cluster, pki.CAHash(others.CAs["ca"].Cert)))
		}
	}
	return marks
}
