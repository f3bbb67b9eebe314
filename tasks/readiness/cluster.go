package readiness

import (
	"fmt"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/clusterctl/clusterctl/tasks/nodes"
)

// maxNamed bounds the Pods or objects one finding names.
const maxNamed = 5

// PDBs finds the PodDisruptionBudgets that allow no disruption now and cover a Pod a drain of the nodes
// drained would evict: the drain would wait for them until its timeout, then fail the run half-way.
func PDBs(pdbs []policyv1.PodDisruptionBudget, pods []corev1.Pod, drained map[string]bool) Report {
	var out Report
	for i := range pdbs {
		pdb := &pdbs[i]
		if pdb.Status.DisruptionsAllowed > 0 || pdb.Spec.Selector == nil {
			continue
		}
		// policy/v1: a null selector selects no Pod, an empty one every Pod of the namespace
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			continue
		}
		var covered []string
		for j := range pods {
			p := &pods[j]
			if p.Namespace != pdb.Namespace || !drained[p.Spec.NodeName] || nodes.Daemon(p) ||
				p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			covered = append(covered, p.Name+" on "+p.Spec.NodeName)
		}
		if len(covered) == 0 {
			continue
		}
		out = append(out, blocker(CheckPDB, "PodDisruptionBudget "+pdb.Namespace+"/"+pdb.Name,
			"allows no disruption (%d healthy, %d needed) and covers %s, which the upgrade drains: scale the workload up, or relax the budget for the upgrade; with --force the drain waits out --drain-timeout and the run stops there",
			pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy, names("Pod", covered)))
	}
	return out
}

// names is "Pod a, b and 3 more" for a list.
func names(kind string, list []string) string {
	slices.Sort(list)
	if len(list) > 1 {
		kind += "s"
	}
	if len(list) > maxNamed {
		return fmt.Sprintf("%s %s and %d more", kind, strings.Join(list[:maxNamed], ", "), len(list)-maxNamed)
	}
	return kind + " " + strings.Join(list, ", ")
}

// Nodes finds the Nodes that are not Ready (an upgrade starts from a healthy cluster; skip those the
// run itself left mid-way: current) and the Nodes cordoned by someone else than the run (ours): the run
// drains and upgrades them and leaves them cordoned.
func Nodes(list []corev1.Node, current, ours map[string]bool) Report {
	var out Report
	for i := range list {
		n := &list[i]
		if !nodes.Ready(n) && !current[n.Name] {
			out = append(out, blocker(CheckNode, "Node "+n.Name, "is not Ready (%s): find out why (kubectl describe node %s) and bring it back, or take it out of the cluster (clusterctl remove-node)",
				notReadyReason(n), n.Name))
		}
		if n.Spec.Unschedulable && !ours[n.Name] {
			out = append(out, warning(CheckCordoned, "Node "+n.Name, "is cordoned, not by clusterctl: the upgrade drains and upgrades it and leaves it cordoned (kubectl uncordon %s when its work is done)", n.Name))
		}
	}
	return out
}

func notReadyReason(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Message != "" {
				return fmt.Sprintf("%s: %s", c.Reason, c.Message)
			}
			return string(c.Status)
		}
	}
	return "no Ready condition"
}

// CSRs finds the certificate signing requests neither approved nor denied: a kubelet waiting for its
// certificate, or an old request nobody answered.
func CSRs(list []certificatesv1.CertificateSigningRequest, now time.Time) Report {
	var out Report
	for i := range list {
		c := &list[i]
		answered := false
		for _, cond := range c.Status.Conditions {
			if cond.Type == certificatesv1.CertificateApproved || cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed {
				answered = true
			}
		}
		if answered {
			continue
		}
		age := now.Sub(c.CreationTimestamp.Time).Round(time.Minute)
		out = append(out, warning(CheckCSR, "CertificateSigningRequest "+c.Name, "is pending for %s (signer %s, requested by %s): approve it if you expected it (kubectl certificate approve %s), else deny it",
			age, c.Spec.SignerName, c.Spec.Username, c.Name))
	}
	return out
}

// Cert is a certificate as the report sees it: where, what, until when, and whether the run renews it.
type Cert struct {
	Host, Path, Subject string
	NotAfter            time.Time
	// Renewed: the run replaces it on the way (control-plane certificates with --certificate-renewal).
	Renewed bool
	// Rotated: its owner renews it by itself (a kubelet's client certificate).
	Rotated bool
	// CA: a certificate authority (nothing signed by it is valid after it).
	CA bool
}

// Certificates finds the certificates that expire before the run could end (now+window) plus margin: a
// CA, or a certificate the run does not renew, is a blocker (renew it first: clusterctl certs rotate); one
// its owner rotates is a warning.
func Certificates(certs []Cert, now time.Time, window, margin time.Duration) Report {
	var out Report
	deadline := now.Add(window + margin)
	for _, c := range certs {
		if c.NotAfter.After(deadline) || c.Renewed && !c.CA {
			continue
		}
		left := c.NotAfter.Sub(now).Round(time.Minute)
		what := fmt.Sprintf("expires %s (in %s), before the upgrade could end (up to %s) with a margin of %s", c.NotAfter.UTC().Format(time.RFC3339), left, window.Round(time.Minute), margin)
		obj := fmt.Sprintf("certificate %s on %s (%s)", c.Path, c.Host, c.Subject)
		switch {
		case c.CA:
			out = append(out, blocker(CheckCertificate, obj, "%s: rotate the CA first (clusterctl certs rotate --ca)", what))
		case c.Rotated:
			out = append(out, warning(CheckCertificate, obj, "%s; its kubelet renews it by itself if it runs", what))
		default:
			out = append(out, blocker(CheckCertificate, obj, "%s: renew it first (clusterctl certs rotate)", what))
		}
	}
	return out
}

// Member is an etcd member (or etcd host) as the report sees it.
type Member struct {
	Host string
	// Err is why it could not be asked; Errors what it reports (alarms such as NOSPACE, a failed
	// linearizable read).
	Err    error
	Errors []string
}

// Etcd finds the members that do not answer or report errors (alarms): the upgrade restarts each member
// in turn, and needs every other one healthy while one is down.
func Etcd(members []Member) Report {
	var out Report
	for _, m := range members {
		switch {
		case m.Err != nil:
			out = append(out, blocker(CheckEtcd, "etcd member on "+m.Host, "does not answer (%v): bring it back first (clusterctl etcd status)", m.Err))
		case len(m.Errors) > 0:
			out = append(out, blocker(CheckEtcd, "etcd member on "+m.Host, "reports %s: clear it first (an alarm such as NOSPACE: compact, defragment, then etcdctl alarm disarm)", strings.Join(m.Errors, "; ")))
		}
	}
	return out
}

// Skew turns the version checks' reasons into blockers.
func Skew(reasons []string) Report {
	var out Report
	for _, r := range reasons {
		out = append(out, blocker(CheckSkew, "versions", "%s", r))
	}
	return out
}
