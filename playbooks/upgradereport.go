package playbooks

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/readiness"
)

// CertificateMargin is how long after the end an upgrade could take a certificate must still be valid.
const CertificateMargin = 24 * time.Hour

// readinessReport asks the cluster what would block the upgrade or break on the way (the Nodes, already
// listed by check, given as list): PodDisruptionBudgets on the nodes it drains, the deprecated APIs each
// control-plane node's API server was asked for, etcd's members, pending CSRs, certificates. What cannot
// be asked is a finding of its own, never a silent pass.
func (u *upgradeRun) readinessReport(ctx context.Context, p *plan, admin *apiclient.Client, list []corev1.Node) readiness.Report {
	ours := map[string]bool{}
	current := map[string]bool{}
	drained := map[string]bool{}
	cordons := u.drainWindow().ours
	run := map[string]bool{}
	for _, h := range u.e.Hosts {
		run[h.NodeName] = true
		current[h.NodeName] = u.current(h.Name)
	}
	for i := range list {
		n := &list[i]
		ours[n.Name] = cordons.has(n.Name)
		// the kubelets step drains every node of the run whose kubelet is not at the target
		if run[n.Name] && n.Status.NodeInfo.KubeletVersion != u.res.To {
			drained[n.Name] = true
		}
	}
	report := readiness.Nodes(list, current, ours)
	pdbs, err := admin.Kube.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{})
	pods, err2 := admin.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err == nil && err2 == nil {
		report = append(report, readiness.PDBs(pdbs.Items, pods.Items, drained)...)
	} else {
		report = append(report, cannotAsk(readiness.CheckPDB, "PodDisruptionBudgets", firstErr(err, err2)))
	}
	if !u.limit {
		report = append(report, u.removedAPIs(ctx)...)
	}
	csrs, err := admin.Kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err == nil {
		report = append(report, readiness.CSRs(csrs.Items, u.o.Now())...)
	} else {
		report = append(report, cannotAsk(readiness.CheckCSR, "CertificateSigningRequests", err))
	}
	report = append(report, u.etcdFindings(ctx)...)
	report = append(report, u.certificateFindings(ctx, p)...)
	return report
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func cannotAsk(check, what string, err error) readiness.Finding {
	return readiness.Finding{Severity: readiness.Blocker, Check: check, Object: what,
		Message: fmt.Sprintf("could not be read (%s): the upgrade cannot tell whether they block it", firstLine(err.Error()))}
}

// removedAPIs reads every control-plane node's API server's deprecated-API metric, side by side.
func (u *upgradeRun) removedAPIs(ctx context.Context) readiness.Report {
	var mu sync.Mutex
	var out readiness.Report
	var wg sync.WaitGroup
	for _, h := range u.e.Inv.ControlPlanes() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := u.deprecatedOn(ctx, h)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out = append(out, readiness.Finding{Severity: readiness.Warning, Check: readiness.CheckRemovedAPI, Object: "the API server on " + h.Name,
					Message: fmt.Sprintf("its metrics could not be read (%s): the APIs its clients use are unknown", firstLine(err.Error()))})
				return
			}
			out = append(out, f...)
		}()
	}
	wg.Wait()
	return out
}

// deprecatedOn reads one API server's /metrics (bounded) for the deprecated APIs it was asked for.
func (u *upgradeRun) deprecatedOn(ctx context.Context, h *inventory.Host) (readiness.Report, error) {
	c, err := u.e.nodeClient(ctx, h)
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	body, err := c.Kube.Discovery().RESTClient().Get().AbsPath("/metrics").Stream(mctx)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	apis, err := readiness.ParseDeprecated(body)
	if err != nil {
		return nil, err
	}
	return readiness.RemovedAPIs(h.Name, apis, u.to), nil
}

// etcdFindings asks every etcd host's member for its health and alarms.
func (u *upgradeRun) etcdFindings(ctx context.Context) readiness.Report {
	hosts := u.e.Inv.EtcdHosts()
	if u.limit || len(hosts) == 0 {
		return nil
	}
	seen := probeEtcd(ctx, u.e, hosts)
	var members []readiness.Member
	for _, h := range hosts {
		m := readiness.Member{Host: h.Name, Err: seen.failed[h.Name]}
		if st := seen.statuses[h.Name]; st != nil {
			m.Errors = st.Errors
		} else if m.Err == nil {
			m.Err = fmt.Errorf("no status")
		}
		members = append(members, m)
	}
	return readiness.Etcd(members)
}

// certificateFindings reads every host's certificates and finds those that expire before the run could
// end (its window: every wait of every node at its timeout) plus CertificateMargin.
func (u *upgradeRun) certificateFindings(ctx context.Context, p *plan) readiness.Report {
	now := u.o.Now()
	list, results, err := CheckExpiration(ctx, u.e, now)
	var out readiness.Report
	for _, r := range results {
		if r.Err != nil {
			out = append(out, readiness.Finding{Severity: readiness.Warning, Check: readiness.CheckCertificate, Object: "certificates on " + r.Host,
				Message: fmt.Sprintf("could not be read (%s)", firstLine(r.Err.Error()))})
		}
	}
	if err != nil && len(list) == 0 {
		return out
	}
	cps := map[string]bool{}
	for _, h := range u.e.Inv.ControlPlanes() {
		cps[h.Name] = true
	}
	var certs []readiness.Cert
	for _, c := range list {
		if c.NotAfter.IsZero() {
			continue // a kubeconfig that points at a file: the file is read on its own
		}
		rc := readiness.Cert{Host: c.Host, Path: c.Path, Subject: c.Subject, NotAfter: c.NotAfter, CA: c.Cert != nil && c.Cert.IsCA,
			Rotated: rotatedByKubelet(c.Path)}
		rc.Renewed = u.o.CertificateRenewal && cps[c.Host] && !u.limit && renewedOnControlPlane(c.Path)
		certs = append(certs, rc)
	}
	return append(out, readiness.Certificates(certs, now, u.window(p), CertificateMargin)...)
}

// rotatedByKubelet: the kubelet's own client and serving certificates (and its kubeconfig, which points
// at the client one), which it renews by itself.
func rotatedByKubelet(p string) bool {
	return strings.HasPrefix(p, kubeadm.KubeletPKIDir+"/") || p == kubeadm.KubeletKubeconfig
}

// renewedOnControlPlane: what the upgrade renews on a control-plane node with --certificate-renewal, as
// kubeadm upgrade does: the leaf certificates under the PKI directory and the components' kubeconfigs.
func renewedOnControlPlane(p string) bool {
	return strings.HasPrefix(p, kubeadm.PKIDir+"/") ||
		path.Dir(p) == kubeadm.KubernetesDir && strings.HasSuffix(p, ".conf") && p != kubeadm.KubeletKubeconfig
}

// window is the longest the run could take: every control-plane node's waits (etcd, static Pods, its
// kubelet) and every worker batch's drain and waits at their timeouts.
func (u *upgradeRun) window(p *plan) time.Duration {
	batches := len(u.workerBatches(p))
	cps := 0
	if !u.limit {
		cps = len(u.controlPlaneHosts(p))
	}
	return time.Duration(cps)*(3*u.o.Timeout+u.o.DrainTimeout) + time.Duration(batches)*(u.o.DrainTimeout+2*u.o.Timeout)
}
