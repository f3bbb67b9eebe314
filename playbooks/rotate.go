package playbooks

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/render"
	"github.com/clusterctl/clusterctl/transport"
)

// RotateOptions tune certs rotate.
type RotateOptions struct {
	StateDir string
	// Fresh is the age under which a certificate is left alone, so that a second rotation right after the
	// first changes nothing (the command's default is 24h; 0 renews everything).
	Fresh   time.Duration
	NewKeys bool
	Only    []string
	Timeout time.Duration // per node, for its static Pods to come back ready
	Now     func() time.Time
}

// RotateResult is what a rotation renewed, and how long each control-plane node took.
type RotateResult struct {
	Renewed []string      `json:"renewed"`
	Nodes   []PhaseTiming `json:"nodes"`
	// Serving are the nodes whose kubelet requested a new serving certificate (approved and issued).
	Serving []string `json:"serving"`
}

// ServingName names the kubelet serving certificates in --only.
const ServingName = "kubelet-serving"

// RotateCerts renews the control-plane leaf certificates and kubeconfigs in the state directory (keys kept
// unless NewKeys), then, one control-plane node at a time, pushes the node's files (its static Pod
// manifests carry a digest of its certificates, so the kubelet restarts etcd and the control plane with the
// new ones; its kubelet restarts if kubelet.conf changed) and waits until the node's static Pods run the new
// manifests and are Ready, and its API server is ready, before the next. Nodes whose certificates are fresh
// are left alone.
func RotateCerts(ctx context.Context, e *Env, o RotateOptions) (*RotateResult, error) {
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	cps := e.Inv.ControlPlanes()
	if len(cps) == 0 {
		return nil, fmt.Errorf("the inventory has no control-plane host")
	}
	// Every host: control-plane nodes for their files, every node for its kubelet serving certificate.
	e.Hosts = nil
	for i := range e.Inv.Hosts {
		e.Hosts = append(e.Hosts, &e.Inv.Hosts[i])
	}
	u := &up{e: e, o: UpOptions{StateDir: o.StateDir, Now: o.Now, APITimeout: o.Timeout}, inv: e.Inv, res: &UpResult{},
		facts: map[string]*tasks.Facts{}, nodeIPs: map[string]string{}, restartKubelet: map[string]bool{}, cp1: cps[0]}
	if err := u.preflight(ctx); err != nil {
		return nil, err
	}
	u.renew = &render.Renewal{IssuedBefore: o.Now().Add(-o.Fresh), NewKeys: o.NewKeys, Only: o.Only}
	if err := u.render(ctx); err != nil {
		return nil, err
	}
	res := &RotateResult{Renewed: []string{}, Serving: []string{}}
	for _, ch := range u.rendered.Changes {
		res.Renewed = append(res.Renewed, ch.What)
	}
	if err := u.preparePush(); err != nil {
		return nil, err
	}
	admin, err := pki.ReadSecret(u.res.AdminKubeconfig)
	if err != nil {
		return nil, err
	}
	if u.admin, err = u.client(admin); err != nil {
		return nil, err
	}
	for _, h := range cps {
		start := time.Now()
		changed, err := u.rollControlPlane(ctx, "rotate", h, o.Timeout)
		if err != nil {
			return res, err
		}
		if changed {
			res.Nodes = append(res.Nodes, PhaseTiming{Name: h.Name, DurationMS: time.Since(start).Milliseconds()})
		}
	}
	if len(o.Only) == 0 || slices.Contains(o.Only, ServingName) {
		// Kubelet serving certificates are the controller-manager's to sign: the kubelets request them anew.
		before := o.Now().Add(-o.Fresh)
		if res.Serving, err = u.renewServing(ctx, "rotate", u.hostNames(e.Hosts), func(c *x509.Certificate) bool { return c.NotBefore.Before(before) }); err != nil {
			return res, err
		}
	}
	return res, nil
}

// rollControlPlane pushes a control-plane node's files and, when any changed, restarts what reads them (the
// kubelet restarts static Pods whose manifests changed; the kubelet itself restarts if its files did), and
// waits until its static Pods run the current manifests and are Ready, and its API server is ready.
func (u *up) rollControlPlane(ctx context.Context, play string, h *inventory.Host, timeout time.Duration) (bool, error) {
	first, err := u.restartEtcdAlone(ctx, play, h, timeout)
	if err != nil {
		return first, err
	}
	changed, err := u.pushHosts(ctx, play, []string{h.Name}, 1)
	if err != nil {
		return false, err
	}
	changed = changed || first
	if changed {
		if err := u.startKubelet(ctx, play, []string{h.Name}); err != nil {
			return true, err
		}
	}
	// Also when nothing changed: a run interrupted after the push resumes here, and the node must be back
	// with its files before the next one is touched (a check of four Pods when it is).
	if err := u.waitStaticPods(ctx, play, h, timeout); err != nil {
		return changed, err
	}
	if !changed {
		return false, nil
	}
	return true, u.waitNodeAPI(ctx, h)
}

