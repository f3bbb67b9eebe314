package playbooks

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/addons"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/render"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/tasks/workloads"
	"github.com/clusterctl/clusterctl/transport"
)

// rollControlPlane rolls one control-plane node (cpRoll.node) and waits until its static Pods run the
// current manifests and are Ready.
func (d *deployment) rollControlPlane(ctx context.Context, p *plan, play string, h *inventory.Host) (bool, error) {
	r := d.cpRoll(p, play, false)
	changed, err := r.node(ctx, h)
	if err != nil {
		return changed, err
	}
	return changed, r.settle(ctx)
}

// cpRoll rolls control-plane nodes one after the other, each node's API server ready before the next node
// is touched. A node's new controller-manager and scheduler turn Ready 10-16 s after their manifests
// change (the controller-manager's after kubeadm's startup probe, 10 s after its container starts; the
// scheduler's new mirror Pod is shown about as late): rather than wait for them there, the roll goes on
// with the next node's API server, and checks the node's static Pods (every one at its manifest's digest,
// and Ready) once that API server is ready, before it replaces that node's controller-manager and
// scheduler, and when it ends (settle). So a node's old controller-manager and scheduler run until the
// previous node's new ones are Ready, and a new one that does not come up stops the roll with the next
// nodes' left as they were.
//
// With controllerManagerFirst (certificate rotations of several control-plane nodes, where every component
// stays at its version and another API server serves the kubelet meanwhile), a node's controller-manager
// is replaced before its API server, once the previous node's new one is Ready: its new Pod starts and
// passes kubeadm's startup probe during the API server's restart, not after it. The scheduler stays after
// the API server: started before the restart, its informers list again under client-go's back-off after
// it (measured: its Pod not Ready up to 20 s after the new API server was). Upgrades keep the API server
// first: a controller-manager must not be newer than its API server.
type cpRoll struct {
	d                      *deployment
	p                      *plan
	play                   string
	controllerManagerFirst bool
	// pushed: every file of a node but its static Pod manifests is in place already (up's push held back
	// only the manifests of the control-plane nodes running: see upRun.running).
	pushed bool
	// pending is the node rolled last, its API server ready, its static Pods not checked yet.
	pending *inventory.Host
}

func (d *deployment) cpRoll(p *plan, play string, controllerManagerFirst bool) *cpRoll {
	first := controllerManagerFirst && len(d.e.Inv.ControlPlanes()) > 1
	return &cpRoll{d: d, p: p, play: play, controllerManagerFirst: first}
}

// settle waits until the static Pods of the node rolled last run the current manifests and are Ready.
func (r *cpRoll) settle(ctx context.Context) error {
	if r.pending == nil {
		return nil
	}
	if err := r.d.waitStaticPods(ctx, r.p, r.play, r.pending); err != nil {
		return err
	}
	r.pending = nil
	return nil
}

