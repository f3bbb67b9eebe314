// Package apply is clusterctl's work on one host's files and services: put a node's files (or, in a dry
// run, find which would change), apply what they need (kernel settings, units, the runtime, images) with
// restart stamps, start or restart the kubelet, point a worker's kubelet at the API endpoint, install the
// pod routes; read a node's state, certificates and Pods' tokens; remove files; reset a host; take an etcd
// member through a restore. Playbooks do their work on hosts through these typed functions only, never a
// script of their own or a marker parsed from its output. Each function takes the narrow Host it needs;
// transport.Conn is one.
package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clusterctl/clusterctl/tasks"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/kubeconfig"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/tasks/textdiff"
	"github.com/clusterctl/clusterctl/transport"
)

// Host is what the work needs of a host.
type Host interface {
	tasks.Runner
	Put(ctx context.Context, files []transport.File) ([]bool, error)
	Diff(ctx context.Context, files []transport.File) ([]transport.Change, error)
	Get(ctx context.Context, path string) ([]byte, error)
}

var _ Host = (*transport.Conn)(nil)

// FileChange is one file a run writes, or in a dry run would write.
type FileChange struct {
	Path   string           `json:"path"`
	Change transport.Change `json:"change"`
	Size   int              `json:"size"`
	// Diff is, in a dry run, the unified diff from what the host holds to what would be written, for a
	// text file of at most 256 KiB whose content changes; Redacted says a secret's (a file no one but its
	// owner may read: keys, kubeconfigs, the encryption configuration) was not shown.
	Diff     string `json:"diff,omitempty"`
	Redacted bool   `json:"redacted,omitempty"`
}

// Outcome is what a unit of work changed on a host, or in a dry run would change.
type Outcome struct {
	Files   []FileChange
	Actions []string
	// Started is when a service the run (re)started was started, by the host's clock (whole seconds):
	// what the service reports from then on is its own, not its predecessor's. Zero: none.
	Started time.Time
}

// Changed reports whether anything changed.
func (o *Outcome) Changed() bool { return len(o.Files)+len(o.Actions) > 0 }

// Add adds another outcome's changes.
func (o *Outcome) Add(other Outcome) {
	o.Files = append(o.Files, other.Files...)
	o.Actions = append(o.Actions, other.Actions...)
	if other.Started.After(o.Started) {
		o.Started = other.Started
	}
}

// Changed paths of the outcome.
func (o *Outcome) Paths() []string {
	out := make([]string, len(o.Files))
	for i, f := range o.Files {
		out[i] = f.Path
	}
	return out
}

// Files writes files that differ (atomically, see transport.Conn.Put) or, in a dry run, only finds them.
func Files(ctx context.Context, h Host, files []transport.File, dry bool) (Outcome, error) {
	var out Outcome
	if len(files) == 0 {
		return out, nil
	}
	if dry {
		changes, err := h.Diff(ctx, files)
		if err != nil {
			return out, err
		}
		for i, f := range files {
			if changes[i] != transport.ChangeNone {
				out.Files = append(out.Files, FileChange{Path: f.Path, Change: changes[i], Size: int(f.Len())})
			}
		}
		return out, diffContents(ctx, h, files, out.Files)
	}
	changed, err := h.Put(ctx, files)
	if err != nil {
		return out, err
	}
	for i, f := range files {
		if changed[i] {
			out.Files = append(out.Files, FileChange{Path: f.Path, Change: transport.ChangeContent, Size: int(f.Len())})
		}
	}
	return out, nil
}

