package csr

import (
	"context"
	"slices"
	"strings"
	"sync"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/clusterctl/clusterctl/tasks/bootstrap"
)

// Approver approves the pending kubelet serving requests that pass CheckServing, round after round, and
// remembers the nodes that have an approved one and the requests it left pending, with why. With the
// tokens of the hosts joining in the run, it also approves their kubelets' client requests that pass
// CheckClient, one per token while no Node of its name is registered. A client request made with one of
// clusterctl's tokens that it does not approve is left pending and reported; others (kubeadm's tokens) are
// the controller-manager's.
type Approver struct {
	Kube     kubernetes.Interface
	Nodes    map[string]Node
	Reserved Reserved
	// Joining are the Node names of the hosts joining in the run, by the ID of the token issued to each.
	Joining map[string]string
	// Say reports a decision (each request left pending is reported once).
	Say func(format string, args ...any)

	mu         sync.Mutex
	approved   map[string]bool
	unapproved map[string]string
	used       map[string]string // token ID -> the client request approved for it
}

// Approved reports whether a node has an approved (or issued) serving request.
func (a *Approver) Approved(node string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.approved[node]
}

// Unapproved are the requests left pending, with why.
func (a *Approver) Unapproved() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]string{}
	for k, v := range a.unapproved {
		out[k] = v
	}
	return out
}

// Round looks at every kubelet serving request once. It returns the requests it read, with the approvals
// it made.
func (a *Approver) Round(ctx context.Context) ([]certificatesv1.CertificateSigningRequest, error) {
	list, err := a.Kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	if a.approved == nil {
		a.approved, a.unapproved = map[string]bool{}, map[string]string{}
	}
	a.mu.Unlock()
	var registered []corev1.Node // listed once a round, when a request is to be approved
	for i := range list.Items {
		r := &list.Items[i]
		if r.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName && Pending(r) {
			if err := a.client(ctx, r, list.Items); err != nil {
				return nil, err
			}
			continue
		}
		if r.Spec.SignerName != certificatesv1.KubeletServingSignerName {
			continue
		}
		node := strings.TrimPrefix(r.Spec.Username, "system:node:")
		if !Pending(r) {
			if approved(r) && CheckServing(r, a.Nodes, a.Reserved) == "" {
				a.mark(node)
			}
			continue
		}
		why := CheckServing(r, a.Nodes, a.Reserved)
		if why == "" {
			if registered == nil {
				nl, err := a.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
				if err != nil {
					return nil, err
				}
				registered = nl.Items
			}
			why = CheckRegistered(r, registered, a.Reserved)
		}
		if why != "" {
			a.refuse(r.Name, why)
			continue
		}
		r.Status.Conditions = append(r.Status.Conditions, Approved("requester and every name and address checked against the inventory by clusterctl"))
		if _, err := a.Kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, r.Name, r, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				continue // changed meanwhile: the next round sees it
			}
			return nil, err
		}
		a.say("approved serving certificate of %s (%s)", node, r.Name)
		a.mark(node)
	}
	return list.Items, nil
}

// client approves a joining kubelet's client request that passes CheckClient, the first for its token,
// while no Node of its name is registered. One made with a token of clusterctl's (JoinGroup) that does not
// pass is left pending and reported; others are left to the controller-manager, silently: they may be
// another tool's.
func (a *Approver) client(ctx context.Context, r *certificatesv1.CertificateSigningRequest, all []certificatesv1.CertificateSigningRequest) error {
	why := CheckClient(r, a.Joining)
	id := strings.TrimPrefix(r.Spec.Username, "system:bootstrap:")
	node := a.Joining[id]
	if why == "" {
		why = a.usedBy(id, r.Name, all)
	}
	if why == "" {
		_, err := a.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		switch {
		case err == nil:
			why = "Node " + node + " is registered already: a joining kubelet asks before it registers"
		case !apierrors.IsNotFound(err):
			return err
		}
	}
	if why != "" {
		if slices.Contains(r.Spec.Groups, bootstrap.JoinGroup) {
			a.refuse(r.Name, "client certificate requested by "+r.Spec.Username+": "+why)
		}
		return nil
	}
	a.mu.Lock()
	if a.used == nil {
		a.used = map[string]string{}
	}
	a.used[id] = r.Name
	a.mu.Unlock()
	r.Status.Conditions = append(r.Status.Conditions, Approved("a kubelet joining with the token clusterctl issued to its host, for that host's Node, checked by clusterctl"))
	if _, err := a.Kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, r.Name, r, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	a.say("approved client certificate of %s, joining (%s)", node, r.Name)
	return nil
}

// usedBy says why a token may get no other client certificate ("" when it may): one was approved for it
// already, by this approver or before (another request of its user decided).
func (a *Approver) usedBy(id, name string, all []certificatesv1.CertificateSigningRequest) string {
	a.mu.Lock()
	prev := a.used[id]
	a.mu.Unlock()
	if prev != "" && prev != name {
		return "the token got a client certificate already (" + prev + ")"
	}
	for i := range all {
		o := &all[i]
		if o.Name != name && o.Spec.Username == "system:bootstrap:"+id && o.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName && approved(o) {
			return "the token got a client certificate already (" + o.Name + ")"
		}
	}
	return ""
}

// refuse records a request left pending, reporting it the first time.
func (a *Approver) refuse(name, why string) {
	a.mu.Lock()
	_, seen := a.unapproved[name]
	a.unapproved[name] = why
	a.mu.Unlock()
	if !seen {
		a.say("left %s unapproved: %s", name, why)
	}
}

func (a *Approver) mark(node string) {
	a.mu.Lock()
	a.approved[node] = true
	a.mu.Unlock()
}

func (a *Approver) say(format string, args ...any) {
	if a.Say != nil {
		a.Say(format, args...)
	}
}

func approved(r *certificatesv1.CertificateSigningRequest) bool {
	return hasCondition(r, certificatesv1.CertificateApproved)
}

func failed(r *certificatesv1.CertificateSigningRequest) bool {
	return hasCondition(r, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed)
}

// hasCondition reports whether the request has a condition of one of the types.
func hasCondition(r *certificatesv1.CertificateSigningRequest, types ...certificatesv1.RequestConditionType) bool {
	return slices.ContainsFunc(r.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
		return slices.Contains(types, c.Type)
	})
}