// node pushes a control-plane node's files and restarts what reads them, in an order that keeps each
// restart clean, and waits until its API server is ready:
//  1. every file but the static Pod manifests (certificates and kubeconfigs, which etcd and the API server
//     reload, the kubelet's files, the runtime);
//  2. the kubelet, restarted when its files changed, and given the time to know its static Pods again: a
//     kubelet restarted while it stops old Pods forgets them half-stopped and starts the new ones beside
//     them, and the new API server crash-loops, under the kubelet's growing back-off, until the old one has
//     gone (minutes of outage on one control-plane node);
//  3. etcd, when its manifest changes, restarted alone with the node's API server stopped first: an API
//     server whose etcd stops first hangs in its shutdown until the kubelet kills it, 30 s later, and the
//     kubelet's own calls to it hold up the new Pods as long;
//  4. the API server's manifest, and once it is ready (and the node rolled before settled), the other
//     manifests (see putManifests).
//
// A node whose files were all in place already has its static Pods checked at once: a run interrupted
// after the push resumes here, and the node must be back with its files before the next one is touched.
func (r *cpRoll) node(ctx context.Context, h *inventory.Host) (bool, error) {
	d, p, play := r.d, r.p, r.play
	var rest bool
	if !r.pushed {
		var err error
		if rest, err = d.pushPart(ctx, p, play, []string{h.Name}, 1, withoutManifests); err != nil {
			return false, err
		}
	}
	// Started when stopped, restarted when its files changed (in this run or one interrupted before).
	before := d.podsBefore(ctx, p, play, h)
	restarted, err := d.kubelets(ctx, p, play, []string{h.Name})
	if err != nil {
		return true, err
	}
	if restarted {
		d.waitKubeletPods(ctx, play, h)
		if err := d.podsBack(ctx, play, h, before); err != nil {
			return true, err
		}
	}
	var cm bool
	if r.controllerManagerFirst {
		if cm, err = r.putControllerManager(ctx, h); err != nil {
			return true, err
		}
	}
	first, err := d.restartEtcdAlone(ctx, p, play, h)
	if err != nil {
		return true, err
	}
	manifests, err := d.putManifests(ctx, p, play, h, r.settle)
	if err != nil {
		return true, err
	}
	r.pending = h
	if changed := first || rest || restarted || cm || manifests; !changed {
		return false, r.settle(ctx) // a check of four Pods when all is well
	}
	if err := d.waitNodeAPI(ctx, h); err != nil {
		return true, err
	}
	if len(d.e.Inv.ControlPlanes()) == 1 && !d.o.DryRun {
		return true, r.settle(ctx)
	}
	return true, nil
}

// refreshKubeProxy restarts kube-proxy on every node once the cluster's only API server is back. That API
// server took itself out of the kubernetes Service's endpoints when its shutdown began; kube-proxy's watch
// of the endpoints, broken meanwhile, reconnects under client-go's back-off (0.8 s doubling to 30 s,
// jittered): measured on 1+1, a worker's kube-proxy had the API server's endpoint back 22 s after the new
// API server listened in one run, more than 45 s in another, and new connections to the Service failed
// all that time. A new kube-proxy lists at once; the old one's rules stay in place until it has.
//
// It runs as soon as the new API server is ready (putManifests), before anything else of the roll. On the
// run's nodes kube-proxy's container is stopped through the container runtime and the kubelet starts it
// again in its Pod, at once (0.8 s on the lab; deleting the Pods waited for the new controller-manager and
// scheduler to make and place new ones: 10-20 s more of the outage). The Pods of Nodes outside the run
// (up --limit) are deleted and their DaemonSet's rollout waited for.
func (d *deployment) refreshKubeProxy(ctx context.Context, p *plan, play string) error {
	hosts := p.nodes()
	res, err := d.e.play(ctx, Play{Name: play, Hosts: names(hosts), Quiet: true, Run: func(ctx context.Context, name string) (bool, error) {
		return apply.RestartContainers(ctx, d.e.Conn(name), metav1.NamespaceSystem, addons.KubeProxyName, d.o.Timeout)
	}})
	if err != nil {
		return fmt.Errorf("restarting kube-proxy: %w", err)
	}
	deleted, err := d.deleteKubeProxyOutside(ctx, hosts)
	if err != nil {
		return err
	}
	if !deleted && !anyChanged(res) {
		return nil // not deployed (yet)
	}
	d.e.say(play, "", "kube-proxy restarted on every node: the only API server is back, and its watch of the Service endpoints would reconnect only after its back-off")
	if !deleted {
		return nil
	}
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return err
	}
	ds := workloads.Workload{Kind: "DaemonSet", Namespace: metav1.NamespaceSystem, Name: addons.KubeProxyName}
	return d.e.poll(ctx, play, "", d.o.Timeout, func() (bool, string, error) {
		ok, why, err := workloads.RolledOut(ctx, admin.Kube, ds)
		return ok, "kube-proxy to run on every node again (" + why + ")", err
	})
}

// deleteKubeProxyOutside deletes kube-proxy's Pods on the Nodes that are not among hosts (those outside
// the run), reporting whether there were any.
func (d *deployment) deleteKubeProxyOutside(ctx context.Context, hosts []*inventory.Host) (bool, error) {
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return false, err
	}
	pods, err := admin.Kube.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=" + addons.KubeProxyName})
	if err != nil {
		return false, fmt.Errorf("listing kube-proxy's Pods: %w", err)
	}
	deleted := false
	for _, pod := range pods.Items {
		if slices.ContainsFunc(hosts, func(h *inventory.Host) bool { return h.NodeName == pod.Spec.NodeName }) {
			continue
		}
		err := admin.Kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("restarting kube-proxy on %s: %w", pod.Spec.NodeName, err)
		}
		deleted = true
	}
	return deleted, nil
}

