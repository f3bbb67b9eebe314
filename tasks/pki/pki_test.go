package pki

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	cluster = Cluster{DNSDomain: "cluster.local", ServiceSubnet: "10.96.0.0/12", EndpointHost: "api.example.com", CertSANs: []string{"203.0.113.7", "lb.example.com"}}
	nodes   = []Node{{Name: "cp1", IP: net.ParseIP("10.0.0.11")}, {Name: "cp2", IP: net.ParseIP("10.0.0.12")}}
	clock   = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
)

func newStore(t testing.TB, alg Algorithm) *Store {
	return &Store{Dir: filepath.Join(t.TempDir(), "pki"), Issuer: &Issuer{Now: func() time.Time { return clock }, Algorithm: alg,
		Validity: 365 * 24 * time.Hour, CAValidity: 10 * 365 * 24 * time.Hour}}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseCert(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCertificatesAreWhatKubeadmMakes(t *testing.T) {
	st := newStore(t, "RSA-2048")
	if _, _, err := st.Ensure(cluster, nodes); err != nil {
		t.Fatal(err)
	}
	ca := readCert(t, filepath.Join(st.Dir, "ca.crt"))
	etcdCA := readCert(t, filepath.Join(st.Dir, "etcd/ca.crt"))
	fpCA := readCert(t, filepath.Join(st.Dir, "front-proxy-ca.crt"))
	for _, c := range []*x509.Certificate{ca, etcdCA, fpCA} {
		if !c.IsCA || c.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment|x509.KeyUsageCertSign ||
			!c.NotBefore.Equal(clock.Add(-Backdate)) || !c.NotAfter.Equal(clock.Add(-Backdate).Add(10*365*24*time.Hour)) ||
			len(c.SubjectKeyId) == 0 || c.CheckSignatureFrom(c) != nil {
			t.Errorf("CA %s: %+v", c.Subject.CommonName, c)
		}
	}
	if ca.Subject.CommonName != "kubernetes" || etcdCA.Subject.CommonName != "etcd-ca" || fpCA.Subject.CommonName != "front-proxy-ca" {
		t.Errorf("CA names: %s %s %s", ca.Subject.CommonName, etcdCA.Subject.CommonName, fpCA.Subject.CommonName)
	}
	server := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, tc := range []struct {
		path, cn string
		org      []string
		issuer   *x509.Certificate
		usages   []x509.ExtKeyUsage
		dns      []string
		ips      []string
	}{
		{"nodes/cp1/apiserver", "kube-apiserver", nil, ca, server,
			[]string{"cp1", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "api.example.com", "lb.example.com"},
			[]string{"10.96.0.1", "10.0.0.11", "203.0.113.7"}},
		{"nodes/cp2/apiserver", "kube-apiserver", nil, ca, server,
			[]string{"cp2", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "api.example.com", "lb.example.com"},
			[]string{"10.96.0.1", "10.0.0.12", "203.0.113.7"}},
		{"nodes/cp1/apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"kubeadm:cluster-admins"}, ca, client, nil, nil},
		{"nodes/cp1/front-proxy-client", "front-proxy-client", nil, fpCA, client, nil, nil},
		{"nodes/cp1/etcd/server", "cp1", nil, etcdCA, both, []string{"cp1", "localhost"}, []string{"10.0.0.11", "127.0.0.1", "::1"}},
		{"nodes/cp1/etcd/peer", "cp1", nil, etcdCA, both, []string{"cp1", "localhost"}, []string{"10.0.0.11", "127.0.0.1", "::1"}},
		{"nodes/cp1/etcd/healthcheck-client", "kube-etcd-healthcheck-client", nil, etcdCA, client, nil, nil},
		{"nodes/cp1/apiserver-etcd-client", "kube-apiserver-etcd-client", nil, etcdCA, client, nil, nil},
	} {
		t.Run(tc.path, func(t *testing.T) {
			c := readCert(t, filepath.Join(st.Dir, tc.path+".crt"))
			var ips []string
			for _, ip := range c.IPAddresses {
				ips = append(ips, ip.String())
			}
			if c.Subject.CommonName != tc.cn || !slices.Equal(c.Subject.Organization, tc.org) || !slices.Equal(c.ExtKeyUsage, tc.usages) ||
				!slices.Equal(c.DNSNames, tc.dns) || !slices.Equal(ips, tc.ips) {
				t.Errorf("got CN %q O %v usages %v DNS %v IPs %v", c.Subject.CommonName, c.Subject.Organization, c.ExtKeyUsage, c.DNSNames, ips)
			}
			if c.IsCA || c.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment {
				t.Errorf("key usage %v, CA %v", c.KeyUsage, c.IsCA)
			}
			if !c.NotBefore.Equal(clock.Add(-Backdate)) || !c.NotAfter.Equal(clock.Add(-Backdate).Add(365*24*time.Hour)) {
				t.Errorf("validity %s to %s", c.NotBefore, c.NotAfter)
			}
			if string(c.AuthorityKeyId) != string(tc.issuer.SubjectKeyId) || len(c.SubjectKeyId) == 0 {
				t.Error("SKI/AKI not set")
			}
			pool := x509.NewCertPool()
			pool.AddCert(tc.issuer)
			if _, err := c.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: clock, KeyUsages: tc.usages}); err != nil {
				t.Errorf("chain: %v", err)
			}
			if c.SerialNumber.Sign() <= 0 {
				t.Error("serial not positive")
			}
		})
	}
	// Permissions: keys 0600, the directory 0700.
	filepath.WalkDir(st.Dir, func(p string, d os.DirEntry, err error) error {
		info, _ := d.Info()
		switch {
		case d.IsDir() && info.Mode().Perm() != 0o700:
			t.Errorf("%s: mode %v", p, info.Mode().Perm())
		case strings.HasSuffix(p, ".key") && info.Mode().Perm() != 0o600:
			t.Errorf("%s: mode %v", p, info.Mode().Perm())
		}
		return nil
	})
}

func TestKeyAlgorithms(t *testing.T) {
	for _, alg := range []Algorithm{"RSA-2048", "RSA-3072", "ECDSA-P256"} {
		st := newStore(t, alg)
		p, _, err := st.Ensure(cluster, nodes[:1])
		if err != nil {
			t.Fatal(err)
		}
		kp := p.Nodes["cp1"]["apiserver"]
		switch k := kp.Cert.PublicKey.(type) {
		case *rsa.PublicKey:
			if string(alg) != fmt.Sprintf("RSA-%d", k.N.BitLen()) {
				t.Errorf("%s: RSA-%d", alg, k.N.BitLen())
			}
		case *ecdsa.PublicKey:
			if alg != "ECDSA-P256" {
				t.Errorf("%s: ECDSA", alg)
			}
		}
		if !matches(p.SA, alg) {
			t.Errorf("%s: service-account key of another algorithm", alg)
		}
	}
}

func TestEnsureKeepsReissuesAndReports(t *testing.T) {
	st := newStore(t, "ECDSA-P256")
	_, changes, err := st.Ensure(cluster, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != len(CAs())+1+2*7 {
		t.Errorf("%d changes on a fresh directory: %v", len(changes), changes)
	}
	before, _ := os.ReadFile(filepath.Join(st.Dir, "nodes/cp1/apiserver.crt"))
	// A second run keeps everything.
	if _, changes, err = st.Ensure(cluster, nodes); err != nil || len(changes) != 0 {
		t.Fatalf("second run: %v %v", changes, err)
	}
	// A new SAN reissues the API server certificates only, keeping their keys.
	c2 := cluster
	c2.CertSANs = append(c2.CertSANs, "new.example.com")
	keyBefore, _ := os.ReadFile(filepath.Join(st.Dir, "nodes/cp1/apiserver.key"))
	_, changes, err = st.Ensure(c2, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 2 || changes[0].What != "nodes/cp1/apiserver" || changes[0].Action != "reissued" || !strings.Contains(changes[0].Reason, "DNS names") {
		t.Errorf("after a new SAN: %+v", changes)
	}
	after, _ := os.ReadFile(filepath.Join(st.Dir, "nodes/cp1/apiserver.crt"))
	keyAfter, _ := os.ReadFile(filepath.Join(st.Dir, "nodes/cp1/apiserver.key"))
	if string(before) == string(after) || string(keyBefore) != string(keyAfter) {
		t.Error("certificate not reissued, or its key changed")
	}
	// A new control-plane node gets its certificates; the others are untouched.
	_, changes, err = st.Ensure(c2, append(nodes, Node{Name: "cp3", IP: net.ParseIP("10.0.0.13")}))
	if err != nil || len(changes) != 7 {
		t.Errorf("new node: %v %v", changes, err)
	}
}

func TestBringYourOwnAndExternalCA(t *testing.T) {
	// Bring your own CA: ca.crt and ca.key placed in the directory are used.
	own := newStore(t, "RSA-2048")
	ca, err := own.Issuer.NewCA(CAs()[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := own.write("ca", ca); err != nil {
		t.Fatal(err)
	}
	p, _, err := own.Ensure(cluster, nodes[:1])
	if err != nil {
		t.Fatal(err)
	}
	if p.Nodes["cp1"]["apiserver"].Cert.CheckSignatureFrom(ca.Cert) != nil {
		t.Error("leaf not signed by the user's CA")
	}

	// External CA: the key removed; complete leaves verify, missing or wrong ones are listed.
	os.Remove(filepath.Join(own.Dir, "ca.key"))
	if _, _, err := own.Ensure(cluster, nodes[:1]); err != nil {
		t.Fatalf("complete external-CA directory: %v", err)
	}
	os.Remove(filepath.Join(own.Dir, "nodes/cp1/apiserver-kubelet-client.crt"))
	c2 := cluster
	c2.CertSANs = []string{"other.example.com"}
	_, _, err = own.Ensure(c2, nodes[:1])
	if err == nil || !strings.Contains(err.Error(), "external CA mode") ||
		!strings.Contains(err.Error(), "nodes/cp1/apiserver.crt: DNS names") ||
		!strings.Contains(err.Error(), "apiserver-kubelet-client") {
		t.Errorf("external CA with problems: %v", err)
	}
}

func TestLoosePermissionsAreRefused(t *testing.T) {
	st := newStore(t, "ECDSA-P256")
	if _, _, err := st.Ensure(cluster, nodes[:1]); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(st.Dir, "ca.key"), 0o644)
	if _, _, err := st.Ensure(cluster, nodes[:1]); err == nil || !strings.Contains(err.Error(), "holds a private key others can read") {
		t.Errorf("world-readable CA key: %v", err)
	}
	os.Chmod(filepath.Join(st.Dir, "ca.key"), 0o600)
	os.Chmod(st.Dir, 0o755)
	if _, _, err := st.Ensure(cluster, nodes[:1]); err == nil || !strings.Contains(err.Error(), "must not be accessible") {
		t.Errorf("open directory: %v", err)
	}
}

func TestCAHashMatchesOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	for _, alg := range []Algorithm{"RSA-2048", "ECDSA-P256"} {
		st := newStore(t, alg)
		p, _, err := st.Ensure(cluster, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The pipeline of the kubeadm reference guide, with -pubkey's DER through pkey (any key type).
		cmd := exec.Command("sh", "-c", "openssl x509 -pubkey -in "+filepath.Join(st.Dir, "ca.crt")+
			" -noout | openssl pkey -pubin -outform der 2>/dev/null | openssl dgst -sha256 -hex | sed 's/^.* //'")
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if want := "sha256:" + strings.TrimSpace(string(out)); CAHash(p.CAs["ca"].Cert) != want {
			t.Errorf("%s: CAHash %s, openssl %s", alg, CAHash(p.CAs["ca"].Cert), want)
		}
	}
}

// BenchmarkPKI generates the PKI of three control-plane nodes (3 CAs, the service-account key, 21 leaves).
func BenchmarkPKI(b *testing.B) {
	three := append(slices.Clone(nodes), Node{Name: "cp3", IP: net.ParseIP("10.0.0.13")})
	for _, alg := range []Algorithm{"RSA-2048", "RSA-3072", "RSA-4096", "ECDSA-P256"} {
		b.Run(string(alg), func(b *testing.B) {
			for b.Loop() {
				st := newStore(b, alg)
				if _, _, err := st.Ensure(cluster, three); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The node-independent client certificates are one pair shared by the control-plane nodes; a node added
// later gets the same pair; the certificates that name a node differ.
func TestSharedClientCertificates(t *testing.T) {
	st := newStore(t, "ECDSA-P256")
	p, _, err := st.Ensure(cluster, nodes[:1])
	if err != nil {
		t.Fatal(err)
	}
	p2, _, err := st.Ensure(cluster, nodes)
	if err != nil {
		t.Fatal(err)
	}
	a, b := nodes[0].Name, nodes[1].Name
	for _, s := range p2.Specs[a] {
		same := p2.Nodes[a][s.Name].Cert.SerialNumber.Cmp(p2.Nodes[b][s.Name].Cert.SerialNumber) == 0
		if same == s.PerNode {
			t.Errorf("%s: shared=%v, want shared=%v", s.Name, same, !s.PerNode)
		}
		if !s.PerNode && p.Nodes[a][s.Name].Cert.SerialNumber.Cmp(p2.Nodes[b][s.Name].Cert.SerialNumber) != 0 {
			t.Errorf("%s: the node added later did not get the existing pair", s.Name)
		}
	}
}

func TestLeavesByKind(t *testing.T) {
	names := func(k NodeKind) string {
		specs, err := Leaves(cluster, Node{Name: "n1", IP: net.ParseIP("10.0.0.1"), Kind: k})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range specs {
			out = append(out, s.Name)
		}
		return strings.Join(out, " ")
	}
	for _, c := range []struct {
		kind NodeKind
		want string
	}{
		{ControlPlaneAndEtcd, "apiserver apiserver-kubelet-client front-proxy-client etcd-server etcd-peer etcd-healthcheck-client apiserver-etcd-client"},
		{ControlPlaneOnly, "apiserver apiserver-kubelet-client front-proxy-client apiserver-etcd-client"},
		{EtcdOnly, "etcd-server etcd-peer etcd-healthcheck-client"},
	} {
		if got := names(c.kind); got != c.want {
			t.Errorf("kind %d: leaves %q, want %q", c.kind, got, c.want)
		}
	}
}
