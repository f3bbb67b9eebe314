// Package pki makes and keeps the cluster's certificates, as kubeadm does, from a table of certificate
// specs: the CAs (kubernetes, front-proxy, etcd), the service-account key pair, and the leaf certificates of
// each control-plane node. Keys and certificates live in the state directory (keys 0600); existing valid
// files are loaded and kept, and a leaf that no longer matches the inventory is reissued and reported.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // RFC 5280 method 1 for subject key identifiers, not a security use
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"
)

// Backdate is how far before now certificates start to be valid, so that hosts whose clock is a little
// behind accept them (kubeadm's CertificateBackdate).
const Backdate = 5 * time.Minute

// The kubeadm names of the organizations used in client certificates.
const (
	// ClusterAdminsGroup is bound to cluster-admin at bootstrap (kubeadm ≥ 1.29); admin.conf and the API
	// server's kubelet client are in it, so that the identity can be revoked, unlike system:masters.
	ClusterAdminsGroup = "kubeadm:cluster-admins"
	SystemMasters      = "system:masters"
	NodesGroup         = "system:nodes"
)

// Algorithm is a key algorithm: RSA-2048, RSA-3072, RSA-4096 or ECDSA-P256.
type Algorithm string

// GenerateKey makes a private key.
func GenerateKey(alg Algorithm) (crypto.Signer, error) {
	switch alg {
	case "RSA-2048", "":
		return rsa.GenerateKey(rand.Reader, 2048)
	case "RSA-3072":
		return rsa.GenerateKey(rand.Reader, 3072)
	case "RSA-4096":
		return rsa.GenerateKey(rand.Reader, 4096)
	case "ECDSA-P256":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	return nil, fmt.Errorf("unknown key algorithm %q", alg)
}

// matches reports whether key is of the algorithm.
func matches(key crypto.Signer, alg Algorithm) bool {
	if key == nil {
		return false
	}
	switch k := key.Public().(type) {
	case *rsa.PublicKey:
		return alg == Algorithm(fmt.Sprintf("RSA-%d", k.N.BitLen())) || alg == "" && k.N.BitLen() == 2048
	case *ecdsa.PublicKey:
		return alg == "ECDSA-P256" && k.Curve == elliptic.P256()
	}
	return false
}

// Spec is one certificate of the table: its place, its CA, and what its subject, SANs and usages are.
type Spec struct {
	// Name is kubeadm's name of the certificate (apiserver, etcd-server, ...).
	Name string
	// Path is the file name under the pki directory, without extension (apiserver, etcd/server).
	Path string
	// CA is the Name of the signing CA; empty for a CA.
	CA           string
	CommonName   string
	Organization []string
	Usages       []x509.ExtKeyUsage
	DNSNames     []string
	IPs          []net.IP
	// PerNode says the certificate differs per control-plane node (its SANs or name).
	PerNode bool
}

// IsCA reports whether the spec is a CA.
func (s *Spec) IsCA() bool { return s.CA == "" }

// Node is a control-plane node or an etcd host as the certificates see it.
type Node struct {
	Name string
	IP   net.IP
	// OtherIPs are a dual-stack node's addresses of its other family: the API server certificate names
	// them too.
	OtherIPs []net.IP
	Kind     NodeKind
}

// NodeKind says what runs on a node, hence which leaves it holds.
type NodeKind int

const (
	// ControlPlaneAndEtcd: a control-plane node with its etcd member (stacked etcd; or external etcd on a
	// control-plane host that is also an etcd host): every leaf.
	ControlPlaneAndEtcd NodeKind = iota
	// ControlPlaneOnly: a control-plane node of a cluster whose etcd runs elsewhere: the API server's
	// leaves and its etcd client certificate, no etcd server or peer certificate.
	ControlPlaneOnly
	// EtcdOnly: an etcd host that is no control-plane node: etcd's server, peer and health-check client
	// certificates only.
	EtcdOnly
)

// has reports whether a node of this kind holds the leaf.
func (k NodeKind) has(leaf string) bool {
	etcdMember := leaf == "etcd-server" || leaf == "etcd-peer" || leaf == "etcd-healthcheck-client"
	switch k {
	case ControlPlaneOnly:
		return !etcdMember
	case EtcdOnly:
		return etcdMember
	}
	return true
}

// Cluster is what the certificate table is computed from.
type Cluster struct {
	DNSDomain     string
	ServiceSubnet string // the first address is the API server's Service IP (of each range, dual-stack)
	// EndpointHost is the control-plane endpoint's host (name or address), or "".
	EndpointHost string
	CertSANs     []string
}

// KubeletServingCA is the name of the CA that signs kubelet serving certificates, and nothing else. kubeadm
// has the controller-manager sign them with the cluster CA, so that a node which obtained a serving
// certificate naming another host's address holds a certificate every client of the API server accepts as
// that host's; with a CA of their own only the API server trusts them (--kubelet-certificate-authority),
// for its connections to kubelets. Its key is on control-plane nodes only, as the other CA keys.
const KubeletServingCA = "kubelet-serving-ca"

// CAs returns the specs of the four CAs, in generation order.
func CAs() []Spec {
	return []Spec{
		{Name: "ca", Path: "ca", CommonName: "kubernetes"},
		{Name: "front-proxy-ca", Path: "front-proxy-ca", CommonName: "front-proxy-ca"},
		{Name: "etcd-ca", Path: "etcd/ca", CommonName: "etcd-ca"},
		{Name: KubeletServingCA, Path: KubeletServingCA, CommonName: KubeletServingCA},
	}
}

// IsCAFile reports whether rel, a path under the pki directory, is one of the CAs' certificates (a bundle of
// the old and new CA during a CA rotation).
func IsCAFile(rel string) bool {
	return slices.ContainsFunc(CAs(), func(s Spec) bool { return s.Path+".crt" == rel })
}

// Signers are the CAs the controller-manager signs with: the cluster CA (kubelets' client certificates,
// the certificates API's client signer) and the kubelet serving CA.
func Signers() []Spec {
	return slices.DeleteFunc(CAs(), func(s Spec) bool { return s.Name != "ca" && s.Name != KubeletServingCA })
}

// SignerPath is where (under the pki directory, without extension) the controller-manager finds the CA it
// signs with in place of ca's own files while a CA rotation is under way: the CA's certificate file is then
// a bundle, and a signer must be one certificate. ca's is SignerName.
func SignerPath(ca Spec) string { return ca.Path + "-signer" }

// Leaves returns the leaf certificate specs of one node (those its kind holds), as kubeadm's certlist
// computes them for current Kubernetes. A fresh table each call: nothing is shared between nodes or runs.
func Leaves(c Cluster, n Node) ([]Spec, error) {
	all, err := allLeaves(c, n)
	if err != nil {
		return nil, err
	}
	var out []Spec
	for _, s := range all {
		if n.Kind.has(s.Name) {
			out = append(out, s)
		}
	}
	return out, nil
}

func allLeaves(c Cluster, n Node) ([]Spec, error) {
	var svcIPs []net.IP
	for _, r := range strings.Split(c.ServiceSubnet, ",") {
		ip, err := firstIP(strings.TrimSpace(r))
		if err != nil {
			return nil, err
		}
		svcIPs = append(svcIPs, ip)
	}
	apiDNS := []string{n.Name, "kubernetes", "kubernetes.default", "kubernetes.default.svc"}
	if c.DNSDomain != "" {
		apiDNS = append(apiDNS, "kubernetes.default.svc."+c.DNSDomain)
	}
	apiIPs := slices.Concat(svcIPs, []net.IP{n.IP}, n.OtherIPs)
	sans := c.CertSANs
	if c.EndpointHost != "" {
		sans = append([]string{c.EndpointHost}, sans...)
	}
	for _, san := range sans {
		if ip := net.ParseIP(san); ip != nil {
			apiIPs = append(apiIPs, ip)
		} else {
			apiDNS = append(apiDNS, san)
		}
	}
	etcdDNS := []string{n.Name, "localhost"}
	etcdIPs := []net.IP{n.IP, net.IPv4(127, 0, 0, 1).To4(), net.IPv6loopback}
	server := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	return []Spec{
		{Name: "apiserver", Path: "apiserver", CA: "ca", CommonName: "kube-apiserver", Usages: server,
			DNSNames: dedupStrings(apiDNS), IPs: dedupIPs(apiIPs), PerNode: true},
		{Name: "apiserver-kubelet-client", Path: "apiserver-kubelet-client", CA: "ca", CommonName: "kube-apiserver-kubelet-client",
			Organization: []string{ClusterAdminsGroup}, Usages: client},
		{Name: "front-proxy-client", Path: "front-proxy-client", CA: "front-proxy-ca", CommonName: "front-proxy-client", Usages: client},
		{Name: "etcd-server", Path: "etcd/server", CA: "etcd-ca", CommonName: n.Name, Usages: both,
			DNSNames: etcdDNS, IPs: etcdIPs, PerNode: true},
		{Name: "etcd-peer", Path: "etcd/peer", CA: "etcd-ca", CommonName: n.Name, Usages: both,
			DNSNames: etcdDNS, IPs: etcdIPs, PerNode: true},
		{Name: "etcd-healthcheck-client", Path: "etcd/healthcheck-client", CA: "etcd-ca", CommonName: "kube-etcd-healthcheck-client", Usages: client},
		{Name: "apiserver-etcd-client", Path: "apiserver-etcd-client", CA: "etcd-ca", CommonName: "kube-apiserver-etcd-client", Usages: client},
	}, nil
}

// firstIP is the first usable address of a CIDR: the API server's Service IP.
func firstIP(cidr string) (net.IP, error) {
	ip, ipnet, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("service subnet %q: %w", cidr, err)
	}
	base := ipnet.IP
	if v4 := ip.To4(); v4 != nil {
		base = ipnet.IP.To4()
	}
	out := make(net.IP, len(base))
	copy(out, base)
	for i := len(out) - 1; i >= 0; i-- {
		out[i]++
		if out[i] != 0 {
			break
		}
	}
	return out, nil
}

