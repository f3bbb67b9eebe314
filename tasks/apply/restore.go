package apply

import (
	"context"
	"strings"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/scripts"
)

// The steps of an etcd restore on a host. A control-plane node's etcd and control plane are held by moving
// their manifests aside (to scripts.EtcdHold), an external member by stopping its unit; each step reports
// whether it changed anything, and one done already changes nothing, so that a resumed restore repeats it
// safely.

// RestoreCheck says what a host lacks to take part in a restore (etcdutl; an etcd manifest, or for an
// external member its unit), one line each; none when it can.
func RestoreCheck(ctx context.Context, h Host, external bool) ([]string, error) {
	p := scripts.RestoreCheckParams{Etcdutl: kubeadm.Binary("etcdutl"), Manifest: kubeadm.Manifest(kubeadm.Etcd),
		Held: scripts.EtcdHold + "/" + kubeadm.Etcd + ".yaml"}
	if external {
		p.Unit = kubeadm.EtcdUnit
	}
	return restoreCheck(ctx, h, p)
}

func restoreCheck(ctx context.Context, h Host, p scripts.RestoreCheckParams) ([]string, error) {
	res, err := h.Run(ctx, scripts.RestoreCheck(p), nil)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			missing = append(missing, line)
		}
	}
	return missing, nil
}

// HoldEtcdUnit stops an external member's unit; true when it was running.
func HoldEtcdUnit(ctx context.Context, h Host) (bool, error) {
	return marked(ctx, h, scripts.StopEtcdUnit(), "held ")
}

// ReleaseEtcdUnit starts an external member's unit again without waiting for it (every member of the
// restored cluster must start before any is ready); true when it was stopped.
func ReleaseEtcdUnit(ctx context.Context, h Host) (bool, error) {
	return marked(ctx, h, scripts.StartEtcdUnit(), "released ")
}

// HoldControlPlane moves a control-plane node's etcd and control-plane manifests aside and waits (every half
// second, at most tries times) until none of them runs; true when it moved any.
func HoldControlPlane(ctx context.Context, h Host, tries int) (bool, error) {
	return holdControlPlane(ctx, h, scripts.EtcdHold, kubeadm.ManifestsDir, tries)
}

func holdControlPlane(ctx context.Context, h Host, hold, dir string, tries int) (bool, error) {
	return marked(ctx, h, scripts.HoldControlPlane(hold, dir, tries), "held ")
}

// ReleaseEtcd puts a held etcd manifest back; true when there was one.
func ReleaseEtcd(ctx context.Context, h Host) (bool, error) {
	return release(ctx, h, scripts.EtcdHold, kubeadm.ManifestsDir, kubeadm.Etcd)
}

// ReleaseControlPlane puts the held manifests of the control plane but etcd back; true when there were any.
func ReleaseControlPlane(ctx context.Context, h Host) (bool, error) {
	return release(ctx, h, scripts.EtcdHold, kubeadm.ManifestsDir, kubeadm.ControlPlaneComponents[1:]...)
}

func release(ctx context.Context, h Host, hold, dir string, components ...string) (bool, error) {
	var names []string
	for _, c := range components {
		names = append(names, c+".yaml")
	}
	return marked(ctx, h, scripts.ReleaseManifests(hold, dir, names...), "released ")
}

// RestoreMember restores a member's data directory from a snapshot already on the host (p.Snapshot), the
// data directory it replaces kept beside it; etcd must be held.
func RestoreMember(ctx context.Context, h Host, p scripts.EtcdRestoreParams) error {
	_, err := h.Run(ctx, scripts.RestoreEtcd(p), nil)
	return err
}

// marked runs a script and reports whether a line of its output starts with prefix.
func marked(ctx context.Context, h Host, script, prefix string) (bool, error) {
	res, err := h.Run(ctx, script, nil)
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if strings.HasPrefix(line, prefix) {
			return true, nil
		}
	}
	return false, nil
}
