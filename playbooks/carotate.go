package playbooks

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/bootstrap"
	"github.com/clusterctl/clusterctl/tasks/certs"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/workloads"
	"github.com/clusterctl/clusterctl/transport"
)

// CARotateOptions tune certs rotate --ca.
type CARotateOptions struct {
	StateDir string
	// Timeout bounds each wait: a node's static Pods, workload rollouts, serving certificates, tokens.
	Timeout time.Duration
	// MaxUnavailable is how many workers' kubelets restart at once (0 is 1; control-plane nodes one at a
	// time): each batch's Nodes and the Pods Ready on them before are Ready again before the next.
	MaxUnavailable int
	Now            func() time.Time
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
	orDefault(&o.Timeout, defaultWait)
	o.Now = clockOr(o.Now)
	d, p, err := newDeployment(e, clusterHosts(ctx, e), deployOptions{Now: o.Now, Timeout: o.Timeout, KubeletBatch: o.MaxUnavailable})
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
		rot = store.NewRotation(o.Now())
	} else if next := pki.StagesDone(rot) + 1; next <= pki.StageFinish {
		res.Resumed = next
		e.say("ca", "", "resuming the CA rotation started %s at stage %d (%s)", rot.Started.Format(time.RFC3339), next, pki.StageNames[next])
	}
	if _, p, err = d.preflight(ctx, p, PreflightOptions{}); err != nil {
		return res, err
	}
	r := &caRotation{d: d, o: o, store: store, rot: rot, res: res}
	res.Stages, err = runSteps(ctx, rotationResume(e.Sink, rot), p, r.stages())
	if err != nil {
		return res, err
	}
	return res, store.EndRotation()
}

// stages are the CA rotation's stages, in pki's order (pki.StageGenerate first): each applied to the whole
// fleet, resumed stage by stage from the rotation's journal (rotationResume); within a stage, the hosts'
// files are compared with the stage's.
func (r *caRotation) stages() []Step {
	return []Step{
		{Name: pki.StageStep(pki.StageGenerate), Run: do(r.generate)},
		{Name: pki.StageStep(pki.StageTrust), Run: r.trust},
		{Name: pki.StageStep(pki.StageReissue), Run: r.reissue},
		{Name: pki.StageStep(pki.StageSign), Run: r.sign},
		{Name: pki.StageStep(pki.StageFinish), Run: r.finish},
	}
}

