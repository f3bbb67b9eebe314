package playbooks

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks"
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
}

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
	e.Hosts = cps
	u := &up{e: e, o: UpOptions{StateDir: o.StateDir, Now: o.Now, APITimeout: o.Timeout}, inv: e.Inv, res: &UpResult{},
		facts: map[string]*tasks.Facts{}, nodeIPs: map[string]string{}, restartKubelet: map[string]bool{}, cp1: cps[0]}
	if err := u.preflight(ctx); err != nil {
		return nil, err
	}
	u.renew = &render.Renewal{IssuedBefore: o.Now().Add(-o.Fresh), NewKeys: o.NewKeys, Only: o.Only}
	if err := u.render(ctx); err != nil {
		return nil, err
	}
	res := &RotateResult{Renewed: []string{}}
	for _, ch := range u.rendered.Changes {
		res.Renewed = append(res.Renewed, ch.What)
	}
	if err := u.preparePush(); err != nil {
		return nil, err
	}
	admin, err := os.ReadFile(u.res.AdminKubeconfig)
	if err != nil {
		return nil, err
	}
	if u.admin, err = u.client(admin); err != nil {
		return nil, err
	}
	for _, h := range cps {
		start := time.Now()
		changed := false
		_, err := transport.Fanout(ctx, "rotate", []string{h.Name}, transport.Policy{Limit: 1}, e.Sink,
			func(ctx context.Context, name string) (bool, error) {
				files, images, err := u.hostFiles(name)
				if err != nil {
					return false, err
				}
				ch, err := e.Conn(name).Put(ctx, files)
				if err != nil {
					return false, err
				}
				m := map[string]bool{}
				for i, f := range files {
					if ch[i] {
						m[f.Path] = true
						changed = true
						if kubeletFile(f.Path) {
							u.restartKubelet[name] = true
						}
					}
				}
				if !changed {
					return false, nil
				}
				_, err = e.Conn(name).Run(ctx, "sh -s", []byte(setupScript(m, images, render.LocalProxy(u.inv))))
				return true, err
			})
		if err != nil {
			return res, err
		}
		if !changed {
			continue
		}
		if err := u.startKubelet(ctx, "rotate", []string{h.Name}); err != nil {
			return res, err
		}
		if err := u.waitStaticPods(ctx, h, o.Timeout); err != nil {
			return res, err
		}
		if err := u.waitNodeAPI(ctx, h); err != nil {
			return res, err
		}
		res.Nodes = append(res.Nodes, PhaseTiming{Name: h.Name, DurationMS: time.Since(start).Milliseconds()})
	}
	return res, nil
}

// waitStaticPods waits until the node's etcd and control-plane mirror Pods carry the manifests' current
// certificate digest and are Ready. API errors while an API server restarts are retried.
func (u *up) waitStaticPods(ctx context.Context, h *inventory.Host, timeout time.Duration) error {
	want := ""
	for _, hf := range u.rendered.Hosts {
		if hf.Host != h.Name {
			continue
		}
		for _, f := range hf.Files {
			if strings.HasSuffix(f.Path, "/kube-apiserver.yaml") {
				for _, line := range strings.Split(string(f.Data), "\n") {
					if v, ok := strings.CutPrefix(strings.TrimSpace(line), render.PKIAnnotation+": "); ok {
						want = v
					}
				}
			}
		}
	}
	err := u.poll(ctx, "rotate", h.Name, timeout, func() (bool, string, error) {
		var waiting []string
		for _, c := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			name := c + "-" + h.NodeName
			pod, err := u.admin.Kube.CoreV1().Pods("kube-system").Get(ctx, name, metav1.GetOptions{})
			switch {
			case err != nil:
				waiting = append(waiting, name+" (API: "+firstLine(err.Error())+")")
			case pod.Annotations[render.PKIAnnotation] != want:
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
