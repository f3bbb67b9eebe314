package apply

import (
	"context"
	"crypto/x509"
	"strings"
	"time"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/tasks/workloads"
)

// RemoveFiles removes files from a host and reports whether any was there.
func RemoveFiles(ctx context.Context, h Host, files ...string) (bool, error) {
	res, err := h.Run(ctx, scripts.RemoveFiles(files...), nil)
	return err == nil && len(res.Stdout) > 0, err
}

// ReadCert reads the first certificate (never the key) of a PEM file on a host; nil when there is none.
func ReadCert(ctx context.Context, h Host, file string) (*x509.Certificate, error) {
	res, err := h.Run(ctx, scripts.ReadCert(file), nil)
	if err != nil {
		return nil, err
	}
	if len(strings.TrimSpace(string(res.Stdout))) == 0 {
		return nil, nil
	}
	return pki.ParseCert(res.Stdout)
}

// RenewServing removes the kubelet's serving pair and restarts it: the kubelet requests a new one. It
// returns when the kubelet was restarted, by the host's clock.
func RenewServing(ctx context.Context, h Host) (time.Time, error) {
	return renewServing(ctx, h, kubeadm.KubeletServerCurrent)
}

func renewServing(ctx context.Context, h Host, file string) (time.Time, error) {
	res, err := h.Run(ctx, scripts.RenewServing(file), nil)
	if err != nil {
		return time.Time{}, err
	}
	return startedOf(h, res.Stdout)
}

// OldPodTokens are the running Pods (running: by UID) on a host whose service-account token the key kid did
// not sign.
func OldPodTokens(ctx context.Context, h Host, running map[string]string, kid string) ([]string, error) {
	return oldPodTokens(ctx, h, kubeadm.KubeletPodsDir, running, kid)
}

func oldPodTokens(ctx context.Context, h Host, podsDir string, running map[string]string, kid string) ([]string, error) {
	res, err := h.Run(ctx, scripts.PodTokens(podsDir), nil)
	if err != nil {
		return nil, err
	}
	return workloads.OldTokens(res.Stdout, podsDir, running, kid), nil
}

// NodeState is a one-line summary of the kubelet and the Pods it runs, or why it cannot be read.
func NodeState(ctx context.Context, h Host) string {
	res, err := h.Run(ctx, scripts.NodeState(), nil)
	if err != nil {
		return "cannot read the node's state: " + err.Error()
	}
	return strings.TrimSpace(string(res.Stdout))
}

// Diagnose gathers what explains an API server that does not come up (the kubelet's state and log, etcd's
// and the API server's last lines), within 20 s even when ctx is done.
func Diagnose(ctx context.Context, h Host) string {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	res, err := h.Run(dctx, scripts.Diagnose(), nil)
	if err != nil {
		return "(cannot read the node's logs: " + err.Error() + ")"
	}
	return strings.TrimSpace(string(res.Stdout))
}

// ResetFiles are what reset removes besides the cluster's own directories: the binaries and the runtime's
// files clusterctl installed (each restored from its backup, if any).
type ResetFiles struct {
	Binaries, Runtime []string
	// Network is what the pod networks leave (every one clusterctl sets up: the inventory may have
	// changed since up).
	Network scripts.NetworkLeftovers
	// SnapshotsDir, when set, is the etcd snapshots' directory, whose snapshots are removed too.
	SnapshotsDir string
}

// Reset undoes on a host everything up did (scripts.Reset). Its script works on the system's own paths: the
// lab's end-to-end tests run it and check what it leaves.
func Reset(ctx context.Context, h Host, f ResetFiles, backupDir, absentSuffix string) error {
	_, err := h.Run(ctx, "sh -s", []byte(scripts.Reset(f.Binaries, f.Runtime, backupDir, absentSuffix, f.Network, f.SnapshotsDir)))
	return err
}

// ResetPlan is Reset's read-only twin: what reset would undo on a host.
func ResetPlan(ctx context.Context, h Host, f ResetFiles, backupDir string) ([]string, error) {
	return run(ctx, h, scripts.ResetPlan(f.Binaries, f.Runtime, backupDir, f.Network, f.SnapshotsDir))
}

// RestartContainers stops the running containers name of the Pods of namespace on a node through its
// container runtime, so that the kubelet starts them again in their Pods, and waits at most timeout until
// as many run again. It reports whether there were any (a node whose runtime does not answer has none).
func RestartContainers(ctx context.Context, h Host, namespace, name string, timeout time.Duration) (bool, error) {
	res, err := h.Run(ctx, scripts.RestartContainers(namespace, name, int(timeout/(200*time.Millisecond))), nil)
	return err == nil && len(res.Stdout) > 0, err
}
