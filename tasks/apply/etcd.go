package apply

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/tasks/wait"
	"github.com/clusterctl/clusterctl/transport"
)

// ControlPlaneHost is a control-plane host, whose local ports (etcd's metrics) are reached through it.
type ControlPlaneHost interface {
	Host
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// RestartEtcdAlone restarts a running etcd member whose manifest (among files) is about to change while the
// node's API server is stopped: the API server talks to its local member only, and requests it holds while
// that member restarts would hang. The API server's manifest is removed and the kubelet stops it
// (gracefully: it fails /readyz, proxies and load balancers move away, it drains); then etcd's is replaced
// (Manifests: the old member stopped first), until a new etcd process answers /readyz. The other
// manifests, the API server's new one among them, are left to the caller: written now, they would be
// Pods whose mirror Pods the kubelet cannot update while the API server is away (it tries again at its
// next sync, up to a minute later). It reports what it wrote and whether it restarted etcd (nothing when
// etcd's manifest is unchanged or etcd is not running).
func RestartEtcdAlone(ctx context.Context, h ControlPlaneHost, files []transport.File, timeout time.Duration, say func(string, ...any)) (Outcome, bool, error) {
	var out Outcome
	var etcdFile []transport.File
	for _, f := range files {
		if f.Path == kubeadm.Manifest(kubeadm.Etcd) {
			etcdFile = append(etcdFile, f)
		}
	}
	if len(etcdFile) == 0 {
		return out, false, nil
	}
	diff, err := h.Diff(ctx, etcdFile)
	if err != nil || diff[0] != transport.ChangeContent {
		return out, false, err
	}
	oldPID, err := PIDs(ctx, h, kubeadm.Etcd)
	if err != nil || len(oldPID) == 0 {
		return out, false, err // not running: nothing to protect
	}
	say("stopping the API server while etcd restarts")
	if _, err := h.Run(ctx, scripts.StopStaticPods([]string{kubeadm.APIServer}, int(timeout/(200*time.Millisecond)), previous(files)), nil); err != nil {
		return out, true, err
	}
	etcdOut, err := Manifests(ctx, h, etcdFile, false, timeout)
	out.Add(etcdOut)
	if err != nil {
		return out, true, err
	}
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: h.DialContext}}
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", kubeadm.PortEtcdMetrics)
	return out, true, wait.Poll(ctx, wait.Options{Timeout: timeout, Report: func(w string) { say("waiting for %s", w) }}, func() (bool, string, error) {
		pid, err := PIDs(ctx, h, kubeadm.Etcd)
		if err != nil {
			return false, "", err
		}
		if len(pid) == 0 || slices.Equal(pid, oldPID) {
			return false, "etcd to restart", nil
		}
		resp, err := client.Get(url)
		if err != nil {
			return false, "etcd to be ready (" + err.Error() + ")", nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "etcd to be ready (" + resp.Status + ")", nil
	})
}

// Manifests writes static Pod manifests (as Files). A running Pod whose manifest changes is stopped first,
// and the new manifest written once the kubelet is done with the old Pod: the kubelet starts a static
// Pod whose name another Pod still holds only after a back-off of 10-15 s, and a changed manifest is such a
// Pod (measured in rotations: a new API server ready 12 s after its old one stopped, 4 s when its manifest
// came after the old Pod was gone; the scheduler's new Pod as late).
func Manifests(ctx context.Context, h Host, files []transport.File, dry bool, timeout time.Duration) (Outcome, error) {
	if dry || len(files) == 0 {
		return Files(ctx, h, files, dry)
	}
	diff, err := h.Diff(ctx, files)
	if err != nil {
		return Outcome{}, err
	}
	var stop []string
	var owner *scripts.EtcdUser // the user a restarted etcd runs as (profile cis)
	for i, f := range files {
		if diff[i] == transport.ChangeContent {
			stop = append(stop, strings.TrimSuffix(path.Base(f.Path), ".yaml"))
			if f.Path == kubeadm.Manifest(kubeadm.Etcd) {
				owner = manifestUser(f.Data)
			}
		}
	}
	if len(stop) > 0 {
		if _, err := h.Run(ctx, scripts.StopStaticPods(stop, int(timeout/(200*time.Millisecond)), previous(files)), nil); err != nil {
			return Outcome{}, err
		}
	}
	if owner != nil {
		// What the member wrote as root until now becomes the etcd user's before it starts as that user.
		if _, err := h.Run(ctx, scripts.EtcdDataOwner(*owner), nil); err != nil {
			return Outcome{}, err
		}
	}
	return Files(ctx, h, files, false)
}

// PIDs are the process IDs of the program name (etcd, kube-apiserver) running on a host.
func PIDs(ctx context.Context, h Host, name string) ([]string, error) {
	res, err := h.Run(ctx, scripts.PIDs(name), nil)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(res.Stdout)), nil
}

// previous is where files keep what they replace (transport.File.Previous), "" when they keep nothing.
func previous(files []transport.File) string {
	for _, f := range files {
		if f.Previous != "" {
			return f.Previous
		}
	}
	return ""
}
