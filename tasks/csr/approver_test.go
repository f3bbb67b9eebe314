package csr

import (
	"context"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/clusterctl/clusterctl/inventory"
)

func TestApprover(t *testing.T) {
	ctx := context.Background()
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "w1", NodeName: "w1", Address: "10.0.0.11"}}}
	nodes := InventoryNodes(inv, map[string]string{"w1": "10.0.0.11"})
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	csr := func(name, user string, dns []string) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeletServingSignerName, Username: user, Groups: []string{"system:nodes", "system:authenticated"},
			Usages: serving, Request: request(t, user, []string{"system:nodes"}, dns, []string{"10.0.0.11"}, nil)}}
	}
	kube := fake.NewClientset(csr("good", "system:node:w1", []string{"w1"}), csr("foreign", "system:node:w1", []string{"w1", "bank.example.com"}))
	var said []string
	a := &Approver{Kube: kube, Nodes: nodes, Say: func(f string, _ ...any) { said = append(said, f) }}
	for range 2 {
		if _, err := a.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !a.Approved("w1") {
		t.Error("w1 not approved")
	}
	if why := a.Unapproved()["foreign"]; why == "" {
		t.Errorf("the request naming a foreign host was not left pending: %v", a.Unapproved())
	}
	r, _ := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, "foreign", metav1.GetOptions{})
	if !Pending(r) {
		t.Error("foreign request decided")
	}
	if len(said) != 2 { // one approval, one refusal reported once over two rounds
		t.Errorf("said %v", said)
	}
}

// With the run's bootstrap token, a joining kubelet's client request is approved; one made with another
// token is left to the controller-manager.
func TestApproverClientRequests(t *testing.T) {
	ctx := context.Background()
	nodes := map[string]Node{"w1": {Name: "w1"}}
	mk := func(name, user string) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Username: user, Groups: []string{"system:bootstrappers"},
			Usages:  []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			Request: request(t, "system:node:w1", []string{"system:nodes"}, nil, nil, nil)}}
	}
	kube := fake.NewClientset(mk("ours", "system:bootstrap:abcdef"), mk("theirs", "system:bootstrap:zzzzzz"))
	a := &Approver{Kube: kube, Nodes: nodes, TokenID: "abcdef"}
	if _, err := a.Round(ctx); err != nil {
		t.Fatal(err)
	}
	for name, pending := range map[string]bool{"ours": false, "theirs": true} {
		r, _ := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if Pending(r) != pending {
			t.Errorf("%s: pending %v, want %v", name, Pending(r), pending)
		}
	}
}