func dedupStrings(in []string) []string {
	var out []string
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func dedupIPs(in []net.IP) []net.IP {
	var out []net.IP
	for _, ip := range in {
		if !slices.ContainsFunc(out, ip.Equal) {
			out = append(out, ip)
		}
	}
	return out
}

// KeyPair is a certificate and its key.
type KeyPair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Issuer makes certificates; Now is its clock (tests set it).
type Issuer struct {
	Now        func() time.Time
	Algorithm  Algorithm
	Validity   time.Duration
	CAValidity time.Duration
}

func (is *Issuer) now() time.Time {
	if is.Now != nil {
		return is.Now()
	}
	return time.Now()
}

// NewCA makes a self-signed CA as kubeadm does (key usages DigitalSignature, KeyEncipherment, CertSign;
// the common name also as a DNS name), back-dated by Backdate.
func (is *Issuer) NewCA(s Spec) (*KeyPair, error) {
	key, err := GenerateKey(is.Algorithm)
	if err != nil {
		return nil, err
	}
	nb := is.now().Add(-Backdate).UTC()
	ski, err := keyID(key.Public())
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: s.CommonName, Organization: s.Organization},
		DNSNames:              []string{s.CommonName},
		NotBefore:             nb,
		NotAfter:              nb.Add(is.CAValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		SubjectKeyId:          ski,
	}
	return sign(s.Name, tmpl, tmpl, key, key)
}