// rollEtcd puts, with external etcd, each etcd host's files (but static Pods) and restarts its member with
// them, one at a time, each ready before the next; a control-plane etcd host's kubelet restarts when its
// node is rolled. Certificate rotations do it before the control-plane nodes roll.
func (d *deployment) rollEtcd(ctx context.Context, p *plan, play string) error {
	hosts := d.etcdHosts(p)
	if len(hosts) == 0 {
		return nil
	}
	if _, err := d.pushPart(ctx, p, play, names(hosts), 1, withoutManifests); err != nil {
		return err
	}
	return d.startEtcd(ctx, p, play, hosts)
}

// staticPods are a control-plane node's static Pods: etcd and the control plane, or with external etcd the
// control plane alone.
func (d *deployment) staticPods() []string { return staticPods(d.e.Inv) }

func staticPods(inv *inventory.Inventory) []string {
	if inv.ExternalEtcd() {
		return slices.DeleteFunc(slices.Clone(kubeadm.ControlPlaneComponents), func(c string) bool { return c == kubeadm.Etcd })
	}
	return kubeadm.ControlPlaneComponents
}

func isManifest(f transport.File) bool { return path.Dir(f.Path) == kubeadm.ManifestsDir }

// withoutManifests cuts a push down to a node's files but its static Pod manifests.
func withoutManifests(_ string, n *apply.Node) { n.Files = slices.DeleteFunc(n.Files, isManifest) }

// putControllerManager writes a node's controller-manager manifest once the previous node's new
// controller-manager is Ready.
func (r *cpRoll) putControllerManager(ctx context.Context, h *inventory.Host) (bool, error) {
	d, p := r.d, r.p
	if r.pending != nil {
		if err := d.waitStaticPods(ctx, p, r.play, r.pending, kubeadm.ControllerManager); err != nil {
			return false, err
		}
	}
	res, err := d.e.play(ctx, Play{Name: r.play, Hosts: []string{h.Name}, Run: func(ctx context.Context, name string) (bool, error) {
		n, err := d.node(p, name)
		if err != nil {
			return false, err
		}
		files := slices.DeleteFunc(slices.Clone(n.Files), func(f transport.File) bool { return f.Path != kubeadm.Manifest(kubeadm.ControllerManager) })
		out, err := apply.Manifests(ctx, d.e.Conn(name), files, n.Dry, d.o.Timeout)
		d.record(name, out)
		return out.Changed(), err
	}})
	return anyChanged(res), err
}