// restartEtcdAlone restarts a running etcd member whose manifest is about to change while the node's API
// server is stopped: the API server talks to its local member only, and requests it holds while that member
// restarts would hang. The node's files other than the two manifests go first (etcd and the API server
// reload certificates themselves); then the API server's manifest is removed and the kubelet stops it
// (gracefully: it fails /readyz, proxies and load balancers move away, it drains); then the new etcd
// manifest, until a new etcd process answers /readyz; the API server's new manifest follows with the rest.
// With a single control-plane node it does nothing. It reports whether it changed anything.
func (u *up) restartEtcdAlone(ctx context.Context, play string, h *inventory.Host, timeout time.Duration) (bool, error) {
	if len(render.ControlPlanes(u.inv, u.cps)) < 2 {
		// One API server: there is nowhere to move its clients, and restarting both together is the
		// shortest outage.
		return false, nil
	}
	conn := u.e.Conn(h.Name)
	files, _, err := u.hostFiles(h.Name)
	if err != nil {
		return false, err
	}
	etcdPath, apiPath := path.Join(kubeadm.ManifestsDir, "etcd.yaml"), path.Join(kubeadm.ManifestsDir, "kube-apiserver.yaml")
	var etcdFile []transport.File
	var rest []transport.File
	for _, f := range files {
		switch f.Path {
		case etcdPath:
			etcdFile = append(etcdFile, f)
		case apiPath:
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
	res, err := conn.Run(ctx, "pgrep -x etcd || true", nil)
	if err != nil {
		return false, err
	}
	oldPID := strings.TrimSpace(string(res.Stdout))
	if oldPID == "" {
		return false, nil // not running: nothing to protect
	}
	ch, err := conn.Put(ctx, rest)
	if err != nil {
		return false, err
	}
	for i, f := range rest {
		if ch[i] && kubeletFile(f.Path) {
			u.mu.Lock()
			u.restartKubelet[h.Name] = true
			u.mu.Unlock()
		}
	}
	u.say(play, h.Name, "stopping the API server while etcd restarts")
	if _, err := conn.Run(ctx, transport.Cmdf("rm -f %s; i=0; while pgrep -x kube-apiserver >/dev/null; do i=$((i+1)); [ $i -lt %d ] || { echo 'the API server did not stop' >&2; exit 1; }; sleep 0.5; done",
		apiPath, int(timeout/(500*time.Millisecond))), nil); err != nil {
		return true, err
	}
	if _, err := conn.Put(ctx, etcdFile); err != nil {
		return true, err
	}
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		return conn.DialContext(ctx, "tcp", addr)
	}}}
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", kubeadm.PortEtcdMetrics)
	return true, u.poll(ctx, play, h.Name, timeout, func() (bool, string, error) {
		res, err := conn.Run(ctx, "pgrep -x etcd || true", nil)
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

// pushHosts puts the rendered files on hosts and applies them (setupScript), reporting whether any changed;
// the kubelet is marked for a restart where its files changed.
func (u *up) pushHosts(ctx context.Context, play string, hosts []string, limit int) (bool, error) {
	var mu sync.Mutex
	any := false
	_, err := transport.Fanout(ctx, play, hosts, transport.Policy{Limit: limit}, u.e.Sink,
		func(ctx context.Context, name string) (bool, error) {
			files, images, err := u.hostFiles(name)
			if err != nil {
				return false, err
			}
			ch, err := u.e.Conn(name).Put(ctx, files)
			if err != nil {
				return false, err
			}
			m := map[string]bool{}
			for i, f := range files {
				if ch[i] {
					m[f.Path] = true
					if kubeletFile(f.Path) {
						u.mu.Lock()
						u.restartKubelet[name] = true
						u.mu.Unlock()
					}
				}
			}
			if len(m) == 0 {
				return false, nil
			}
			mu.Lock()
			any = true
			mu.Unlock()
			_, err = u.e.Conn(name).Run(ctx, "sh -s", []byte(setupScript(m, images, u.localProxy())))
			return true, err
		})
	return any, err
}

// waitStaticPods waits until the node's etcd and control-plane mirror Pods carry their manifests' current
// certificate digests and are Ready. API errors while an API server restarts are retried.
func (u *up) waitStaticPods(ctx context.Context, play string, h *inventory.Host, timeout time.Duration) error {
	want := map[string]string{} // component -> the digest its manifest carries
	for _, hf := range u.rendered.Hosts {
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
	err := u.poll(ctx, play, h.Name, timeout, func() (bool, string, error) {
		var waiting []string
		for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			name := c + "-" + h.NodeName
			pod, err := u.admin.Kube.CoreV1().Pods("kube-system").Get(ctx, name, metav1.GetOptions{})
			switch {
			case err != nil:
				waiting = append(waiting, name+" (API: "+firstLine(err.Error())+")")
			case pod.Annotations[render.PKIAnnotation] != want[c]:
				waiting = append(waiting, name+" (old certificates)")
			case !podReady(pod):
				waiting = append(waiting, name+" (not Ready)")
			}
		}
		return len(waiting) == 0, strings.Join(waiting, ", "), nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	return err
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
