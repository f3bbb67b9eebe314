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
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/clusterctl/clusterctl/inventory"
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

// fleet is a cluster of a control-plane node, two workers and an etcd host, behind a load balancer.
func fleet(learned map[string]string) (map[string]Node, Reserved) {
	inv := &inventory.Inventory{Hosts: []inventory.Host{
		{Name: "cp1", NodeName: "cp1", Address: "10.0.0.1", Roles: []inventory.Role{inventory.RoleControlPlane}},
		{Name: "w1", NodeName: "w1", Address: "10.0.0.11", Roles: []inventory.Role{inventory.RoleWorker}},
		{Name: "w2", NodeName: "w2", Address: "10.0.0.12", Roles: []inventory.Role{inventory.RoleWorker}},
		{Name: "etcd1", NodeName: "etcd1", Address: "10.0.0.21", Roles: []inventory.Role{inventory.RoleEtcd}},
	}}
	inv.Cluster.ControlPlaneEndpoint = "api.example.com:6443"
	inv.Cluster.APIServer.CertSANs = []string{"10.0.0.100", "k8s.example.com"}
	inv.Cluster.Networking.ServiceSubnet = "10.96.0.0/12"
	inv.Cluster.Networking.DNSDomain = "cluster.local"
	return Fleet(inv, parsed(learned), nil)
}

func TestCheckServing(t *testing.T) {
	nodes, reserved := fleet(map[string]string{"w1": "10.0.0.11"})
	if _, ok := nodes["etcd1"]; ok {
		t.Error("an etcd host is no node: it has no kubelet")
	}
	serving := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	good := func() *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeletServingSignerName, Username: "system:node:w1",
			Groups: []string{"system:nodes", "system:authenticated"}, Usages: serving,
			Request: request(t, "system:node:w1", []string{"system:nodes"}, []string{"w1"}, []string{"10.0.0.11"}, nil),
		}}
	}
	if why := CheckServing(good(), nodes, reserved); why != "" {
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
		{"the control-plane node's address", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = request(t, "system:node:w1", []string{"system:nodes"}, []string{"w1"}, []string{"10.0.0.1"}, nil)
		}},
		{"an etcd host's address", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = request(t, "system:node:w1", []string{"system:nodes"}, []string{"w1"}, []string{"10.0.0.21"}, nil)
		}},
		{"the control-plane endpoint", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = request(t, "system:node:w1", []string{"system:nodes"}, []string{"w1", "api.example.com"}, nil, nil)
		}},
		{"an API server SAN", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = request(t, "system:node:w1", []string{"system:nodes"}, []string{"w1"}, []string{"10.0.0.100"}, nil)
		}},
		{"the kubernetes Service address", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = request(t, "system:node:w1", []string{"system:nodes"}, []string{"w1"}, []string{"10.96.0.1"}, nil)
		}},
		{"the kubernetes Service name", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = request(t, "system:node:w1", []string{"system:nodes"}, []string{"w1", "kubernetes.default.svc.cluster.local"}, nil, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good()
			tc.mutate(r)
			if why := CheckServing(r, nodes, reserved); why == "" {
				t.Errorf("approved")
			} else {
				t.Log(why)
			}
		})
	}
	// A learned node address that is another host's (w1's learned address is cp1's) stays cp1's.
	nodes, reserved = fleet(map[string]string{"w1": "10.0.0.1"})
	r := good()
	r.Spec.Request = request(t, "system:node:w1", []string{"system:nodes"}, []string{"w1"}, []string{"10.0.0.1"}, nil)
	if why := CheckServing(r, nodes, reserved); !strings.Contains(why, "host cp1's") {
		t.Errorf("w1 claiming cp1's address as its learned one: %q", why)
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

// A joining kubelet's client request is approved only with the token issued to its host, for that host's
// Node, naming nothing else, for client auth only.
func TestCheckClient(t *testing.T) {
	joining := map[string]string{"abcdef": "w1", "ghijkl": "w2"}
	client := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	mk := func(user string, groups []string, usages []certificatesv1.KeyUsage, req []byte) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Username: user, Groups: groups, Usages: usages, Request: req}}
	}
	boot := []string{"system:bootstrappers", "system:bootstrappers:clusterctl", "system:authenticated"}
	good := request(t, "system:node:w1", []string{"system:nodes"}, nil, nil, nil)
	if why := CheckClient(mk("system:bootstrap:abcdef", boot, client, good), joining); why != "" {
		t.Errorf("a good request refused: %s", why)
	}
	for name, r := range map[string]*certificatesv1.CertificateSigningRequest{
		"another token":           mk("system:bootstrap:zzzzzz", boot, client, good),
		"not a bootstrapper":      mk("system:bootstrap:abcdef", []string{"system:authenticated"}, client, good),
		"server usage":            mk("system:bootstrap:abcdef", boot, append(client, certificatesv1.UsageServerAuth), good),
		"foreign node":            mk("system:bootstrap:abcdef", boot, client, request(t, "system:node:bank", []string{"system:nodes"}, nil, nil, nil)),
		"another joining node":    mk("system:bootstrap:abcdef", boot, client, request(t, "system:node:w2", []string{"system:nodes"}, nil, nil, nil)),
		"a control-plane node":    mk("system:bootstrap:abcdef", boot, client, request(t, "system:node:cp1", []string{"system:nodes"}, nil, nil, nil)),
		"masters group":           mk("system:bootstrap:abcdef", boot, client, request(t, "system:node:w1", []string{"system:masters"}, nil, nil, nil)),
		"with a SAN":              mk("system:bootstrap:abcdef", boot, client, request(t, "system:node:w1", []string{"system:nodes"}, []string{"w1"}, nil, nil)),
		"not a node":              mk("system:bootstrap:abcdef", boot, client, request(t, "admin", []string{"system:nodes"}, nil, nil, nil)),
		"no token of this run":    mk("system:bootstrap:", boot, client, good),
		"a node, not a bootstrap": mk("system:node:w1", []string{"system:nodes"}, client, good),
	} {
		if why := CheckClient(r, joining); why == "" {
			t.Errorf("%s: approved", name)
		}
	}
	if why := CheckClient(mk("system:bootstrap:abcdef", boot, client, good), nil); why == "" {
		t.Error("approved with no host joining")
	}
	serving := mk("system:bootstrap:abcdef", boot, client, good)
	serving.Spec.SignerName = certificatesv1.KubeletServingSignerName
	if why := CheckClient(serving, joining); why == "" {
		t.Error("a serving signer's request approved as a client one")
	}
}
