package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/test/lab"
	"github.com/clusterctl/clusterctl/test/lab/mirror"
)

// TestPrivateRegistry brings up one control-plane node and one worker from bare Debian 13 hosts (the other
// tests' are Debian 12) that pull every image from a private registry over TLS (a registry on the lab's
// bridge, its certificate signed by a CA only the inventory names): containerd is configured for it,
// nothing is imported from the artifacts. The API servers sign users in with an OpenID Connect issuer
// served beside the registry. The cluster follows profile cis (with AlwaysPullImages: its nodes pull), and
// kube-bench checks it.
func TestPrivateRegistry(t *testing.T) {
	c := NewBareCluster(t, lab.Options{Hosts: 2, ControlPlanes: 1, Release: "trixie"}, "")
	if out := c.Lab.Run(t, "w1", ". /etc/os-release; echo $VERSION_ID"); strings.TrimSpace(out) != "13" {
		t.Fatalf("w1 runs Debian %s, want 13", out)
	}
	bridge := net.ParseIP(c.Lab.Hosts[0].Address).To4()
	if bridge == nil {
		t.Fatalf("lab address %s", c.Lab.Hosts[0].Address)
	}
	bridge[3] = 1
	caPEM, cert, pool := registryCA(t, bridge)
	labDir, _ := lab.Artifacts(t)
	reg, err := mirror.StartRegistry(context.Background(), labDir, bridge.String(), cert, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	caFile := filepath.Join(c.Lab.Dir, "registry-ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	// An OpenID Connect issuer beside the registry, its certificate of the same CA.
	issuer := startIssuer(t, bridge.String(), cert)
	c.AddSettings(t, fmt.Sprintf("  imageRepository: %s\n  registry:\n    pull: true\n    ca: registry-ca.crt\n  security:\n    profile: cis\n", reg.Repository)+oidcSettings(issuer, "registry-ca.crt"))
	// The kubelets protect the kernel's defaults: the lab's hosts share this machine's kernel and cannot set
	// them (preflight says so when they differ).
	lab.KernelDefaults(t)
	c.Up(t)

	t.Run("profile cis: every automated check of the CIS Kubernetes Benchmark passes on the control-plane node and the worker", func(t *testing.T) {
		checkCIS(t, c, "cp1", "w1")
	})

	t.Run("OIDC: a token of the inventory's issuer signs in as its user and groups, with prefixes; others are refused", func(t *testing.T) {
		checkOIDC(t, c, issuer)
	})

	t.Run("every image came from the registry; none was imported", func(t *testing.T) {
		for host, images := range map[string][]string{"cp1": {"kube-apiserver", "etcd", "pause"}, "w1": {"kube-proxy", "pause"}} {
			out := c.Lab.Run(t, host, "crictl images | awk 'NR>1{print $1}'; ls /var/lib/clusterctl/images 2>&1 | head -1")
			for _, img := range images {
				if !strings.Contains(out, reg.Repository+"/"+img+"\n") {
					t.Errorf("%s has no %s from %s:\n%s", host, img, reg.Repository, out)
				}
			}
			if !strings.Contains(out, "No such file") {
				t.Errorf("%s has image archives pushed:\n%s", host, out)
			}
		}
	})

	t.Run("reset removes the etcd user and group up made", func(t *testing.T) {
		if _, stderr, code := c.Run(t, "reset", "--yes"); code != 0 {
			t.Fatalf("reset: exit %d\n%s", code, tail(stderr, 20))
		}
		if out := c.Lab.Run(t, "cp1", "getent passwd etcd; getent group etcd; ls -d /etc/kubernetes/etcd-keys /var/lib/etcd 2>/dev/null; true"); out != "" {
			t.Errorf("cp1 after reset:\n%s", out)
		}
	})
}

// registryCA makes a CA and a serving certificate for ip signed by it.
func registryCA(t *testing.T, ip net.IP) ([]byte, tls.Certificate, *x509.CertPool) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e registry CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip.String()}, IPAddresses: []net.IP{ip},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}
