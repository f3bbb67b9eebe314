package csr

import (
	"context"
	"fmt"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/clusterctl/clusterctl/inventory"
)

func TestApprover(t *testing.T) {
	ctx := context.Background()
	inv := &inventory.Inventory{Hosts: []inventory.Host{{Name: "w1", NodeName: "w1", Address: "10.0.0.11", Roles: []inventory.Role{inventory.RoleWorker}}}}
	nodes, reserved := Fleet(inv, parsed(map[string]string{"w1": "10.0.0.11"}), nil)
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	csr := func(name, user string, dns []string) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeletServingSignerName, Username: user, Groups: []string{"system:nodes", "system:authenticated"},
			Usages: serving, Request: request(t, user, []string{"system:nodes"}, dns, []string{"10.0.0.11"}, nil)}}
	}
	kube := fake.NewClientset(csr("good", "system:node:w1", []string{"w1"}), csr("foreign", "system:node:w1", []string{"w1", "bank.example.com"}))
	var said []string
	a := &Approver{Kube: kube, Nodes: nodes, Reserved: reserved, Say: func(f string, _ ...any) { said = append(said, f) }}
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

// A joining kubelet's client request made with its host's token is approved, once, while its Node is not
// registered; one for another node, a second one, one after the Node registered, and one made with a token
// of clusterctl's not issued in this run stay pending and are reported; one made with kubeadm's token is
// left to the controller-manager, unreported.
func TestApproverClientRequests(t *testing.T) {
	ctx := context.Background()
	nodes := map[string]Node{"w1": {Name: "w1"}, "w2": {Name: "w2"}, "cp1": {Name: "cp1"}}
	mk := func(name, user, group, node string) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Username: user, Groups: []string{"system:bootstrappers", group},
			Usages:  []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
			Request: request(t, "system:node:"+node, []string{"system:nodes"}, nil, nil, nil)}}
	}
	const ours, kubeadms = "system:bootstrappers:clusterctl", "system:bootstrappers:kubeadm:default-node-token"
	kube := fake.NewClientset(
		mk("a-w1", "system:bootstrap:aaaaaa", ours, "w1"),
		mk("b-as-cp1", "system:bootstrap:bbbbbb", ours, "cp1"),
		mk("b-as-w1", "system:bootstrap:bbbbbb", ours, "w1"),
		mk("c-registered", "system:bootstrap:cccccc", ours, "w3"),
		mk("stale", "system:bootstrap:zzzzzz", ours, "w2"),
		mk("kubeadm", "system:bootstrap:kkkkkk", kubeadms, "w2"),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w3"}},
	)
	var said []string
	a := &Approver{Kube: kube, Nodes: nodes, Joining: map[string]string{"aaaaaa": "w1", "bbbbbb": "w2", "cccccc": "w3"},
		Say: func(f string, args ...any) { said = append(said, fmt.Sprintf(f, args...)) }}
	if _, err := a.Round(ctx); err != nil {
		t.Fatal(err)
	}
	// A second request with w1's token, after the first was approved.
	if _, err := kube.CertificatesV1().CertificateSigningRequests().Create(ctx, mk("a-again", "system:bootstrap:aaaaaa", ours, "w1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Round(ctx); err != nil {
		t.Fatal(err)
	}
	for name, pending := range map[string]bool{"a-w1": false, "b-as-cp1": true, "b-as-w1": true, "c-registered": true, "stale": true, "kubeadm": true, "a-again": true} {
		r, _ := kube.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if Pending(r) != pending {
			t.Errorf("%s: pending %v, want %v", name, Pending(r), pending)
		}
	}
	un := a.Unapproved()
	for _, name := range []string{"b-as-cp1", "b-as-w1", "c-registered", "stale", "a-again"} {
		if un[name] == "" {
			t.Errorf("%s left pending without a word: %v", name, un)
		}
	}
	if un["kubeadm"] != "" {
		t.Errorf("kubeadm's request reported: %s", un["kubeadm"])
	}
	if len(said) != 6 { // one approval, five refusals
		t.Errorf("said %q", said)
	}
}
