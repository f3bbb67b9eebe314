package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/clusterctl/clusterctl/tasks/pki"
)

// ForgeJoinRequests plays a malicious joining host: while clusterctl joins host, it takes the bootstrap token
// clusterctl issued to host (from the state directory, as the host has it in its bootstrap kubeconfig) and
// asks with it, once the token authenticates, for a kubelet client certificate of each of the nodes named. It
// returns the names of the requests by node, and fails the test when the token never authenticates within
// timeout.
func ForgeJoinRequests(t testing.TB, c *Cluster, host string, timeout time.Duration, nodes ...string) map[string]string {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Admin())
	if err != nil {
		t.Fatal(err)
	}
	made := map[string]string{}
	var last error
	ctx := context.Background()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		token := tokenOf(c, host)
		if token == "" {
			continue
		}
		kube, err := kubernetes.NewForConfig(&rest.Config{Host: cfg.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, node := range nodes {
			if made[node] != "" {
				continue
			}
			req, err := kube.CertificatesV1().CertificateSigningRequests().Create(ctx, clientRequest(t, node), metav1.CreateOptions{})
			if err != nil {
				last = err // the token's Secret is not applied yet
				continue
			}
			made[node] = req.Name
			t.Logf("with %s's token: client CSR %s for system:node:%s", host, req.Name, node)
		}
		if len(made) == len(nodes) {
			return made
		}
	}
	t.Fatalf("%s's bootstrap token never let a request through within %s (last: %v)", host, timeout, last)
	return nil
}

// tokenOf is the bootstrap token the state directory keeps for host, or "".
func tokenOf(c *Cluster, host string) string {
	data, err := os.ReadFile(filepath.Join(c.StateDir, "bootstrap-tokens.json"))
	if err != nil {
		return ""
	}
	var tokens map[string]struct {
		Token string `json:"token"`
	}
	if json.Unmarshal(data, &tokens) != nil {
		return ""
	}
	return tokens[host].Token
}

// clientRequest is a kubelet's TLS-bootstrap request for node's client certificate.
func clientRequest(t testing.TB, node string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-forged-" + node + "-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
}

// CheckKubeletServing checks that the kubelet of host serves a certificate the kubelet serving CA signed and
// the cluster CA does not verify (no client of the API server may take it for the API server's), and that
// the API server reaches the kubelet with it: kubectl logs, exec and port-forward to pod, a probe Pod on host.
func CheckKubeletServing(t *testing.T, c *Cluster, host, pod string) {
	t.Helper()
	cert := c.Presented(t, host, 10250)
	pool := func(file string) *x509.CertPool {
		data, err := os.ReadFile(filepath.Join(c.StateDir, "pki", file))
		if err != nil {
			t.Fatal(err)
		}
		p := x509.NewCertPool()
		p.AppendCertsFromPEM(data)
		return p
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool("ca.crt"), KeyUsages: usage}); err == nil {
		t.Errorf("%s's kubelet serving certificate (issuer %s) verifies against the cluster CA", host, cert.Issuer)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool(pki.KubeletServingCA + ".crt"), KeyUsages: usage}); err != nil {
		t.Errorf("%s's kubelet serving certificate does not verify against the kubelet serving CA: %v", host, err)
	}
	if logs := c.MustK(t, "logs", pod); !strings.Contains(logs, "serving on :8080") {
		t.Errorf("kubectl logs %s: %q", pod, logs)
	}
	if out, err := c.K(t, "", "exec", pod, "--", "/probe", "get", "http://127.0.0.1:8080/"); err != nil || strings.TrimSpace(out) != pod {
		t.Errorf("kubectl exec %s: %q, %v", pod, out, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	pf := exec.Command(c.Kubectl, "--kubeconfig", c.Admin(), "port-forward", "--address", "127.0.0.1", "pod/"+pod, port+":8080")
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pf.Process.Kill(); _ = pf.Wait() }()
	var got string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://127.0.0.1:" + port + "/")
		if err != nil {
			got = err.Error()
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if got = strings.TrimSpace(string(body)); got == pod {
			return
		}
	}
	t.Errorf("kubectl port-forward to %s: %q, want the Pod's name", pod, got)
}