// Node is one node's push: its files, the membership mark first (written alone, so that a host holding any
// of clusterctl's files is marked, and a re-run after an interruption expects them), the image archives
// among them, and the runtime's binaries when clusterctl installs them.
type Node struct {
	Mark   transport.File
	Files  []transport.File
	Images []scripts.Image
	// Runtime are the runtime's binaries clusterctl installs (containerd, its shim, runc): containerd
	// restarts when one changes. Empty: the host's own containerd.
	Runtime []string
	Dry     bool
	// Stamps is where the applied-file stamps are kept (kubeadm.StampsDir when empty), VersionCache the
	// components' versions (kubeadm.VersionCache when empty).
	Stamps, VersionCache string
	// EtcdUnit: the host runs a member of an external etcd cluster; EtcdOnly: nothing else (no node).
	EtcdUnit, EtcdOnly bool
	// NetworkUnits are the pod network's units among the files; PodRoutes the routes file of the unit
	// PodRoutesUnit among them (scripts.SetupParams).
	NetworkUnits             []string
	PodRoutes, PodRoutesUnit string
	// Networkd is systemd-networkd's drop-in among the files (scripts.SetupParams); "": none.
	Networkd string
	// Partial: Files are some of the node's only (scripts.SetupParams.Partial); Snapshots: the node's files,
	// all of them (also those a partial push lacks), hold the etcd snapshots' schedule.
	Partial, Snapshots bool
}

// Push puts a node's files and applies what they need (templates/files/setup.sh). The host's stamp
// (Stamp) is emptied with its files, before the setup and anything a run does after the push: the host is
// as a plan has it only once a run has stamped it again (a file the push changed changes the stamp's state
// of it anyway).
func Push(ctx context.Context, h Host, n Node) (Outcome, error) {
	out, err := Files(ctx, h, []transport.File{n.Mark}, n.Dry)
	if err != nil {
		return out, err
	}
	files := n.Files
	if !n.Dry {
		files = append([]transport.File{{Path: kubeadm.HostStamp, Mode: 0o600}}, n.Files...)
	}
	rest, err := Files(ctx, h, files, n.Dry)
	rest.Files = slices.DeleteFunc(rest.Files, func(f FileChange) bool { return f.Path == kubeadm.HostStamp })
	if err != nil {
		return out, err
	}
	out.Add(rest)
	actions, err := run(ctx, h, SetupScript(n, rest.Paths()))
	out.Actions = append(out.Actions, actions...)
	return out, err
}

// Stamp writes the host's stamp (kubeadm.HostStamp): the digest of the plan the run left the host as, the
// state (inode, size, times) of the files it wrote, paths, and its pod routes file (routes, "": none). The
// facts script reads it back (facts.Facts.Settled): a re-run with the same plan whose files are as they
// were, and whose routes the kernel has, has nothing to do there.
func Stamp(ctx context.Context, h Host, digest string, paths []string, routes string) error {
	_, err := run(ctx, h, scripts.Stamp(scripts.StampParams{Path: kubeadm.HostStamp, Digest: digest, Paths: paths, Routes: routes}))
	return err
}

// SetupScript is the script Push runs after writing a node's files, changed those it wrote.
func SetupScript(n Node, changed []string) string {
	return scripts.Setup(scripts.SetupParams{Changed: changed, Images: n.Images, Runtime: n.Runtime, Dry: n.Dry, Stamps: n.Stamps,
		VersionCache: n.VersionCache, EtcdUnit: n.EtcdUnit, EtcdOnly: n.EtcdOnly, NetworkUnits: n.NetworkUnits, Partial: n.Partial,
		PodRoutes: n.PodRoutes, PodRoutesUnit: n.PodRoutesUnit, Networkd: n.Networkd,
		Snapshots: n.Snapshots, PrivateDirs: privateDirs(n), EtcdUser: etcdUser(n.Files)})
}

// privateDirs are the directories of the node's files that only root may enter: etcd's data on a member
// (stacked or external), the API server's configuration and audit log on a control-plane node.
func privateDirs(n Node) []string {
	var out []string
	for _, f := range n.Files {
		switch {
		case f.Path == path.Join(kubeadm.ManifestsDir, "etcd.yaml") && !slices.Contains(out, kubeadm.EtcdDataDir):
			out = append(out, kubeadm.EtcdDataDir)
		case path.Dir(f.Path) == kubeadm.APIServerConfigDir && !slices.Contains(out, kubeadm.APIServerConfigDir):
			out = append(out, kubeadm.APIServerConfigDir, kubeadm.AuditLogDir)
		}
	}
	if n.EtcdUnit && !slices.Contains(out, kubeadm.EtcdDataDir) {
		out = append(out, kubeadm.EtcdDataDir)
	}
	return out
}

