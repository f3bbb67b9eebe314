package playbooks

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clusterctl/clusterctl/tasks/bootstrap"
	"github.com/clusterctl/clusterctl/tasks/certs"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/nodes"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/transport"
)

// CARotateOptions tune certs rotate --ca.
type CARotateOptions struct {
	StateDir string
	// Timeout bounds each wait: a node's static Pods, workload rollouts, serving certificates, tokens.
	Timeout time.Duration
	Now     func() time.Time
}

// CARotateResult is what a CA rotation did.
type CARotateResult struct {
	// Resumed is the stage an interrupted rotation was resumed at, or 0.
	Resumed int           `json:"resumed,omitempty"`
	Stages  []PhaseTiming `json:"stages"`
	// Restarted are the workloads rolled (namespace/Kind/name) so that their Pods trust both CAs: Pods read
	// the CA data once, at start.
	Restarted []string `json:"restarted"`
	// Warnings are what the rotation could not do for the user: Pods it cannot restart, a retired
	// service-account key kept for token Secrets it signed.
	Warnings []string `json:"warnings"`
}

// RotateCA replaces the cluster CAs (cluster, front-proxy, etcd) and the service-account signing key, in the
// stages of pki (generate, trust, reissue, sign, finish), each applied to the whole fleet — control-plane
// nodes one at a time, each healthy before the next — and recorded in the state directory before and after,
// so that a run interrupted anywhere resumes where it stopped. The API stays served throughout on several
// control-plane nodes; workloads keep running, and their service-account tokens stay valid: Pods that
// started before the new CA was trusted are rolled (their controllers' rolling update), tokens are
// re-issued by every kubelet before the old key goes, and the old key stays accepted for token Secrets it
// signed.
func RotateCA(ctx context.Context, e *Env, o CARotateOptions) (*CARotateResult, error) {
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	d, err := newDeployment(e, allHosts(e.Inv), deployOptions{Now: o.Now, Timeout: o.Timeout})
	if err != nil {
		return nil, err
	}
	c := e.Inv.Cluster
	store := &pki.Store{Dir: filepath.Join(e.StateDir, "pki"), Issuer: &pki.Issuer{Now: o.Now, Algorithm: pki.Algorithm(c.Certificates.KeyAlgorithm),
		Validity: c.Certificates.Validity.Duration, CAValidity: c.Certificates.CAValidity.Duration}}
	if _, err := os.Stat(filepath.Join(store.Dir, "ca.key")); err != nil {
		return nil, fmt.Errorf("%s: a CA rotation needs the CA keys in the state directory (external CA mode cannot rotate here): %w",
			filepath.Join(store.Dir, "ca.key"), err)
	}
	rot, err := store.Rotation()
	if err != nil {
		return nil, err
	}
	res := &CARotateResult{Restarted: []string{}, Warnings: []string{}}
	if rot == nil {
		rot = &pki.Rotation{Started: o.Now().UTC()}
	} else {
		res.Resumed = rot.Done + 1
		e.say("ca", "", "resuming the CA rotation started %s at stage %d (%s)", rot.Started.Format(time.RFC3339), rot.Done+1, pki.StageNames[rot.Done+1])
	}
	if _, err := d.preflight(ctx, PreflightOptions{}); err != nil {
		return res, err
	}
	r := &caRotation{d: d, o: o, store: store, rot: rot, res: res}
	// The stages, in pki's order (pki.StageGenerate is the first): each applied to the whole fleet, the
	// rotation recorded before and after each.
	stages := []Step{
		{Name: "ca-generate", Run: r.generate},
		{Name: "ca-trust", Run: r.trust},
		{Name: "ca-reissue", Run: r.reissue},
		{Name: "ca-sign", Run: r.sign},
		{Name: "ca-finish", Run: r.finish},
	}
	stage := func(i int) int { return pki.StageGenerate + i }
	res.Stages, err = runSteps(ctx, runOptions{Sink: e.Sink, From: rot.Done,
		Before: func(i int) error { rot.Stage = stage(i); return store.SaveRotation(rot) },
		After: func(i int) error {
			rot.Done = stage(i)
			if rot.Done == pki.StageFinish {
				return store.EndRotation()
			}
			return store.SaveRotation(rot)
		},
		Wrap: func(i int, err error) error {
			return fmt.Errorf("CA rotation, stage %d (%s): %w\n(the rotation is recorded in %s: run certs rotate --ca again to resume it)",
				stage(i), pki.StageNames[stage(i)], err, filepath.Join(store.Dir, "rotation"))
		}}, stages)
	return res, err
}

