// Package csr decides which kubelet certificate requests clusterctl approves. Upstream leaves serving
// requests to the cluster operator, because a node could otherwise ask for a certificate naming another
// host. clusterctl knows every host, so it approves a serving request only when it comes from an inventory
// node, for that node, naming nothing but that node's names and addresses (none of another host's, the
// control-plane endpoint's or the API server's), for serving only; and a joining kubelet's client request
// only when made with the token clusterctl issued to that host, for that host's Node, once.
package csr

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
)

// Node is what the inventory says a node may put in its serving certificate.
type Node struct {
	Name      string   // the Node's name
	DNSNames  []string // names it may claim (the node name, the host's name)
	Addresses []string // IP addresses it may claim
}

// Pending reports whether a request waits for a decision.
func Pending(r *certificatesv1.CertificateSigningRequest) bool {
	return !hasCondition(r, certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed)
}

// AwaitingSignature names a kubelet request (client or serving) that is approved and neither issued nor
// failed: the controller-manager has not signed it yet. "" when there is none.
func AwaitingSignature(requests []certificatesv1.CertificateSigningRequest) string {
	for i := range requests {
		r := &requests[i]
		if r.Spec.SignerName != certificatesv1.KubeletServingSignerName && r.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
			continue
		}
		if len(r.Status.Certificate) > 0 || !approved(r) || failed(r) {
			continue
		}
		return r.Name
	}
	return ""
}

// usagesWithin says why usages are not all among allowed, or lack need ("" when they are fine).
func usagesWithin(usages []certificatesv1.KeyUsage, need certificatesv1.KeyUsage, what string) string {
	for _, u := range usages {
		if u != certificatesv1.UsageDigitalSignature && u != certificatesv1.UsageKeyEncipherment && u != need {
			return fmt.Sprintf("usage %q is not for %s", u, what)
		}
	}
	if !slices.Contains(usages, need) {
		return fmt.Sprintf("no %s usage", need)
	}
	return ""
}

// parseRequest parses and checks the signature of a request's PEM certificate request, and its subject's
// organization (system:nodes, alone); the string says why it is refused.
func parseRequest(r *certificatesv1.CertificateSigningRequest) (*x509.CertificateRequest, string) {
	block, _ := pem.Decode(r.Spec.Request)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, "the request is not a PEM certificate request"
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Sprintf("the request does not parse: %v", err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Sprintf("the request's signature is wrong: %v", err)
	}
	if len(req.Subject.Organization) != 1 || req.Subject.Organization[0] != "system:nodes" {
		return nil, fmt.Sprintf("organization %q is not [system:nodes]", req.Subject.Organization)
	}
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return nil, "the request names e-mail addresses or URIs"
	}
	return req, ""
}

// Claim is whose a name or address is, for CheckServing: Owner is the Node name of the only node that may
// put it in its serving certificate ("" for none), What says what it is, Inventory that the inventory
// gives it to its owner (rather than it being learned from a host).
type Claim struct {
	Owner, What string
	Inventory   bool
}

// Reserved are the names and addresses (IP addresses in net.IP's String form) that only their owner may
// claim: every host's, the control-plane endpoint's, the API server's, the kubernetes Service's.
type Reserved map[string]Claim

// claimOf is the claim on a name or address, if any.
func (rs Reserved) claimOf(nameOrIP string) (Claim, bool) {
	c, ok := rs[canonical(nameOrIP)]
	return c, ok
}

