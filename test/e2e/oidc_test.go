package e2e

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// testIssuer is an OpenID Connect identity provider as far as the API server asks one: a discovery
// document and its signing keys (JWKS) over TLS, on the lab's bridge; it signs ID tokens (RS256).
type testIssuer struct {
	URL string
	key *rsa.PrivateKey
	srv *http.Server
}

// startIssuer serves an issuer on ip (an address of the lab's bridge) with cert.
func startIssuer(t *testing.T, ip string, cert tls.Certificate) *testIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	is := &testIssuer{URL: "https://" + ln.Addr().String(), key: key}
	b64 := base64.RawURLEncoding.EncodeToString
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": is.URL, "jwks_uri": is.URL + "/keys", "response_types_supported": []string{"id_token"},
			"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "e2e",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	})
	is.srv = &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = is.srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = is.srv.Close() })
	return is
}

// token is an ID token of the issuer's for clientID with claims besides iss, aud, iat and exp (an hour).
func (is *testIssuer) token(t testing.TB, clientID string, claims map[string]any) string {
	t.Helper()
	c := map[string]any{"iss": is.URL, "aud": clientID, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		c[k] = v
	}
	enc := func(v any) string {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(data)
	}
	signed := enc(map[string]string{"alg": "RS256", "typ": "JWT", "kid": "e2e"}) + "." + enc(c)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, is.key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// oidcSettings are the inventory's cluster.apiServer.oidc for is, its CA in caFile (beside the inventory).
func oidcSettings(is *testIssuer, caFile string) string {
	return fmt.Sprintf("  apiServer:\n    oidc:\n      issuerURL: %s\n      clientID: e2e-cluster\n      groupsClaim: groups\n      caFile: %s\n", is.URL, caFile)
}

// checkOIDC signs a user in with a token of the issuer's: the user and groups it maps to, what RBAC gives
// the group; tokens of another key or issuer, or for another client, are refused.
func checkOIDC(t *testing.T, c *Cluster, is *testIssuer) {
	// A kubeconfig of the cluster without the admin's credentials: the token alone says who calls.
	cfg, err := clientcmd.LoadFromFile(c.Admin())
	if err != nil {
		t.Fatal(err)
	}
	cfg.AuthInfos = nil
	for _, ctx := range cfg.Contexts {
		ctx.AuthInfo = ""
	}
	bare := filepath.Join(t.TempDir(), "no-user.conf")
	if err := clientcmd.WriteToFile(*cfg, bare); err != nil {
		t.Fatal(err)
	}
	as := func(token string, args ...string) (string, error) {
		out, err := exec.Command(c.Kubectl, append([]string{"--kubeconfig", bare, "--token", token, "--request-timeout", "30s"}, args...)...).CombinedOutput()
		return string(out), err
	}
	good := is.token(t, "e2e-cluster", map[string]any{"sub": "alice", "groups": []string{"e2e-viewers"}})
	whoami := []string{"auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}"}
	var out string
	// The API server's JWT authenticator fetches the issuer's keys in the background once it starts.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(2 * time.Second) {
		if out, err = as(good, whoami...); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || !strings.HasPrefix(out, "oidc:alice ") || !strings.Contains(out, "oidc:e2e-viewers") || !strings.Contains(out, "system:authenticated") {
		t.Fatalf("auth whoami with the issuer's token: %v\n%s", err, out)
	}
	c.MustK(t, "create", "clusterrolebinding", "e2e-oidc-viewers", "--clusterrole", "view", "--group", "oidc:e2e-viewers")
	if out, err := as(good, "get", "pods", "-n", "kube-system", "-o", "name"); err != nil || !strings.Contains(out, "pod/") {
		t.Errorf("the group's view role: %v\n%s", err, out)
	}
	if out, err := as(good, "create", "namespace", "oidc-was-here"); err == nil || !strings.Contains(out, "forbidden") {
		t.Errorf("the viewer created a namespace: %v\n%s", err, out)
	}
	other := &testIssuer{URL: is.URL}
	if other.key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	elsewhere := &testIssuer{URL: "https://login.example.com", key: is.key}
	for name, token := range map[string]string{
		"signed with another key": other.token(t, "e2e-cluster", map[string]any{"sub": "mallory", "groups": []string{"e2e-viewers"}}),
		"of another issuer":       elsewhere.token(t, "e2e-cluster", map[string]any{"sub": "mallory"}),
		"for another client":      is.token(t, "other-client", map[string]any{"sub": "mallory"}),
		"claiming system:masters": is.token(t, "e2e-cluster", map[string]any{"sub": "system:admin", "groups": []string{"system:masters"}}),
	} {
		out, err := as(token, "get", "namespaces", "-o", "name")
		if name == "claiming system:masters" {
			// Accepted as oidc:system:admin in oidc:system:masters: prefixed, the claims name no one else.
			if err == nil || !strings.Contains(out, `"oidc:system:admin" cannot list`) {
				t.Errorf("a token %s: %v\n%s", name, err, out)
			}
			continue
		}
		if err == nil || !strings.Contains(out, "Unauthorized") {
			t.Errorf("a token %s: %v\n%s", name, err, out)
		}
	}
	if out := c.Lab.Run(t, "cp1", "stat -c '%a %U' /etc/kubernetes/apiserver/authentication-config.yaml"); strings.TrimSpace(out) != "600 root" {
		t.Errorf("authentication-config.yaml: %s", out)
	}
}
