package playbooks

import (
	"context"
	"crypto/x509"
	"fmt"
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

// restartEtcdAlone restarts a node's etcd with its API server stopped when etcd's manifest changes (see
// apply.RestartEtcdAlone); with a single control-plane node it does nothing. It reports whether it did.
func (d *deployment) restartEtcdAlone(ctx context.Context, play string, h *inventory.Host) (bool, error) {
	if len(render.ControlPlanes(d.e.Inv, d.cps)) < 2 {
		// One API server: there is nowhere to move its clients, and restarting both together is the
		// shortest outage.
		return false, nil
	}
	n, err := d.node(h.Name)
	if err != nil {
		return false, err
	}
	out, restarted, err := apply.RestartEtcdAlone(ctx, d.e.Conn(h.Name), n.Files, d.o.Timeout,
		func(f string, a ...any) { d.e.say(play, h.Name, f, a...) })
	d.record(h.Name, out)
	return restarted, err
}

// waitStaticPods waits until the node's etcd and control-plane mirror Pods carry their manifests' current
// certificate digests and are Ready. API errors while an API server restarts are retried.
func (d *deployment) waitStaticPods(ctx context.Context, play string, h *inventory.Host) error {
	want := map[string]nodes.StaticPod{} // component -> the digest and image its manifest carries
	for _, hf := range d.rendered.Hosts {
		if hf.Host != h.Name {
			continue
		}
		for _, f := range hf.Files {
			if path.Dir(f.Path) != kubeadm.ManifestsDir {
				continue
			}
			c := strings.TrimSuffix(path.Base(f.Path), ".yaml")
			for _, line := range strings.Split(string(f.Data), "\n") {
				line = strings.TrimSpace(line)
				if v, ok := strings.CutPrefix(line, render.PKIAnnotation+": "); ok {
					p := want[c]
					p.Annotation = v
					want[c] = p
				}
				if v, ok := strings.CutPrefix(line, "image: "); ok && want[c].Image == "" {
					p := want[c]
					p.Image = strings.Trim(v, `"'`)
					want[c] = p
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