type caRotation struct {
	d     *deployment
	o     CARotateOptions
	store *pki.Store
	rot   *pki.Rotation
	res   *CARotateResult
}

// generate makes the new CAs and service-account key in the state directory.
func (r *caRotation) generate(context.Context) error { return r.store.GenerateNewCAs() }

// trust puts both CAs in every trust bundle, publishes them, and rolls the workloads whose Pods started
// before: their new Pods trust both.
func (r *caRotation) trust(ctx context.Context) error {
	const play = "ca-trust"
	if err := r.apply(ctx, play); err != nil {
		return err
	}
	if err := r.clusterInfo(ctx); err != nil {
		return err
	}
	if err := r.waitRootCA(ctx, play); err != nil {
		return err
	}
	if r.rot.TrustedAt.IsZero() {
		r.rot.TrustedAt = time.Now().UTC()
		if err := r.store.SaveRotation(r.rot); err != nil {
			return err
		}
	}
	return r.restartWorkloads(ctx, play, r.rot.TrustedAt)
}

// reissue makes the new CAs current and issues every leaf from them; kubelets get new client certificates.
func (r *caRotation) reissue(ctx context.Context) error {
	const play = "ca-reissue"
	if err := r.store.Swap(r.rot); err != nil {
		return err
	}
	if err := r.apply(ctx, play); err != nil {
		return err
	}
	return r.kubeletClientCerts(ctx, play)
}

// sign has the controller-manager sign, and the API server sign tokens, with the new CA and key; kubelets
// request new serving certificates and new tokens for their Pods.
func (r *caRotation) sign(ctx context.Context) error {
	const play = "ca-sign"
	d := r.d
	if err := r.apply(ctx, play); err != nil {
		return err
	}
	ca, err := r.currentCA()
	if err != nil {
		return err
	}
	if _, err := d.renewServing(ctx, play, names(d.hosts), func(c *x509.Certificate) bool { return c.CheckSignatureFrom(ca) != nil }); err != nil {
		return err
	}
	if err := r.waitTokens(ctx, play); err != nil {
		return err
	}
	if r.rot.TokensAt.IsZero() {
		r.rot.TokensAt = time.Now().UTC()
		return r.store.SaveRotation(r.rot)
	}
	return nil
}

