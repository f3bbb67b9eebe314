package apply

import (
	"context"
	"errors"
	"io/fs"
	"strings"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/transport"
)

// RollbackDir is where an upgrade to version keeps, for its phase ("control-plane", "kubelet"), what it
// replaced of a node's files (transport.File.Previous), until the run ends.
func RollbackDir(version, phase string) string {
	return RollbackRoot + "/" + version + "/" + phase
}

// RollbackRoot holds every kept file of the upgrade under way; the run's end removes it.
const RollbackRoot = kubeadm.StateDir + "/rollback"

// KeptManifests are the static Pod manifests of components kept under dir (the versions they replaced),
// as files to write back (mode 0600, as kubeadm writes them); a component whose manifest was not replaced
// is left out.
func KeptManifests(ctx context.Context, h Host, dir string, components []string) ([]transport.File, error) {
	var out []transport.File
	for _, c := range components {
		p := kubeadm.Manifest(c)
		data, err := h.Get(ctx, dir+p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, transport.File{Path: p, Data: data, Mode: 0o600})
	}
	return out, nil
}

// Rollback puts back a node's files kept under p.Dir (but p.Except's) and restarts containerd when its
// files changed (scripts.Rollback); with p.Drop it forgets them. It reports what it did.
func Rollback(ctx context.Context, h Host, p scripts.RollbackParams) (Outcome, error) {
	actions, err := run(ctx, h, scripts.Rollback(p))
	var out Outcome
	for _, a := range actions {
		if f, ok := strings.CutPrefix(a, "put back "); ok {
			out.Files = append(out.Files, FileChange{Path: f, Change: transport.ChangeContent})
			continue
		}
		out.Actions = append(out.Actions, a)
	}
	return out, err
}