// NewLeaf makes a certificate for the spec signed by ca, with a fresh key, or with key when given (renewal
// keeping the key). It is valid from Backdate ago for Validity, cut to the CA's own expiry.
func (is *Issuer) NewLeaf(s Spec, ca *KeyPair, key crypto.Signer) (*KeyPair, error) {
	if key == nil {
		var err error
		if key, err = GenerateKey(is.Algorithm); err != nil {
			return nil, err
		}
	}
	nb := is.now().Add(-Backdate).UTC()
	na := nb.Add(is.Validity)
	if na.After(ca.Cert.NotAfter) {
		na = ca.Cert.NotAfter
	}
	ski, err := keyID(key.Public())
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: s.CommonName, Organization: s.Organization},
		DNSNames:              s.DNSNames,
		IPAddresses:           s.IPs,
		NotBefore:             nb,
		NotAfter:              na,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           s.Usages,
		BasicConstraintsValid: true,
		SubjectKeyId:          ski,
		AuthorityKeyId:        ca.Cert.SubjectKeyId,
	}
	return sign(s.Name, tmpl, ca.Cert, key, ca.Key)
}

// sign makes the certificate of tmpl for key, signed by parent's key.
func sign(name string, tmpl, parent *x509.Certificate, key, parentKey crypto.Signer) (*KeyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &KeyPair{Cert: cert, Key: key}, nil
}

