package csr

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/url"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
)

func request(t *testing.T, cn string, orgs []string, dns []string, ips []string, mutate func(*x509.CertificateRequest)) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: orgs}, DNSNames: dns}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	if mutate != nil {
		mutate(tmpl)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestCheckServing(t *testing.T) {
	nodes := map[string]Node{
		"w1": {Name: "w1", DNSNames: []string{"w1"}, Addresses: []string{"10.0.0.11"}},
		"w2": {Name: "w2", DNSNames: []string{"w2"}, Addresses: []string{"10.0.0.12"}},
	}
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	good := func() *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeletServingSignerName, Username: "system:node:w1",
			Groups: []string{"system:nodes", "system:authenticated"}, Usages: serving,
			Request: request(t, "system:node:w1", []string{"system:nodes"}, []string{"w1"}, []string{"10.0.0.11"}, nil),
		}}
	}
	if why := CheckServing(good(), nodes); why != "" {
		t.Fatalf("a good request was refused: %s", why)
	}
	for _, tc := range []struct {
		name   string
		mutate func(r *certificatesv1.CertificateSigningRequest)
	}{
		{"other signer", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.SignerName = certificatesv1.KubeAPIServerClientKubeletSignerName
		}},
		{"not a node", func(r *certificatesv1.CertificateSigningRequest) { r.Spec.Username = "alice" }},
		{"unknown node", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Username = "system:node:w9"
			r.Spec.Request = request(t, "system:node:w9", []string{"system:nodes"}, []string{"w9"}, nil, nil)
		}},
		{"not in system:nodes", func(r *certificatesv1.CertificateSigningRequest) { r.Spec.Groups = []string{"system:authenticated"} }},
		{"client usage", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Usages = append(r.Spec.Usages, certificatesv1.UsageClientAuth)
		}},
		{"no server auth", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature}
		}},
		{"another node's address", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = request(t, "system:node:w1", []string{"system:nodes"}, []string{"w1"}, []string{"10.0.0.12"}, nil)
		}},
		{"foreign address", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = request(t, "system:node:w1", []string{"system:nodes"}, []string{"w1"}, []string{"10.0.0.11", "192.0.2.1"}, nil)
		}},
		{"another node's name", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = request(t, "system:node:w1", []string{"system:nodes"}, []string{"w1", "w2"}, nil, nil)
		}},
		{"wildcard name", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = request(t, "system:node:w1", []string{"system:nodes"}, []string{"*.example.com"}, nil, nil)
		}},
		{"subject of another node", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = request(t, "system:node:w2", []string{"system:nodes"}, []string{"w1"}, nil, nil)
		}},
		{"extra organization", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = request(t, "system:node:w1", []string{"system:nodes", "system:masters"}, []string{"w1"}, nil, nil)
		}},
		{"URI SAN", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = request(t, "system:node:w1", []string{"system:nodes"}, []string{"w1"}, nil, func(c *x509.CertificateRequest) {
				c.URIs = []*url.URL{{Scheme: "spiffe", Host: "example.com"}}
			})
		}},
		{"no SAN", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = request(t, "system:node:w1", []string{"system:nodes"}, nil, nil, nil)
		}},
		{"garbage", func(r *certificatesv1.CertificateSigningRequest) { r.Spec.Request = []byte("nope") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good()
			tc.mutate(r)
			if why := CheckServing(r, nodes); why == "" {
				t.Errorf("approved")
			} else {
				t.Log(why)
			}
		})
	}
}

func TestPending(t *testing.T) {
	r := &certificatesv1.CertificateSigningRequest{}
	if !Pending(r) {
		t.Error("a request with no condition is pending")
	}
	r.Status.Conditions = append(r.Status.Conditions, Approved("test"))
	if Pending(r) {
		t.Error("an approved request is pending")
	}
}