// putManifests writes a control-plane node's static Pod manifests, and nothing else: the rest of its files,
// and what they need, were put before. When the API server's manifest changes (or is back after
// restartEtcdAlone), it goes first and the others once that API server is ready, and after before (which
// settles the node rolled before, see cpRoll). The kubelet replaces a static Pod's mirror Pod through the
// API, and one it could not reach is retried at its next sync of the Pod, up to a minute later (measured on
// one control-plane node: the controller-manager's mirror Pod stale for 70 s after a certificate rotation);
// and a controller-manager or scheduler started beside its restarting API server fails its informers' first
// lists and retries them under client-go's back-off (measured on three control-plane nodes with kubeadm's
// startup probes: the leaf rotation took 203.8 s with all manifests at once, 163.6 s with the API server's
// first). On a single control-plane node the kubelet is restarted once its new API server is ready, before
// the other manifests: it had lost its only API server.
func (d *deployment) putManifests(ctx context.Context, p *plan, play string, h *inventory.Host, before func(context.Context) error) (bool, error) {
	res, err := d.e.play(ctx, Play{Name: play, Hosts: []string{h.Name}, Run: func(ctx context.Context, name string) (bool, error) {
		n, err := d.node(p, name)
		if err != nil {
			return false, err
		}
		conn := d.e.Conn(name)
		var first, rest []transport.File // the API server's manifest; the others
		for _, f := range n.Files {
			switch {
			case !isManifest(f):
			case f.Path == kubeadm.Manifest(kubeadm.APIServer):
				first = append(first, f)
			default:
				rest = append(rest, f)
			}
		}
		var changed bool
		if len(first) > 0 {
			old, err := apply.PIDs(ctx, conn, kubeadm.APIServer)
			if err != nil {
				return false, err
			}
			out, err := apply.Manifests(ctx, conn, first, n.Dry, d.o.Timeout)
			d.record(name, out)
			if err != nil {
				return out.Changed(), err
			}
			if changed = out.Changed(); changed && !n.Dry {
				if err := d.waitAPIServerGone(ctx, play, h, old); err != nil {
					return true, err
				}
				if err := d.waitNodeAPI(ctx, h); err != nil {
					return true, err
				}
				if len(d.e.Inv.ControlPlanes()) == 1 {
					if err := d.refreshKubeProxy(ctx, p, play); err != nil {
						return true, err
					}
					// The kubelet lost its only API server, and its Pod informer's watch comes back
					// under client-go's back-off: manifests written meanwhile lose their old mirror
					// Pods to the kubelet's cleanup while it still sees them, and it makes the new
					// ones only at its next sync of the Pod, up to a minute later (measured on 1+1:
					// 3 full rotations of 7 took 91-141 s, the others 34-44 s; waiting for the API
					// server's mirror Pod to be Ready instead only moved the wait there). Restarted
					// now, it lists the Pods at once: 10 of 10 took 36-56 s.
					out, err := apply.Kubelet(ctx, conn, scripts.KubeletParams{Inputs: apply.KubeletInputs(true, p.kubeletPath), Restart: true})
					d.record(name, out)
					if err != nil {
						return true, err
					}
					d.waitKubeletPods(ctx, play, h)
				}
			}
		}
		if err := before(ctx); err != nil {
			return changed, err
		}
		out, err := apply.Manifests(ctx, conn, rest, n.Dry, d.o.Timeout)
		d.record(name, out)
		return changed || out.Changed(), err
	}})
	return anyChanged(res), err
}

// waitKubeletPods waits, for a short while, until a control-plane node's kubelet, just restarted, lists
// the node's static Pods as its own (the kubelet's /pods, through the API server's node proxy): from then
// on a changed manifest is a Pod it replaces in order. When it does not answer in time the run goes on,
// as it would without the wait.
func (d *deployment) waitKubeletPods(ctx context.Context, play string, h *inventory.Host) {
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return
	}
	err = d.e.poll(ctx, play, h.Name, kubeletPodsWait, func() (bool, string, error) {
		raw, err := admin.Kube.CoreV1().RESTClient().Get().Resource("nodes").Name(h.NodeName).SubResource("proxy").Suffix("pods").DoRaw(ctx)
		if err != nil {
			return false, "the kubelet's Pods (" + firstLine(err.Error()) + ")", nil
		}
		var list corev1.PodList
		if err := json.Unmarshal(raw, &list); err != nil {
			return false, "the kubelet's Pods (" + err.Error() + ")", nil
		}
		var missing []string
		for _, c := range d.staticPods() {
			if !slices.ContainsFunc(list.Items, func(p corev1.Pod) bool { return p.Name == c+"-"+h.NodeName }) {
				missing = append(missing, c)
			}
		}
		return len(missing) == 0, "the kubelet to know its static Pods (" + strings.Join(missing, ", ") + ")", nil
	})
	if err != nil && ctx.Err() == nil {
		d.e.say(play, h.Name, "the kubelet did not list its static Pods in %s; their manifests change anyway (%v)", kubeletPodsWait, err)
	}
}

// kubeletPodsWait bounds waitKubeletPods: a restarted kubelet lists its static Pods within seconds.
const kubeletPodsWait = 30 * time.Second

