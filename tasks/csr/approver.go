package csr

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strings"
	"sync"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/clusterctl/clusterctl/inventory"
)

// InventoryNodes are the names and addresses each inventory host's kubelet may claim: its Node name and
// host name, and its learned (nodeIPs, by host), internal and SSH addresses.
func InventoryNodes(inv *inventory.Inventory, nodeIPs map[string]string) map[string]Node {
	nodes := map[string]Node{}
	for i := range inv.Hosts {
		h := &inv.Hosts[i]
		n := Node{Name: h.NodeName, DNSNames: []string{h.NodeName}}
		if h.Name != h.NodeName {
			n.DNSNames = append(n.DNSNames, h.Name)
		}
		for _, a := range []string{nodeIPs[h.Name], h.InternalAddress, h.Address} {
			if a != "" && !slices.Contains(n.Addresses, a) {
				n.Addresses = append(n.Addresses, a)
			}
		}
		nodes[h.NodeName] = n
	}
	return nodes
}

// Approver approves the pending kubelet serving requests that pass CheckServing, round after round, and
// remembers the nodes that have an approved one and the requests it left pending, with why. With a
// bootstrap token, it also approves the joining kubelets' client requests that pass CheckClient (others are
// left to the controller-manager).
type Approver struct {
	Kube  kubernetes.Interface
	Nodes map[string]Node
	// TokenID is the bootstrap token's ID of the run ("" when no node joins).
	TokenID string
	// Say reports a decision (each request left pending is reported once).
	Say func(format string, args ...any)

	mu         sync.Mutex
	approved   map[string]bool
	unapproved map[string]string
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
	for i := range list.Items {
		r := &list.Items[i]
		if r.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName && a.TokenID != "" && Pending(r) {
			if err := a.client(ctx, r); err != nil {
				return nil, err
			}
			continue
		}
		if r.Spec.SignerName != certificatesv1.KubeletServingSignerName {
			continue
		}
		node := strings.TrimPrefix(r.Spec.Username, "system:node:")
		if !Pending(r) {
			if approved(r) && CheckServing(r, a.Nodes) == "" {
				a.mark(node)
			}
			continue
		}
		if why := CheckServing(r, a.Nodes); why != "" {
			a.mu.Lock()
			_, seen := a.unapproved[r.Name]
			a.unapproved[r.Name] = why
			a.mu.Unlock()
			if !seen {
				a.say("left %s unapproved: %s", r.Name, why)
			}
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

// client approves a joining kubelet's client request that passes CheckClient; one that does not is left to
// the controller-manager, silently: it may be another tool's.
func (a *Approver) client(ctx context.Context, r *certificatesv1.CertificateSigningRequest) error {
	if CheckClient(r, a.TokenID, a.Nodes) != "" {
		return nil
	}
	r.Status.Conditions = append(r.Status.Conditions, Approved("a kubelet joining with clusterctl's bootstrap token, for an inventory node, checked by clusterctl"))
	if _, err := a.Kube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, r.Name, r, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	node := "a joining kubelet"
	if block, _ := pem.Decode(r.Spec.Request); block != nil {
		if req, err := x509.ParseCertificateRequest(block.Bytes); err == nil {
			node = strings.TrimPrefix(req.Subject.CommonName, "system:node:")
		}
	}
	a.say("approved client certificate of %s, joining (%s)", node, r.Name)
	return nil
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