// Only a kubelet request approved and neither issued nor failed awaits the controller-manager's signature.
func TestAwaitingSignature(t *testing.T) {
	req := func(name, signer string, cert []byte, conds ...certificatesv1.RequestConditionType) certificatesv1.CertificateSigningRequest {
		r := certificatesv1.CertificateSigningRequest{}
		r.Name, r.Spec.SignerName, r.Status.Certificate = name, signer, cert
		for _, c := range conds {
			r.Status.Conditions = append(r.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: c})
		}
		return r
	}
	const serving, client = certificatesv1.KubeletServingSignerName, certificatesv1.KubeAPIServerClientKubeletSignerName
	approved := certificatesv1.CertificateApproved
	for _, tc := range []struct {
		name string
		reqs []certificatesv1.CertificateSigningRequest
		want string
	}{
		{"none", nil, ""},
		{"pending", []certificatesv1.CertificateSigningRequest{req("a", serving, nil)}, ""},
		{"issued", []certificatesv1.CertificateSigningRequest{req("a", serving, []byte("x"), approved)}, ""},
		{"approved serving", []certificatesv1.CertificateSigningRequest{req("a", client, []byte("x"), approved), req("b", serving, nil, approved)}, "b"},
		{"approved client", []certificatesv1.CertificateSigningRequest{req("c", client, nil, approved)}, "c"},
		{"failed", []certificatesv1.CertificateSigningRequest{req("a", serving, nil, approved, certificatesv1.CertificateFailed)}, ""},
		{"another signer", []certificatesv1.CertificateSigningRequest{req("a", "example.com/signer", nil, approved)}, ""},
	} {
		if got := AwaitingSignature(tc.reqs); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A joining kubelet's client request is approved only with this run's token, for an inventory node,
// naming nothing else, for client auth only.
func TestCheckClient(t *testing.T) {
	nodes := map[string]Node{"w1": {Name: "w1"}}
	client := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	mk := func(user string, groups []string, usages []certificatesv1.KeyUsage, req []byte) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Username: user, Groups: groups, Usages: usages, Request: req}}
	}
	boot := []string{"system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token", "system:authenticated"}
	good := request(t, "system:node:w1", []string{"system:nodes"}, nil, nil, nil)
	if why := CheckClient(mk("system:bootstrap:abcdef", boot, client, good), "abcdef", nodes); why != "" {
		t.Errorf("a good request refused: %s", why)
	}
	for name, r := range map[string]*certificatesv1.CertificateSigningRequest{
		"another token":      mk("system:bootstrap:zzzzzz", boot, client, good),
		"not a bootstrapper": mk("system:bootstrap:abcdef", []string{"system:authenticated"}, client, good),
		"server usage":       mk("system:bootstrap:abcdef", boot, append(client, certificatesv1.UsageServerAuth), good),
		"foreign node":       mk("system:bootstrap:abcdef", boot, client, request(t, "system:node:bank", []string{"system:nodes"}, nil, nil, nil)),
		"masters group":      mk("system:bootstrap:abcdef", boot, client, request(t, "system:node:w1", []string{"system:masters"}, nil, nil, nil)),
		"with a SAN":         mk("system:bootstrap:abcdef", boot, client, request(t, "system:node:w1", []string{"system:nodes"}, []string{"w1"}, nil, nil)),
		"not a node":         mk("system:bootstrap:abcdef", boot, client, request(t, "admin", []string{"system:nodes"}, nil, nil, nil)),
	} {
		if why := CheckClient(r, "abcdef", nodes); why == "" {
			t.Errorf("%s: approved", name)
		}
	}
	if why := CheckClient(mk("system:bootstrap:", boot, client, good), "", nodes); why == "" {
		t.Error("approved without a token of this run")
	}
	serving := mk("system:bootstrap:abcdef", boot, client, good)
	serving.Spec.SignerName = certificatesv1.KubeletServingSignerName
	if why := CheckClient(serving, "abcdef", nodes); why == "" {
		t.Error("a serving signer's request approved as a client one")
	}
}