// restartEtcdAlone restarts a node's etcd with its API server stopped when etcd's manifest changes (see
// apply.RestartEtcdAlone), also on a single control-plane node: its API server stops cleanly while etcd
// still answers. It reports whether it did.
func (d *deployment) restartEtcdAlone(ctx context.Context, p *plan, play string, h *inventory.Host) (bool, error) {
	n, err := d.node(p, h.Name)
	if err != nil {
		return false, err
	}
	// The node's other files were put before (rollControlPlane): only the manifests are left to write.
	manifests := slices.DeleteFunc(n.Files, func(f transport.File) bool { return !isManifest(f) })
	out, restarted, err := apply.RestartEtcdAlone(ctx, d.e.Conn(h.Name), manifests, d.o.Timeout,
		func(f string, a ...any) { d.e.say(play, h.Name, f, a...) })
	d.record(h.Name, out)
	return restarted, err
}

// waitStaticPods waits until the node's etcd and control-plane mirror Pods (or only the components named)
// carry their manifests' current certificate digests and are Ready. API errors while an API server
// restarts are retried.
func (d *deployment) waitStaticPods(ctx context.Context, p *plan, play string, h *inventory.Host, components ...string) error {
	if len(components) == 0 {
		components = d.staticPods()
	}
	var files []transport.File
	for _, hf := range p.rendered.Hosts {
		if hf.Host == h.Name {
			files = append(files, hf.Files...)
		}
	}
	return d.waitStaticPodsOf(ctx, play, h, staticPodsOf(files), components)
}

// staticPodsOf is, per component, the certificate digest and image its manifest among files carries.
func staticPodsOf(files []transport.File) map[string]nodes.StaticPod {
	want := map[string]nodes.StaticPod{}
	for _, f := range files {
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
	return want
}

// waitStaticPodsOf waits until the node's static Pods of components carry what want says and are Ready.
func (d *deployment) waitStaticPodsOf(ctx context.Context, play string, h *inventory.Host, want map[string]nodes.StaticPod, components []string) error {
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return err
	}
	err = d.e.poll(ctx, play, h.Name, d.o.Timeout, func() (bool, string, error) {
		waiting := nodes.StaticPodsWaiting(ctx, admin.Kube, h.NodeName, render.PKIAnnotation, want, components)
		return len(waiting) == 0, strings.Join(waiting, ", "), nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	return err
}

// waitAPIServerGone waits until none of the API server processes old runs on the node any more: the
// kubelet stops the old API server after its manifest changed, and until then (the shutdown delay
// included) that one answers as ready, not the new one.
func (d *deployment) waitAPIServerGone(ctx context.Context, play string, h *inventory.Host, old []string) error {
	if len(old) == 0 {
		return nil
	}
	return d.e.poll(ctx, play, h.Name, d.o.Timeout, func() (bool, string, error) {
		now, err := apply.PIDs(ctx, d.e.Conn(h.Name), kubeadm.APIServer)
		if err != nil {
			return false, "", err
		}
		still := slices.ContainsFunc(now, func(p string) bool { return slices.Contains(old, p) })
		return !still, "the API server's old process (" + strings.Join(old, ", ") + ") to stop", nil
	})
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

// servingFromServingCA has the kubelets of the run's running nodes whose serving certificate the kubelet
// serving CA did not sign (one the cluster CA signed, on a cluster made before that CA) request a new one:
// the API server verifies kubelets with that CA alone, so until then it cannot reach them (logs, exec).
// A node without one yet is left to ready's wait.
func (u *upRun) servingFromServingCA(ctx context.Context, p *plan) error {
	var running []string
	for _, h := range p.nodes() {
		if f := p.facts[h.Name]; f != nil && f.Files[kubeadm.KubeletKubeconfig] {
			running = append(running, h.Name)
		}
	}
	if len(running) == 0 {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(u.e.StateDir, "pki", pki.KubeletServingCA+".crt"))
	if err != nil {
		return err
	}
	ca, err := pki.ParseCert(data)
	if err != nil {
		return err
	}
	renewed, err := u.renewServing(ctx, "ready", running, func(c *x509.Certificate) bool { return c != nil && c.CheckSignatureFrom(ca) != nil })
	if len(renewed) > 0 {
		u.e.say("ready", "", "serving certificates of %s requested anew from the kubelet serving CA", strings.Join(renewed, ", "))
	}
	return err
}
