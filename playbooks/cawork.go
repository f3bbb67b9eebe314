package playbooks

import (
	"context"
	"crypto/x509"
	"fmt"
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
)

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

// waitRootCA waits until every namespace's kube-root-ca.crt, which Pods mount as their CA data, is ca.crt.
func (r *caRotation) waitRootCA(ctx context.Context, play string) error {
	d := r.d
	admin, err := d.e.Admin(ctx)
	if err != nil {
		return err
	}
	want := string(d.caPEM())
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
			done, err := workloads.RolledOut(ctx, admin.Kube, w)
			if err != nil {
				return false, "", err
			}
			if !done {
				waiting = append(waiting, w.String())
			}
		}
		return len(waiting) == 0, "the rollout of " + strings.Join(waiting, ", "), nil
	})
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
	_, err = d.e.play(ctx, Play{Name: play, Hosts: names(d.nodes()), Run: func(ctx context.Context, name string) (bool, error) {
		conn := d.e.Conn(name)
		cur, err := apply.ReadCert(ctx, conn, kubeadm.KubeletClientCurrent)
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
		return true, apply.SwitchKubeletClient(ctx, conn, append(pki.EncodeCert(kp.Cert), key...), time.Now())
	}})
	return err
}

// tokenReread is how long after the token files are renewed every client has read them: client-go reads its
// token file again every minute; a margin is added.
const tokenReread = 75 * time.Second

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
	want, err := workloads.KeyID(p.SA.Public())
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
		_, err = d.e.play(ctx, Play{Name: play, Hosts: names(d.nodes()), Quiet: true, Run: func(ctx context.Context, name string) (bool, error) {
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
func (r *caRotation) checkPresented(ctx context.Context, play string) error {
	d := r.d
	p, err := r.store.Load()
	if err != nil {
		return err
	}
	var cas []*x509.Certificate
	for _, ca := range p.CAs {
		cas = append(cas, ca.Cert)
	}
	var mu sync.Mutex
	var old []string
	_, err = d.e.play(ctx, Play{Name: play, Hosts: names(d.hosts), Run: func(ctx context.Context, name string) (bool, error) {
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