// finish takes the old CAs out of every bundle once nothing presents a certificate they signed, and
// retires the old service-account key unless token Secrets it signed remain.
func (r *caRotation) finish(ctx context.Context) error {
	const play = "ca-finish"
	d := r.d
	if err := r.checkPresented(ctx, play); err != nil {
		return err
	}
	// Clients read their token file again periodically (client-go every minute): the old key stays
	// accepted until they all have.
	if wait := time.Until(r.rot.TokensAt.Add(tokenReread)); wait > 0 {
		d.e.say(play, "", "waiting %s for clients to read their new service-account tokens", wait.Round(time.Second))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	if err := r.retireSAKey(ctx, play); err != nil {
		return err
	}
	if err := r.apply(ctx, play); err != nil {
		return err
	}
	remove := scripts.RemoveFiles(path.Join(kubeadm.PKIDir, pki.SignerName+".crt"), path.Join(kubeadm.PKIDir, pki.SignerName+".key"))
	if _, err := d.e.play(ctx, play, names(d.e.Inv.ControlPlanes()), 0, func(ctx context.Context, name string) (bool, error) {
		res, err := d.e.Conn(name).Run(ctx, remove, nil)
		return err == nil && len(res.Stdout) > 0, err
	}); err != nil {
		return err
	}
	if err := r.clusterInfo(ctx); err != nil {
		return err
	}
	return r.waitRootCA(ctx, play)
}

// apply renders the stage's files and puts them on every host: control-plane nodes one at a time (static
// Pods restarted and Ready, API server ready, before the next), then the workers together (their kubelets
// restarted where ca.crt changed, their kubelet.conf's CA data following it).
func (r *caRotation) apply(ctx context.Context, play string) error {
	d := r.d
	if err := d.render(ctx); err != nil {
		return err
	}
	if len(d.joining) > 0 {
		var names []string
		for n := range d.joining {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Errorf("%s not part of the cluster yet (no kubelet.conf): run clusterctl up or add-node first, or leave them out of the inventory", strings.Join(names, ", "))
	}
	if err := d.prepare(); err != nil {
		return err
	}
	for _, h := range d.e.Inv.ControlPlanes() {
		if _, err := d.rollControlPlane(ctx, play, h); err != nil {
			return err
		}
	}
	workers := names(d.workers())
	if len(workers) == 0 {
		return nil
	}
	if _, err := d.push(ctx, play, workers, d.e.Forks); err != nil {
		return err
	}
	return d.startKubelet(ctx, play, workers)
}

func (r *caRotation) currentCA() (*x509.Certificate, error) {
	data, err := os.ReadFile(filepath.Join(r.store.Dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	return pki.ParseCert(data)
}

// clusterInfo publishes the CA data of ca.crt in kube-public/cluster-info, which joining nodes trust; the
// controller-manager adds the signatures of the bootstrap tokens.
func (r *caRotation) clusterInfo(ctx context.Context) error {
	d := r.d
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return err
	}
	kc, err := bootstrap.ClusterInfoKubeconfig(d.rendered.NodeEndpoint, d.caPEM())
	if err != nil {
		return err
	}
	info, err := bootstrap.ClusterInfo(kc)
	if err != nil {
		return err
	}
	_, err = admin.Apply(ctx, info)
	return err
}

// waitRootCA waits until every namespace's kube-root-ca.crt, which Pods mount as their CA data, is ca.crt
// (the controller-manager publishes its root CA file there).
func (r *caRotation) waitRootCA(ctx context.Context, play string) error {
	d := r.d
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return err
	}
	want := string(d.caPEM())
	return d.e.poll(ctx, play, "", r.o.Timeout, func() (bool, string, error) {
		list, err := admin.Kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=kube-root-ca.crt"})
		if err != nil {
			return false, "the API (" + firstLine(err.Error()) + ")", nil
		}
		var stale []string
		for _, cm := range list.Items {
			if cm.Data["ca.crt"] != want {
				stale = append(stale, cm.Namespace)
			}
		}
		return len(stale) == 0, "kube-root-ca.crt of namespaces " + strings.Join(stale, ", "), nil
	})
}

// restartWorkloads rolls the Deployments, DaemonSets and StatefulSets whose Pods started before the new CA
// was trusted and talk to the API (they mount a service-account token), as kubectl rollout restart does, and
// waits for the rollouts: their new Pods trust both CAs. Pods without such a controller are reported.
func (r *caRotation) restartWorkloads(ctx context.Context, play string, trustedAt time.Time) error {
	d := r.d
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return err
	}
	kube := admin.Kube
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	type workload struct{ ns, kind, name string }
	var todo []workload
	seen := map[workload]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror || p.Status.StartTime == nil || !p.Status.StartTime.Time.Before(trustedAt) ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || !mountsToken(p) {
			continue
		}
		w := workload{ns: p.Namespace}
		if ref := metav1.GetControllerOf(p); ref != nil {
			switch ref.Kind {
			case "ReplicaSet":
				rs, err := kube.AppsV1().ReplicaSets(p.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if d := metav1.GetControllerOf(rs); d != nil && d.Kind == "Deployment" {
					w.kind, w.name = "Deployment", d.Name
				}
			case "DaemonSet", "StatefulSet":
				w.kind, w.name = ref.Kind, ref.Name
			}
		}
		if w.kind == "" {
			msg := fmt.Sprintf("Pod %s/%s started before the new CA was trusted and has no controller clusterctl can roll: if it reads its CA data only at start, restart it before the reissue stage", p.Namespace, p.Name)
			if !slices.Contains(r.res.Warnings, msg) {
				r.res.Warnings = append(r.res.Warnings, msg)
				d.e.say(play, "", "%s", msg)
			}
			continue
		}
		if !seen[w] {
			seen[w] = true
			todo = append(todo, w)
		}
	}
	patch := []byte(fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().UTC().Format(time.RFC3339)))
	for _, w := range todo {
		var err error
		switch w.kind {
		case "Deployment":
			_, err = kube.AppsV1().Deployments(w.ns).Patch(ctx, w.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "clusterctl"})
		case "DaemonSet":
			_, err = kube.AppsV1().DaemonSets(w.ns).Patch(ctx, w.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "clusterctl"})
		case "StatefulSet":
			_, err = kube.AppsV1().StatefulSets(w.ns).Patch(ctx, w.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "clusterctl"})
		}
		if err != nil {
			return fmt.Errorf("restarting %s %s/%s: %w", w.kind, w.ns, w.name, err)
		}
		r.res.Restarted = append(r.res.Restarted, w.ns+"/"+w.kind+"/"+w.name)
		d.e.say(play, "", "restarting %s %s/%s: its Pods started before the new CA was trusted", w.kind, w.ns, w.name)
	}
	return d.e.poll(ctx, play, "", r.o.Timeout, func() (bool, string, error) {
		var waiting []string
		for _, w := range todo {
			done, err := nodes.RolledOut(ctx, kube, w.ns, w.kind, w.name)
			if err != nil {
				return false, "", err
			}
			if !done {
				waiting = append(waiting, w.kind+" "+w.ns+"/"+w.name)
			}
		}
		return len(waiting) == 0, "the rollout of " + strings.Join(waiting, ", "), nil
	})
}