// serial is a random positive serial number of up to 63 bits, as kubeadm makes them.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}

// keyID is the subject key identifier of a public key (RFC 5280 4.2.1.2, method 1).
func keyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	var spki struct {
		Algorithm        pkix.AlgorithmIdentifier
		SubjectPublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(der, &spki); err != nil {
		return nil, err
	}
	sum := sha1.Sum(spki.SubjectPublicKey.Bytes) //nolint:gosec // see import
	return sum[:], nil
}

// Mismatch says how a certificate differs from its spec, or "" when it matches: subject, SANs, usages,
// issuer, and whether it is still valid at now.
func Mismatch(s Spec, cert *x509.Certificate, ca *x509.Certificate, now time.Time) string {
	switch {
	case cert.Subject.CommonName != s.CommonName:
		return fmt.Sprintf("common name %q, want %q", cert.Subject.CommonName, s.CommonName)
	case !sameSet(cert.Subject.Organization, s.Organization):
		return fmt.Sprintf("organization %v, want %v", cert.Subject.Organization, s.Organization)
	case !sameSet(cert.DNSNames, s.DNSNames):
		return fmt.Sprintf("DNS names %v, want %v", cert.DNSNames, s.DNSNames)
	case !sameIPs(cert.IPAddresses, s.IPs):
		return fmt.Sprintf("IP addresses %v, want %v", cert.IPAddresses, s.IPs)
	case !slices.Equal(cert.ExtKeyUsage, s.Usages):
		return "extended key usages differ"
	case now.After(cert.NotAfter):
		return "expired on " + cert.NotAfter.Format(time.RFC3339)
	}
	if ca != nil {
		if err := cert.CheckSignatureFrom(ca); err != nil {
			return "not signed by the current " + s.CA
		}
	}
	return ""
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func sameIPs(a, b []net.IP) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, x.Equal) {
			return false
		}
	}
	return true
}

// EncodeCert is a certificate in PEM.
func EncodeCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// EncodeKey is a private key in PEM: PKCS#1 for RSA and SEC 1 for ECDSA, as kubeadm writes them.
func EncodeKey(k crypto.Signer) ([]byte, error) {
	switch key := k.(type) {
	case *rsa.PrivateKey:
		return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), nil
	case *ecdsa.PrivateKey:
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
	}
	return nil, fmt.Errorf("unsupported key type %T", k)
}

// EncodePublicKey is a public key in PEM (PKIX), as sa.pub is written.
func EncodePublicKey(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParseCert reads the first certificate of a PEM file.
func ParseCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// ParseKey reads a PEM private key (PKCS#1, SEC 1 or PKCS#8).
func ParseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM key")
	}
	switch block.Type {
	case "RSA PRIVATE KEY":
		return x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, err
		}
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
	}
	return nil, fmt.Errorf("unsupported PEM key %q", block.Type)
}

// CAHash is the pin of a CA for kubeadm join's --discovery-token-ca-cert-hash: "sha256:" and the hex
// SHA-256 of the certificate's DER-encoded Subject Public Key Info (RFC 7469), as
// `openssl x509 -pubkey | openssl rsa -pubin -outform der | sha256sum` computes it.
func CAHash(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}