// rotationResume runs the stages not done, recording in the rotation's journal the stage under way before it
// and the stage done after it, so that a run interrupted anywhere resumes where it stopped.
func rotationResume(sink transport.Sink, rot *pki.Rotation) runOptions {
	stage := func(i int) int { return pki.StageGenerate + i }
	return runOptions{Sink: sink, Journal: rot,
		Wrap: func(i int, err error) error {
			return fmt.Errorf("CA rotation, stage %d (%s): %w\n(the rotation is recorded in %s: run certs rotate --ca again to resume it)",
				stage(i), pki.StageNames[stage(i)], err, rot.Path())
		}}
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
func (r *caRotation) trust(ctx context.Context, p *plan) error {
	const play = "ca-trust"
	p, err := r.apply(ctx, p, play, nil)
	if err != nil {
		return err
	}
	if err := r.clusterInfo(ctx, p); err != nil {
		return err
	}
	if err := r.waitRootCA(ctx, p, play); err != nil {
		return err
	}
	if r.rot.Data.TrustedAt.IsZero() {
		if err := r.rot.Update(func(rot *pki.Rotation) { rot.Data.TrustedAt = time.Now().UTC() }); err != nil {
			return err
		}
	}
	return r.restartWorkloads(ctx, play, r.rot.Data.TrustedAt)
}

// reissue makes the new CAs current and issues every leaf from them, the controller-manager and the token
// signer sign with them from their restart on; kubelets get new client certificates.
func (r *caRotation) reissue(ctx context.Context, p *plan) error {
	const play = "ca-reissue"
	if err := r.store.Swap(r.rot); err != nil {
		return err
	}
	// Workers get their client certificate of the new CA before the restart the stage's bundle (the new CA
	// first) makes: one restart for both. A run killed between the two finds the certificate there, and
	// still restarts the kubelet for the bundle (the kubelet script's stamp is written after the restart),
	// which loads it.
	ca, err := r.clusterCA()
	if err != nil {
		return err
	}
	p, err = r.apply(ctx, p, play, func(ctx context.Context, name string) (bool, error) {
		if has, err := r.hasClientCert(ctx, name, ca); has || err != nil {
			return false, err
		}
		_, err := r.newClientCert(ctx, name, ca, false)
		return err == nil, err
	})
	if err != nil {
		return err
	}
	return r.kubeletClientCerts(ctx, p, play)
}

// sign has kubelets request new serving certificates (signed with the new CA since reissue) and new tokens
// for their Pods. Its files are the reissue stage's: its roll restarts nothing (but the
// controller-manager and API server where an earlier version applied the reissue stage, which kept the
// old signers).
func (r *caRotation) sign(ctx context.Context, p *plan) error {
	const play = "ca-sign"
	d := r.d
	p, err := r.apply(ctx, p, play, nil)
	if err != nil {
		return err
	}
	ca, err := r.currentServingCA()
	if err != nil {
		return err
	}
	if _, err := d.renewServing(ctx, play, names(p.nodes()), func(c *x509.Certificate) bool { return c == nil || c.CheckSignatureFrom(ca) != nil }); err != nil {
		return err
	}
	if err := r.waitTokens(ctx, p, play); err != nil {
		return err
	}
	if r.rot.Data.TokensAt.IsZero() {
		return r.rot.Update(func(rot *pki.Rotation) { rot.Data.TokensAt = time.Now().UTC() })
	}
	return nil
}

// finish takes the old CAs out of every bundle once nothing presents a certificate they signed, and
// retires the old service-account key unless token Secrets it signed remain.
func (r *caRotation) finish(ctx context.Context, p *plan) error {
	const play = "ca-finish"
	d := r.d
	if err := r.checkPresented(ctx, p, play); err != nil {
		return err
	}
	// Clients read their token file again periodically (client-go every minute): the old key stays
	// accepted until they all have.
	if wait := time.Until(r.rot.Data.TokensAt.Add(tokenReread)); wait > 0 {
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
	p, err := r.apply(ctx, p, play, nil)
	if err != nil {
		return err
	}
	var signerFiles []string
	for _, s := range pki.Signers() {
		signerFiles = append(signerFiles, path.Join(kubeadm.PKIDir, pki.SignerPath(s)+".crt"), path.Join(kubeadm.PKIDir, pki.SignerPath(s)+".key"))
	}
	if _, err := d.e.play(ctx, Play{Name: play, Hosts: names(d.e.Inv.ControlPlanes()), Run: func(ctx context.Context, name string) (bool, error) {
		return apply.RemoveFiles(ctx, d.e.Conn(name), signerFiles...)
	}}); err != nil {
		return err
	}
	if err := r.clusterInfo(ctx, p); err != nil {
		return err
	}
	return r.waitRootCA(ctx, p, play)
}

// apply renders the stage's files and puts them on every host (it returns the rendered plan): external etcd members one at a time (each
// restarted and ready before the next), control-plane nodes one at a time (API server ready before the next,
// static Pods restarted and Ready before the next's controller-manager and scheduler: cpRoll), then the
// workers' files together, their kubelets restarted where ca.crt changed (their kubelet.conf's CA data
// following it) a batch at a time (rollKubelets); beforeRestart, when set, runs on each worker first and
// says whether its kubelet must restart whatever changed.
func (r *caRotation) apply(ctx context.Context, p *plan, play string, beforeRestart func(ctx context.Context, name string) (bool, error)) (*plan, error) {
	d := r.d
	p, err := d.render(ctx, p)
	if err != nil {
		return nil, err
	}
	if len(p.joining) > 0 {
		var names []string
		for n := range p.joining {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("%s not part of the cluster yet (no kubelet.conf): run clusterctl up or add-node first, or leave them out of the inventory", strings.Join(names, ", "))
	}
	if err := d.prepare(p); err != nil {
		return nil, err
	}
	if err := d.rollEtcd(ctx, p, play); err != nil {
		return nil, err
	}
	roll := d.cpRoll(p, play, true)
	for _, h := range d.e.Inv.ControlPlanes() {
		if _, err := roll.node(ctx, h); err != nil {
			return nil, err
		}
	}
	if err := roll.settle(ctx); err != nil {
		return nil, err
	}
	workers := names(p.workers())
	if len(workers) == 0 {
		return p, nil
	}
	if _, err := d.push(ctx, p, play, workers, d.e.Forks); err != nil {
		return nil, err
	}
	return p, d.rollKubelets(ctx, play, workers, kubeletRoll{restart: func(ctx context.Context, name string) (time.Time, error) {
		if beforeRestart != nil {
			restart, err := beforeRestart(ctx, name)
			if err != nil {
				return time.Time{}, err
			}
			if restart {
				d.markRestart(name)
			}
		}
		out, err := d.kubeletOn(ctx, p, name)
		return out.Started, err
	}})
}

// currentServingCA is the state directory's kubelet serving CA: once swapped, the new one.
func (r *caRotation) currentServingCA() (*x509.Certificate, error) {
	data, err := os.ReadFile(filepath.Join(r.store.Dir, pki.KubeletServingCA+".crt"))
	if err != nil {
		return nil, err
	}
	return pki.ParseCert(data)
}

// clusterInfo publishes the CA data of ca.crt in kube-public/cluster-info, which joining nodes trust; the
// controller-manager adds the signatures of the bootstrap tokens.
func (r *caRotation) clusterInfo(ctx context.Context, p *plan) error {
	d := r.d
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return err
	}
	kc, err := bootstrap.ClusterInfoKubeconfig(p.rendered.NodeEndpoint, p.caPEM())
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

// waitRootCA waits until every namespace's kube-root-ca.crt, which Pods mount as their CA data, is ca.crt.
func (r *caRotation) waitRootCA(ctx context.Context, p *plan, play string) error {
	d := r.d
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return err
	}
	want := string(p.caPEM())
	return d.e.poll(ctx, play, "", r.o.Timeout, func() (bool, string, error) {
		stale, err := workloads.StaleRootCA(ctx, admin.Kube, want)
		if err != nil {
			return false, "the API (" + firstLine(err.Error()) + ")", nil
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
	todo, unowned, err := workloads.StartedBefore(ctx, admin.Kube, trustedAt)
	if err != nil {
		return err
	}
	for _, p := range unowned {
		msg := fmt.Sprintf("Pod %s started before the new CA was trusted and has no controller clusterctl can roll: if it reads its CA data only at start, restart it before the reissue stage", p)
		if !slices.Contains(r.res.Warnings, msg) {
			r.res.Warnings = append(r.res.Warnings, msg)
			d.e.say(play, "", "%s", msg)
		}
	}
	for _, w := range todo {
		if err := workloads.Restart(ctx, admin.Kube, w, time.Now()); err != nil {
			return err
		}
		r.res.Restarted = append(r.res.Restarted, w.Namespace+"/"+w.Kind+"/"+w.Name)
		d.e.say(play, "", "restarting %s: its Pods started before the new CA was trusted", w)
	}
	return d.e.poll(ctx, play, "", r.o.Timeout, func() (bool, string, error) {
		var waiting []string
		for _, w := range todo {
			done, why, err := workloads.RolledOut(ctx, admin.Kube, w)
			if err != nil {
				return false, "", err
			}
			if !done {
				waiting = append(waiting, w.String()+" ("+why+")")
			}
		}
		return len(waiting) == 0, "the rollout of " + strings.Join(waiting, ", "), nil
	})
}

// kubeletClientCerts gives every kubelet a client certificate signed by the new CA (system:node:<name> in
// system:nodes, as its own requests get), unless it has one: a new kubelet-client-<time>.pem beside the old,
// kubelet-client-current.pem moved to it, the kubelet restarted (a rolling restart: rollKubelets, of the
// kubelets whose certificate is not the new CA's). The workers got theirs in the reissue stage's own
// restart of their kubelets.
func (r *caRotation) kubeletClientCerts(ctx context.Context, p *plan, play string) error {
	ca, err := r.clusterCA()
	if err != nil {
		return err
	}
	return r.d.rollKubelets(ctx, play, names(p.nodes()), kubeletRoll{
		need: func(ctx context.Context, name string) (bool, error) {
			has, err := r.hasClientCert(ctx, name, ca)
			return !has && err == nil, err
		},
		restart: func(ctx context.Context, name string) (time.Time, error) { return r.newClientCert(ctx, name, ca, true) },
	})
}

// clusterCA is the state directory's cluster CA (once swapped, the new one), read once for a stage's hosts.
func (r *caRotation) clusterCA() (*pki.KeyPair, error) {
	keys, err := r.store.Load()
	if err != nil {
		return nil, err
	}
	ca := keys.CAs["ca"]
	if ca == nil || ca.Key == nil {
		return nil, fmt.Errorf("the state directory %s has no cluster CA key", r.store.Dir)
	}
	return ca, nil
}

// hasClientCert reports whether a host's kubelet client certificate is signed by ca.
func (r *caRotation) hasClientCert(ctx context.Context, name string, ca *pki.KeyPair) (bool, error) {
	cur, err := apply.ReadCert(ctx, r.d.e.Conn(name), kubeadm.KubeletClientCurrent)
	return err == nil && cur != nil && cur.CheckSignatureFrom(ca.Cert) == nil, err
}

// newClientCert gives a kubelet a client certificate signed by ca and, with restart, restarts it and
// reports when by the host's clock. Key and certificate are made on the workstation and only the node's
// own go to it.
func (r *caRotation) newClientCert(ctx context.Context, name string, ca *pki.KeyPair, restart bool) (time.Time, error) {
	node := r.d.e.Inv.Host(name).NodeName
	kp, err := r.store.Issuer.NewLeaf(pki.Spec{Name: "kubelet-client", CA: "ca", CommonName: "system:node:" + node,
		Organization: []string{pki.NodesGroup}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, nil)
	if err != nil {
		return time.Time{}, err
	}
	key, err := pki.EncodeKey(kp.Key)
	if err != nil {
		return time.Time{}, err
	}
	return apply.SwitchKubeletClient(ctx, r.d.e.Conn(name), append(pki.EncodeCert(kp.Cert), key...), time.Now(), restart)
}

// tokenReread is how long after the token files are renewed every client has read them: client-go reads its
// token file again every minute; a margin is added.
const tokenReread = 75 * time.Second

// waitTokens waits until every running Pod's service-account token, as its kubelet wrote it, is signed with
// the new key: a restarted kubelet requests new tokens for its Pods. Only the tokens' headers are read.
func (r *caRotation) waitTokens(ctx context.Context, p *plan, play string) error {
	d := r.d
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return err
	}
	keys, err := r.store.Load()
	if err != nil {
		return err
	}
	want, err := workloads.KeyID(keys.SA.Public())
	if err != nil {
		return err
	}
	return d.e.poll(ctx, play, "", r.o.Timeout, func() (bool, string, error) {
		running, err := workloads.RunningPods(ctx, admin.Kube)
		if err != nil {
			return false, "the API (" + firstLine(err.Error()) + ")", nil
		}
		var mu sync.Mutex
		var waiting []string
		_, err = d.e.play(ctx, Play{Name: play, Hosts: names(p.nodes()), Quiet: true, Run: func(ctx context.Context, name string) (bool, error) {
			old, err := apply.OldPodTokens(ctx, d.e.Conn(name), running, want)
			if err != nil {
				return false, err
			}
			mu.Lock()
			waiting = append(waiting, old...)
			mu.Unlock()
			return false, nil
		}})
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
func (r *caRotation) checkPresented(ctx context.Context, p *plan, play string) error {
	d := r.d
	keys, err := r.store.Load()
	if err != nil {
		return err
	}
	var cas []*x509.Certificate
	for _, ca := range keys.CAs {
		cas = append(cas, ca.Cert)
	}
	var mu sync.Mutex
	var old []string
	_, err = d.e.play(ctx, Play{Name: play, Hosts: names(p.hosts), Run: func(ctx context.Context, name string) (bool, error) {
		list, err := certs.Read(ctx, d.e.Conn(name), time.Now())
		if err != nil {
			return false, err
		}
		notNew := certs.NotSignedBy(list, cas)
		mu.Lock()
		old = append(old, notNew...)
		mu.Unlock()
		return false, nil
	}})
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
	old, err := workloads.KeyID(others.SA.Public())
	if err != nil {
		return err
	}
	signed, err := workloads.SecretsSignedBy(ctx, admin.Kube, old)
	if err != nil {
		return err
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