func mountsToken(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					return true
				}
			}
		}
	}
	return false
}

// kubeletClientCerts gives every kubelet a client certificate signed by the new CA (system:node:<name> in
// system:nodes, as its own requests get), unless it has one: a new kubelet-client-<time>.pem beside the old,
// kubelet-client-current.pem moved to it, the kubelet restarted. Key and certificate are made on the
// workstation and only the node's own go to it.
func (r *caRotation) kubeletClientCerts(ctx context.Context, play string) error {
	d := r.d
	p, err := r.store.Load()
	if err != nil {
		return err
	}
	ca := p.CAs["ca"]
	_, err = d.e.play(ctx, play, names(d.hosts), 0,
		func(ctx context.Context, name string) (bool, error) {
			conn := d.e.Conn(name)
			cur, err := readCert(ctx, conn, kubeadm.KubeletClientCurrent)
			if err != nil {
				return false, err
			}
			if cur != nil && cur.CheckSignatureFrom(ca.Cert) == nil {
				return false, nil
			}
			node := d.e.Inv.Host(name).NodeName
			kp, err := r.store.Issuer.NewLeaf(pki.Spec{Name: "kubelet-client", CA: "ca", CommonName: "system:node:" + node,
				Organization: []string{pki.NodesGroup}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, nil)
			if err != nil {
				return false, err
			}
			key, err := pki.EncodeKey(kp.Key)
			if err != nil {
				return false, err
			}
			file := fmt.Sprintf("kubelet-client-%s.pem", time.Now().UTC().Format("2006-01-02-15-04-05"))
			if _, err := conn.Put(ctx, []transport.File{{Path: path.Join(kubeadm.KubeletPKIDir, file), Data: append(pki.EncodeCert(kp.Cert), key...), Mode: 0o600}}); err != nil {
				return false, err
			}
			_, err = conn.Run(ctx, scripts.SwitchKubeletClient(file), nil)
			return true, err
		})
	return err
}

// tokenReread is how long after the token files are renewed every client has read them: client-go reads its
// token file again every minute; a margin is added.
const tokenReread = 75 * time.Second

// keyID is the key ID the API server puts in the tokens it signs with a key (its "kid" header):
// base64url(SHA-256(PKIX DER of the public key)).
func keyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// tokenKeyID is the "kid" of a JWT's header (nothing else of the token is read).
func tokenKeyID(token string) string {
	header, _, _ := strings.Cut(strings.TrimSpace(token), ".")
	data, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		return ""
	}
	var h struct {
		Kid string `json:"kid"`
	}
	if json.Unmarshal(data, &h) != nil {
		return ""
	}
	return h.Kid
}

