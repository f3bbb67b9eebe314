package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/pki"
)

// renderOIDC renders a one-node cluster whose inventory (in dir) names an identity provider with caFile.
func renderOIDC(t *testing.T, dir, caFile string) (*Result, error) {
	t.Helper()
	yml := "cluster:\n  name: lab\n  apiServer:\n    oidc:\n      issuerURL: https://login.example.com\n      clientID: k8s\n      groupsClaim: groups\n      caFile: " +
		caFile + "\nhosts:\n  - {name: cp1, address: 10.10.0.11, roles: [control-plane, worker]}\n"
	inv, diags := inventory.Parse(filepath.Join(dir, "hosts.yaml"), []byte(yml))
	if err := diags.Err(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	return Render(Options{Inv: inv, StateDir: state, Images: testImages(inv), Now: time.Now})
}

func TestOIDC(t *testing.T) {
	dir := t.TempDir()
	is := &pki.Issuer{Algorithm: "ECDSA-P256", CAValidity: time.Hour}
	ca, err := is.NewCA(pki.Spec{Name: "login-ca", CommonName: "login CA"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "login-ca.crt"), pki.EncodeCert(ca.Cert), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := renderOIDC(t, dir, "login-ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	cp1 := files(r, "cp1")
	authn := cp1[kubeadm.AuthenticationConfig]
	if authn.Mode != 0o600 || !strings.Contains(string(authn.Data), "url: https://login.example.com") || !strings.Contains(string(authn.Data), "BEGIN CERTIFICATE") {
		t.Errorf("authentication configuration (mode %04o):\n%s", authn.Mode, authn.Data)
	}
	if m := string(cp1["/etc/kubernetes/manifests/kube-apiserver.yaml"].Data); !strings.Contains(m, "--authentication-config="+kubeadm.AuthenticationConfig) {
		t.Errorf("the API server is not given its authentication configuration:\n%s", m)
	}

	// A CA file that is missing, or holds a key, is refused before anything is pushed, naming the field.
	if err := os.WriteFile(filepath.Join(dir, "bad.crt"), []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{"missing.crt": "missing.crt", "bad.crt": "cluster.apiServer.oidc.caFile: " + filepath.Join(dir, "bad.crt")} {
		if _, err := renderOIDC(t, dir, file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("caFile %s: %v, want an error naming %q", file, err, want)
		}
	}
}
