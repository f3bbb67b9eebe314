package playbooks

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/render"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/transport"
)

// rollControlPlane pushes a control-plane node's files and, when any changed, restarts what reads them (the
// kubelet restarts static Pods whose manifests changed; the kubelet itself restarts if its files did), and
// waits until its static Pods run the current manifests and are Ready, and its API server is ready.
func (d *deployment) rollControlPlane(ctx context.Context, play string, h *inventory.Host) (bool, error) {
	first, err := d.restartEtcdAlone(ctx, play, h)
	if err != nil {
		return first, err
	}
	changed, err := d.push(ctx, play, []string{h.Name}, 1)
	if err != nil {
		return false, err
	}
	changed = changed || first
	if changed {
		if err := d.startKubelet(ctx, play, []string{h.Name}); err != nil {
			return true, err
		}
	}
	// Also when nothing changed: a run interrupted after the push resumes here, and the node must be back
	// with its files before the next one is touched (a check of four Pods when it is).
	if err := d.waitStaticPods(ctx, play, h); err != nil {
		return changed, err
	}
	if !changed {
		return false, nil
	}
	return true, d.waitNodeAPI(ctx, h)
}

// restartEtcdAlone restarts a running etcd member whose manifest is about to change while the node's API
// server is stopped: the API server talks to its local member only, and requests it holds while that member
// restarts would hang. The node's files other than the two manifests go first (etcd and the API server
// reload certificates themselves); then the API server's manifest is removed and the kubelet stops it
// (gracefully: it fails /readyz, proxies and load balancers move away, it drains); then the new etcd
// manifest, until a new etcd process answers /readyz; the API server's new manifest follows with the rest.
// With a single control-plane node it does nothing. It reports whether it changed anything.
func (d *deployment) restartEtcdAlone(ctx context.Context, play string, h *inventory.Host) (bool, error) {
	if len(render.ControlPlanes(d.e.Inv, d.cps)) < 2 {
		// One API server: there is nowhere to move its clients, and restarting both together is the
		// shortest outage.
		return false, nil
	}
	conn := d.e.Conn(h.Name)
	n, err := d.node(h.Name)
	if err != nil {
		return false, err
	}
	var etcdFile, rest []transport.File
	for _, f := range n.Files {
		switch f.Path {
		case kubeadm.Manifest(kubeadm.Etcd):
			etcdFile = append(etcdFile, f)
		case kubeadm.Manifest(kubeadm.APIServer):
		default:
			rest = append(rest, f)
		}
	}
	if len(etcdFile) == 0 {
		return false, nil
	}
	diff, err := conn.Diff(ctx, etcdFile)
	if err != nil || diff[0] != transport.ChangeContent {
		return false, err
	}
	res, err := conn.Run(ctx, scripts.EtcdPID(), nil)
	if err != nil {
		return false, err
	}
	oldPID := strings.TrimSpace(string(res.Stdout))
	if oldPID == "" {
		return false, nil // not running: nothing to protect
	}
	out, err := apply.Files(ctx, conn, rest, false)
	d.record(h.Name, out)
	if err != nil {
		return false, err
	}
	d.e.say(play, h.Name, "stopping the API server while etcd restarts")
	if _, err := conn.Run(ctx, scripts.StopAPIServer(int(d.o.Timeout/(500*time.Millisecond))), nil); err != nil {
		return true, err
	}
	out, err = apply.Files(ctx, conn, etcdFile, false)
	d.record(h.Name, out)
	if err != nil {
		return true, err
	}
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: conn.DialContext}}
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", kubeadm.PortEtcdMetrics)
	return true, d.e.poll(ctx, play, h.Name, d.o.Timeout, func() (bool, string, error) {
		res, err := conn.Run(ctx, scripts.EtcdPID(), nil)
		if err != nil {
			return false, "", err
		}
		if pid := strings.TrimSpace(string(res.Stdout)); pid == "" || pid == oldPID {
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

// waitStaticPods waits until the node's etcd and control-plane mirror Pods carry their manifests' current
// certificate digests and are Ready. API errors while an API server restarts are retried.
func (d *deployment) waitStaticPods(ctx context.Context, play string, h *inventory.Host) error {
	want := map[string]string{} // component -> the digest its manifest carries
	for _, hf := range d.rendered.Hosts {
		if hf.Host != h.Name {
			continue
		}
		for _, f := range hf.Files {
			if path.Dir(f.Path) != kubeadm.ManifestsDir {
				continue
			}
			for _, line := range strings.Split(string(f.Data), "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), render.PKIAnnotation+": "); ok {
					want[strings.TrimSuffix(path.Base(f.Path), ".yaml")] = v
				}
			}
		}
	}
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return err
	}
	err = d.e.poll(ctx, play, h.Name, d.o.Timeout, func() (bool, string, error) {
		waiting := nodes.StaticPodsWaiting(ctx, admin.Kube, h.NodeName, render.PKIAnnotation, want, kubeadm.ControlPlaneComponents)
		return len(waiting) == 0, strings.Join(waiting, ", "), nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	return err
}

// waitNodeAPI waits for a control-plane node's own API server to be ready, through its SSH connection.
func (d *deployment) waitNodeAPI(ctx context.Context, h *inventory.Host) error {
	c, err := d.e.nodeClient(ctx, h)
	if err != nil {
		return err
	}
	return d.e.poll(ctx, "api", h.Name, d.o.Timeout, func() (bool, string, error) {
		if err := c.Ready(ctx); err != nil {
			return false, fmt.Sprintf("the API server on %s (last: %v)", h.Name, err), nil
		}
		return true, "", nil
	})
}

// renewServing has the kubelets of hosts whose serving certificate is stale (or missing) request a new one:
// the current one is removed and the kubelet restarted; the request is approved after csr.CheckServing, and
// the wait ends when each node's new certificate is issued.
func (d *deployment) renewServing(ctx context.Context, play string, hosts []string, stale func(*x509.Certificate) bool) ([]string, error) {
	since := time.Now().Add(-time.Second)
	var mu sync.Mutex
	var renewing []string
	_, err := d.e.play(ctx, Play{Name: play, Hosts: hosts, Run: func(ctx context.Context, name string) (bool, error) {
		cur, err := readCert(ctx, d.e.Conn(name), kubeadm.KubeletServerCurrent)
		if err != nil || cur != nil && !stale(cur) {
			return false, err
		}
		if _, err := d.e.Conn(name).Run(ctx, scripts.RenewServing(), nil); err != nil {
			return false, err
		}
		mu.Lock()
		renewing = append(renewing, d.e.Inv.Host(name).NodeName)
		mu.Unlock()
		return true, nil
	}})
	if err != nil || len(renewing) == 0 {
		return renewing, err
	}
	sort.Strings(renewing)
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return renewing, err
	}
	d.approver.Kube = admin.Kube
	return renewing, d.e.poll(ctx, play, "", d.o.Timeout, func() (bool, string, error) {
		if err := d.approver.Round(ctx); err != nil {
			return false, "", err
		}
		list, err := admin.Kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "the API (" + firstLine(err.Error()) + ")", nil
		}
		issued := map[string]bool{}
		for _, c := range list.Items {
			if c.CreationTimestamp.After(since) && len(c.Status.Certificate) > 0 {
				issued[strings.TrimPrefix(c.Spec.Username, "system:node:")] = true
			}
		}
		var waiting []string
		for _, n := range renewing {
			if !issued[n] {
				waiting = append(waiting, n)
			}
		}
		return len(waiting) == 0, "the serving certificates of " + strings.Join(waiting, ", "), nil
	})
}

// readCert reads the certificate (never the key) of a PEM file on a host; nil when there is none.
func readCert(ctx context.Context, conn *transport.Conn, file string) (*x509.Certificate, error) {
	res, err := conn.Run(ctx, scripts.ReadCert(file), nil)
	if err != nil {
		return nil, err
	}
	if len(strings.TrimSpace(string(res.Stdout))) == 0 {
		return nil, nil
	}
	return pki.ParseCert(res.Stdout)
}