// waitTokens waits until every running Pod's service-account token, as its kubelet wrote it, is signed with
// the new key: a restarted kubelet requests new tokens for its Pods. Only the tokens' headers are read.
func (r *caRotation) waitTokens(ctx context.Context, play string) error {
	d := r.d
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return err
	}
	p, err := r.store.Load()
	if err != nil {
		return err
	}
	want, err := keyID(p.SA.Public())
	if err != nil {
		return err
	}
	script := scripts.PodTokens()
	return d.e.poll(ctx, play, "", r.o.Timeout, func() (bool, string, error) {
		pods, err := admin.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "the API (" + firstLine(err.Error()) + ")", nil
		}
		running := map[string]string{}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running[string(p.UID)] = p.Namespace + "/" + p.Name
			}
		}
		var mu sync.Mutex
		var waiting []string
		_, err = transport.Fanout(ctx, play, names(d.hosts), transport.Policy{Limit: d.e.Forks}, nil,
			func(ctx context.Context, name string) (bool, error) {
				res, err := d.e.Conn(name).Run(ctx, script, nil)
				if err != nil {
					return false, err
				}
				for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
					file, header, ok := strings.Cut(line, " ")
					uid := strings.Split(strings.TrimPrefix(file, kubeadm.KubeletDir+"/pods/"), "/")[0]
					if pod, run := running[uid]; ok && run && tokenKeyID(header+".") != want {
						mu.Lock()
						waiting = append(waiting, pod)
						mu.Unlock()
					}
				}
				return false, nil
			})
		if err != nil {
			return false, "", err
		}
		sort.Strings(waiting)
		return len(waiting) == 0, "new service-account tokens in Pods " + strings.Join(waiting, ", "), nil
	})
}

// checkPresented makes sure nothing presents a certificate the old CAs signed before they leave the
// bundles: every certificate on every host (control-plane files, kubeconfigs, kubelet client and serving
// certificates) must be signed by a current CA.
func (r *caRotation) checkPresented(ctx context.Context, play string) error {
	d := r.d
	p, err := r.store.Load()
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var old []string
	_, err = d.e.play(ctx, play, names(d.hosts), 0,
		func(ctx context.Context, name string) (bool, error) {
			out, err := d.e.Conn(name).Run(ctx, "sh -s", []byte(scripts.Certs()))
			if err != nil {
				return false, err
			}
			list, err := certs.Parse(name, out.Stdout, time.Now())
			if err != nil {
				return false, err
			}
			for _, c := range list {
				if c.Cert == nil || c.Cert.IsCA {
					continue
				}
				ok := false
				for _, ca := range p.CAs {
					ok = ok || c.Cert.CheckSignatureFrom(ca.Cert) == nil
				}
				if !ok {
					mu.Lock()
					old = append(old, name+":"+c.Path)
					mu.Unlock()
				}
			}
			return false, nil
		})
	if err != nil {
		return err
	}
	if len(old) > 0 {
		sort.Strings(old)
		return fmt.Errorf("these certificates are not signed by the new CAs, so the old ones cannot leave the bundles yet: %s", strings.Join(old, ", "))
	}
	return nil
}

// retireSAKey decides whether the old service-account key stays accepted after the rotation: while token
// Secrets (long-lived, legacy) it signed remain, their holders would otherwise be locked out.
func (r *caRotation) retireSAKey(ctx context.Context, play string) error {
	d := r.d
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return err
	}
	others, err := r.store.Others(r.rot)
	if err != nil {
		return err
	}
	old, err := keyID(others.SA.Public())
	if err != nil {
		return err
	}
	secrets, err := admin.Kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{FieldSelector: "type=" + string(corev1.SecretTypeServiceAccountToken)})
	if err != nil {
		return err
	}
	var signed []string
	for _, s := range secrets.Items {
		if tokenKeyID(string(s.Data[corev1.ServiceAccountTokenKey])) == old {
			signed = append(signed, s.Namespace+"/"+s.Name)
		}
	}
	if len(signed) == 0 {
		return r.store.SetRetiredSAKey(nil)
	}
	pub, err := pki.EncodePublicKey(others.SA.Public())
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("the old service-account key stays accepted: token Secrets it signed remain (%s); delete them (or recreate them, which signs them anew) and run certs rotate --ca again later to retire it",
		strings.Join(signed, ", "))
	r.res.Warnings = append(r.res.Warnings, msg)
	d.e.say(play, "", "%s", msg)
	return r.store.SetRetiredSAKey(pub)
}
