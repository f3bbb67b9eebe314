package hardening

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
)

func TestAuthenticationConfig(t *testing.T) {
	o := &inventory.OIDC{IssuerURL: "https://login.example.com/realms/prod", ClientID: "kubernetes", UsernameClaim: "email",
		UsernamePrefix: "-", GroupsClaim: "groups", GroupsPrefix: "oidc:"}
	data, err := AuthenticationConfig(o, []byte("PEM"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg apiserverv1.AuthenticationConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	j := cfg.JWT[0]
	if cfg.Kind != "AuthenticationConfiguration" || j.Issuer.URL != o.IssuerURL || j.Issuer.Audiences[0] != "kubernetes" || j.Issuer.CertificateAuthority != "PEM" ||
		j.ClaimMappings.Username.Claim != "email" || *j.ClaimMappings.Username.Prefix != "" || j.ClaimMappings.Groups.Claim != "groups" || *j.ClaimMappings.Groups.Prefix != "oidc:" {
		t.Errorf("authentication configuration:\n%s", data)
	}
	// Without a groups claim there is no groups mapping (the API server refuses a prefix without a claim).
	o.GroupsClaim = ""
	if data, _ = AuthenticationConfig(o, nil); strings.Contains(string(data), "claim: groups") || strings.Contains(string(data), "oidc:") {
		t.Errorf("groups without a claim:\n%s", data)
	}
	var flags []string
	for _, a := range APIServerArgs(&inventory.Cluster{APIServer: inventory.APIServer{OIDC: o}}) {
		flags = append(flags, a.Name+"="+a.Value)
	}
	if !strings.Contains(strings.Join(flags, " "), "authentication-config="+kubeadm.AuthenticationConfig) {
		t.Errorf("flags %v", flags)
	}
}

func TestCheckCA(t *testing.T) {
	cert := func(isCA bool) []byte {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
			IsCA: isCA, BasicConstraintsValid: true}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	if err := CheckCA("ca.crt", cert(true)); err != nil {
		t.Error(err)
	}
	for name, data := range map[string][]byte{
		"no PEM certificate":      []byte("hello"),
		"is not a CA certificate": cert(false),
		"only CERTIFICATE blocks": append(cert(true), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})...),
	} {
		if err := CheckCA("ca.crt", data); err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "cluster.apiServer.oidc.caFile: ca.crt") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
