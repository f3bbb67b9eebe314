package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func selfSigned(t *testing.T, cn string, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: notAfter.Add(-time.Hour), NotAfter: notAfter}, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}}, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestParse(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	api := selfSigned(t, "kube-apiserver", now.Add(30*24*time.Hour))
	admin := selfSigned(t, "kubernetes-admin", now.Add(365*24*time.Hour))
	out := "== /etc/kubernetes/pki/apiserver.crt\n" + string(api) +
		"== /etc/kubernetes/admin.conf\n    client-certificate-data: " + base64.StdEncoding.EncodeToString(admin) + "\n" +
		"== /etc/kubernetes/kubelet.conf\n    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n"
	certs, err := Parse("cp1", []byte(out), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(certs) != 3 {
		t.Fatalf("got %d certificates: %+v", len(certs), certs)
	}
	byPath := map[string]Cert{}
	for _, c := range certs {
		byPath[c.Path] = c
	}
	if c := byPath["/etc/kubernetes/pki/apiserver.crt"]; c.Subject != "kube-apiserver" || Residual(c.Residual) != "30d" {
		t.Errorf("apiserver: %+v (%s)", c, Residual(c.Residual))
	}
	if c := byPath["/etc/kubernetes/admin.conf"]; c.Subject != "kubernetes-admin" || Residual(c.Residual) != "365d" {
		t.Errorf("admin.conf: %+v", c)
	}
	if c := byPath["/etc/kubernetes/kubelet.conf"]; c.Reference != "/var/lib/kubelet/pki/kubelet-client-current.pem" || c.Cert != nil {
		t.Errorf("kubelet.conf: %+v", c)
	}
	if _, err := Parse("cp1", []byte("== /etc/kubernetes/pki/x.crt\nnot pem\n"), now); err == nil || !strings.Contains(err.Error(), "x.crt") {
		t.Errorf("garbage: %v", err)
	}
	for d, want := range map[time.Duration]string{-time.Hour: "expired", 5 * time.Hour: "5h", 3650 * 24 * time.Hour: "10y"} {
		if got := Residual(d); got != want {
			t.Errorf("Residual(%s) = %s, want %s", d, got, want)
		}
	}
}

// A node's certificate is compared with the state directory's copy of the same file: the cluster CA at the
// top of pki/, a node's leaves and kubeconfigs under its own directory; a file the state directory has no
// copy of (a worker's kubelet.conf) is not compared.
func TestCompareWithState(t *testing.T) {
	state := t.TempDir()
	now := time.Now()
	ca, leaf, other := selfSigned(t, "kubernetes", now.Add(time.Hour)), selfSigned(t, "kube-apiserver", now.Add(time.Hour)), selfSigned(t, "x", now.Add(time.Hour))
	for file, data := range map[string][]byte{"pki/ca.crt": ca, "pki/nodes/cp1/apiserver.crt": leaf} {
		p := filepath.Join(state, filepath.FromSlash(file))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	parse := func(path string, data []byte) *Cert {
		list, err := Parse("cp1", []byte("== "+path+"\n"+string(data)), now)
		if err != nil || len(list) != 1 {
			t.Fatalf("%v %v", list, err)
		}
		return &list[0]
	}
	for _, tc := range []struct {
		path string
		data []byte
		want string
	}{
		{"/etc/kubernetes/pki/ca.crt", ca, "match"},
		{"/etc/kubernetes/pki/apiserver.crt", leaf, "match"},
		{"/etc/kubernetes/pki/apiserver.crt", other, "differs"},
		{"/etc/kubernetes/pki/front-proxy-ca.crt", other, ""},
	} {
		if got := CompareWithState(state, "cp1", parse(tc.path, tc.data)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.path, got, tc.want)
		}
	}
}

func TestNotSignedBy(t *testing.T) {
	now := time.Now()
	list, err := Parse("cp1", []byte("== /etc/kubernetes/pki/apiserver.crt\n"+string(selfSigned(t, "kube-apiserver", now.Add(time.Hour)))), now)
	if err != nil {
		t.Fatal(err)
	}
	if got := NotSignedBy(list, nil); len(got) != 1 || got[0] != "cp1:/etc/kubernetes/pki/apiserver.crt" {
		t.Errorf("%v", got)
	}
}

func TestLocal(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	write := func(rel string, data []byte) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("pki/ca.crt", selfSigned(t, "kubernetes", now.Add(10*365*24*time.Hour)))
	write("pki/nodes/cp1/apiserver.crt", selfSigned(t, "kube-apiserver", now.Add(300*24*time.Hour)))
	write("pki/ca.key", []byte("not a certificate"))
	got, err := Local(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Path != "pki/nodes/cp1/apiserver.crt" || got[0].Subject != "kube-apiserver" {
		t.Fatalf("Local: %+v; want the apiserver's first, then the CA", got)
	}
	if _, err := Local(filepath.Join(dir, "missing"), now); err != nil {
		t.Errorf("a state directory without certificates: %v", err)
	}
}