// Etcd starts or restarts an external etcd member as scripts.Etcd says.
func Etcd(ctx context.Context, h Host, p scripts.EtcdParams) (Outcome, error) {
	actions, err := run(ctx, h, scripts.Etcd(p))
	return Outcome{Actions: actions}, err
}

// Kubelet starts the kubelet, or restarts it when its inputs changed since it last started with them or
// restart says so; a running kubelet with nothing new is left alone.
func Kubelet(ctx context.Context, h Host, p scripts.KubeletParams) (Outcome, error) {
	res, err := h.Run(ctx, "sh -s", []byte(scripts.Kubelet(p)))
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Actions: actionsOf(res.Stdout)}
	out.Started, err = startedOf(h, res.Stdout)
	return out, err
}

// startedOf reads the host's clock a script printed ("started: " and seconds) before it started or
// restarted the kubelet; zero when it printed none.
func startedOf(h Host, stdout []byte) (time.Time, error) {
	var at time.Time
	for _, line := range strings.Split(string(stdout), "\n") {
		if s, ok := strings.CutPrefix(line, "started: "); ok {
			sec, err := strconv.ParseInt(s, 10, 64)
			if err != nil || sec <= 0 {
				return at, fmt.Errorf("%s: the kubelet's start time %q is not a time in seconds", h.Name(), s)
			}
			at = time.Unix(sec, 0)
		}
	}
	return at, nil
}

// RoutesUnit is a node's pod routes unit and the files that go with it.
type RoutesUnit struct {
	// Files are the unit's file, its routes file, and the node's CNI configuration when it gets one.
	Files []transport.File
	// Routes says what to do with them (Inputs: the paths among Files whose change restarts the unit).
	Routes scripts.RoutesParams
}

// Routes puts the pod routes unit's files and restarts the unit when its inputs changed or the kernel lacks
// one of its routes.
func Routes(ctx context.Context, h Host, u RoutesUnit) (Outcome, error) {
	out, err := Files(ctx, h, u.Files, false)
	if err != nil {
		return out, err
	}
	actions, err := run(ctx, h, scripts.Routes(u.Routes))
	out.Actions = append(out.Actions, actions...)
	return out, err
}

// Repoint points a worker's kubelet.conf (file: its own, from TLS bootstrap) at the endpoint nodes use and
// the cluster's CA data, and reports whether it changed it. The file is read, changed and written back
// whole (atomically): nothing of it passes through a shell. A worker not joined yet has none: nothing to do.
func Repoint(ctx context.Context, h Host, file, endpoint string, caPEM []byte, dry bool) (Outcome, error) {
	data, err := h.Get(ctx, file)
	if errors.Is(err, fs.ErrNotExist) {
		return Outcome{}, nil
	}
	if err != nil {
		return Outcome{}, err
	}
	out, changed, err := kubeconfig.Repoint(data, endpoint, caPEM)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %s: %w", h.Name(), file, err)
	}
	if !changed {
		return Outcome{}, nil
	}
	return Files(ctx, h, []transport.File{{Path: file, Data: out, Mode: 0o600}}, dry)
}

// run runs a script and returns the actions it reports ("action: WHAT" lines).
func run(ctx context.Context, h Host, script string) ([]string, error) {
	res, err := h.Run(ctx, "sh -s", []byte(script))
	if err != nil {
		return nil, err
	}
	return actionsOf(res.Stdout), nil
}

// actionsOf are the "action: " lines of a script's output.
func actionsOf(stdout []byte) []string {
	var actions []string
	for _, line := range strings.Split(string(stdout), "\n") {
		if a, ok := strings.CutPrefix(line, "action: "); ok {
			actions = append(actions, a)
		}
	}
	return actions
}

// KubeletFile reports whether a change to p needs the kubelet restarted.
func KubeletFile(p string) bool {
	switch p {
	case kubeadm.KubeletConfig, kubeadm.KubeletFlags, kubeadm.KubeletUnit, kubeadm.KubeletDropIn, kubeadm.BootstrapKubeconfig,
		kubeadm.KubeletKubeconfig, kubeadm.CACert, kubeadm.Binary("kubelet"):
		return true
	}
	return false
}