// CheckServing returns "" when r is a kubelet serving request clusterctl may approve, else why it may not.
// nodes are the inventory's nodes by Node name; reserved are the names and addresses no other node may claim.
func CheckServing(r *certificatesv1.CertificateSigningRequest, nodes map[string]Node, reserved Reserved) string {
	if r.Spec.SignerName != certificatesv1.KubeletServingSignerName {
		return fmt.Sprintf("signer is %s, not %s", r.Spec.SignerName, certificatesv1.KubeletServingSignerName)
	}
	name, ok := strings.CutPrefix(r.Spec.Username, "system:node:")
	if !ok {
		return fmt.Sprintf("requested by %q, not by a node", r.Spec.Username)
	}
	node, ok := nodes[name]
	if !ok {
		return fmt.Sprintf("requested by node %q, which is not in the inventory", name)
	}
	if !slices.Contains(r.Spec.Groups, "system:nodes") {
		return fmt.Sprintf("requester %s is not in group system:nodes", r.Spec.Username)
	}
	if why := usagesWithin(r.Spec.Usages, certificatesv1.UsageServerAuth, "serving"); why != "" {
		return why
	}
	req, why := parseRequest(r)
	if why != "" {
		return why
	}
	if req.Subject.CommonName != r.Spec.Username {
		return fmt.Sprintf("subject %q is not the requester %q", req.Subject.CommonName, r.Spec.Username)
	}
	if len(req.DNSNames) == 0 && len(req.IPAddresses) == 0 {
		return "the request names no DNS name or address"
	}
	sans := slices.Clone(req.DNSNames)
	for _, ip := range req.IPAddresses {
		sans = append(sans, ip.String())
	}
	for _, san := range sans {
		if c, ok := reserved.claimOf(san); ok && c.Owner != name {
			return fmt.Sprintf("%s is %s, not node %s's", san, c.What, name)
		}
	}
	for _, d := range req.DNSNames {
		if !slices.Contains(node.DNSNames, d) {
			return fmt.Sprintf("DNS name %q is not node %s's (%s)", d, name, strings.Join(node.DNSNames, ", "))
		}
	}
	for _, ip := range req.IPAddresses {
		if !slices.ContainsFunc(node.Addresses, func(a string) bool { return net.ParseIP(a).Equal(ip) }) {
			return fmt.Sprintf("address %s is not node %s's (%s)", ip, name, strings.Join(node.Addresses, ", "))
		}
	}
	return ""
}

// CheckRegistered returns "" when no registered Node but the requester reports one of a serving request's
// addresses in its status.addresses, else which Node does. An address the inventory gives the requester
// stays its own whatever another Node reports; a learned one (the other family of a host the inventory
// names by one address, a host named by DNS) another Node has is refused. This covers the hosts the state
// directory has no record of (a cluster joined by an earlier clusterctl, hosts outside the run).
// CheckServing must have passed.
func CheckRegistered(r *certificatesv1.CertificateSigningRequest, registered []corev1.Node, reserved Reserved) string {
	name := strings.TrimPrefix(r.Spec.Username, "system:node:")
	req, why := parseRequest(r)
	if why != "" {
		return why
	}
	for _, ip := range req.IPAddresses {
		a := canonical(ip.String())
		if c, ok := reserved[a]; ok && c.Inventory && c.Owner == name {
			continue
		}
		for i := range registered {
			n := &registered[i]
			if n.Name == name {
				continue
			}
			for _, na := range n.Status.Addresses {
				if (na.Type == corev1.NodeInternalIP || na.Type == corev1.NodeExternalIP) && canonical(na.Address) == a {
					return fmt.Sprintf("%s is Node %s's (its status.addresses), not node %s's", a, n.Name, name)
				}
			}
		}
	}
	return ""
}

// CheckClient returns "" when r is a kubelet's first client certificate request (TLS bootstrap) that
// clusterctl may approve, else why it may not: signed by kube-apiserver-client-kubelet, requested with a
// token clusterctl issued in this run (joining: the Node name of the host each token ID was issued to) by
// the system:bootstrappers group, for system:node:<that host's Node name> in system:nodes, naming nothing
// else, for client auth only. The Approver also checks that the token got no certificate before and that
// no Node of the name is registered. It is what the controller-manager's csrapproving controller checks
// for kubeadm's tokens, narrowed to one identity per token.
func CheckClient(r *certificatesv1.CertificateSigningRequest, joining map[string]string) string {
	if r.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
		return fmt.Sprintf("signer is %s, not %s", r.Spec.SignerName, certificatesv1.KubeAPIServerClientKubeletSignerName)
	}
	id, ok := strings.CutPrefix(r.Spec.Username, "system:bootstrap:")
	want, issued := joining[id]
	if !ok || !issued {
		return fmt.Sprintf("requested by %q, not with a token clusterctl issued to a host joining in this run", r.Spec.Username)
	}
	if !slices.Contains(r.Spec.Groups, "system:bootstrappers") {
		return fmt.Sprintf("requester %s is not in group system:bootstrappers", r.Spec.Username)
	}
	if why := usagesWithin(r.Spec.Usages, certificatesv1.UsageClientAuth, "a client"); why != "" {
		return why
	}
	req, why := parseRequest(r)
	if why != "" {
		return why
	}
	if req.Subject.CommonName != "system:node:"+want {
		return fmt.Sprintf("subject %q, but the token was issued to node %s", req.Subject.CommonName, want)
	}
	if len(req.DNSNames) > 0 || len(req.IPAddresses) > 0 {
		return "a client request names hosts or addresses"
	}
	return ""
}

// Approved is the condition clusterctl adds to a request it approves.
func Approved(why string) certificatesv1.CertificateSigningRequestCondition {
	return certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
		Reason: "ClusterctlApproved", Message: why,
	}
}