// KubeletInputs are the files the kubelet starts with whose change needs a restart. The kubelet's own
// kubeconfig on workers is its to write (TLS bootstrap), and the bootstrap kubeconfig matters only before
// joining (a changed one restarts the kubelet through the run's change list).
func KubeletInputs(controlPlane bool, binary string) []string {
	in := []string{kubeadm.KubeletConfig, kubeadm.KubeletFlags, kubeadm.KubeletUnit, kubeadm.KubeletDropIn, kubeadm.CACert, binary}
	if controlPlane {
		in = append(in, kubeadm.KubeletKubeconfig)
	}
	return in
}

// MayPreexist tells the files a host may have had before clusterctl (a runtime's configuration, kernel
// settings, the kubelet's unit from a package, a binary in /usr/local/bin) from those that are clusterctl's
// alone (under /etc/kubernetes, the kubelet's and clusterctl's state, names that say clusterctl). Put keeps
// the originals of the first kind for reset to restore.
func MayPreexist(p string) bool {
	for _, own := range []string{kubeadm.KubernetesDir + "/", kubeadm.KubeletDir + "/", kubeadm.StateDir + "/"} {
		if strings.HasPrefix(p, own) {
			return false
		}
	}
	return !strings.Contains(path.Base(p), "clusterctl")
}

// SwitchKubeletClient gives a kubelet a new client pair (certificate and key, PEM): a new
// kubelet-client-<time>.pem beside the current one, kubelet-client-current.pem pointed at it, the kubelet
// restarted unless the caller restarts it itself (restart false). It returns when the kubelet was
// restarted, by the host's clock (zero when it was not).
func SwitchKubeletClient(ctx context.Context, h Host, pair []byte, at time.Time, restart bool) (time.Time, error) {
	file := fmt.Sprintf("kubelet-client-%s.pem", at.UTC().Format("2006-01-02-15-04-05"))
	if _, err := h.Put(ctx, []transport.File{{Path: path.Join(kubeadm.KubeletPKIDir, file), Data: pair, Mode: 0o600}}); err != nil {
		return time.Time{}, err
	}
	res, err := h.Run(ctx, scripts.SwitchKubeletClient(file, restart), nil)
	if err != nil {
		return time.Time{}, err
	}
	return startedOf(h, res.Stdout)
}

// diffLimit is the largest file a dry run shows the diff of.
const diffLimit = 256 << 10

// diffContents fills in the diff of each changed file: what the host holds (read back, bounded) against
// what would be written; secrets are marked redacted instead, binaries and large files left without.
func diffContents(ctx context.Context, h Host, files []transport.File, changes []FileChange) error {
	byPath := make(map[string]*transport.File, len(files))
	for i := range files {
		byPath[files[i].Path] = &files[i]
	}
	for i := range changes {
		c := &changes[i]
		f := byPath[c.Path]
		if c.Change != transport.ChangeContent && c.Change != transport.ChangeCreate || f == nil {
			continue
		}
		if f.Mode.Perm()&0o077 == 0 && f.Mode.Perm() != 0 {
			c.Redacted = true
			continue
		}
		if f.Source != "" || len(f.Data) > diffLimit || !isText(f.Data) {
			continue
		}
		var old []byte
		if c.Change == transport.ChangeContent {
			b, err := h.Get(ctx, f.Path)
			if err != nil {
				if ctx.Err() != nil {
					return err
				}
				continue // larger than Get reads, or gone meanwhile: no diff shown
			}
			if len(b) > diffLimit || !isText(b) {
				continue
			}
			old = b
		}
		c.Diff = textdiff.Unified(f.Path+" (on the host)", f.Path+" (clusterctl's)", string(old), string(f.Data), 3)
	}
	return nil
}

// isText: valid UTF-8 without NUL bytes.
func isText(b []byte) bool { return utf8.Valid(b) && !bytes.Contains(b, []byte{0}) }
