package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// renderedCluster is a state directory as render leaves it (CA, admin.conf), recorded as built as up
// records it once the cluster's API server answers, and its inventory.
func renderedCluster(t *testing.T) (dir, inv string) {
	t.Helper()
	dir = t.TempDir()
	inv = filepath.Join(dir, "hosts.yaml")
	if err := os.WriteFile(inv, []byte("cluster: {name: lab, certificates: {keyAlgorithm: ECDSA-P256}}\nhosts:\n  - {name: cp1, address: 10.10.0.11, roles: [control-plane]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "render", "-i", inv, "--out", filepath.Join(dir, "out")); code != 0 {
		t.Fatalf("render: %d %s", code, stderr)
	}
	if err := statedir.MarkBuilt(filepath.Join(dir, ".clusterctl", "lab"), "lab", time.Now()); err != nil {
		t.Fatal(err)
	}
	return dir, inv
}

func TestKubeconfigUser(t *testing.T) {
	dir, inv := renderedCluster(t)
	out := filepath.Join(dir, "alice.conf")
	code, _, stderr := runCLI(t, "kubeconfig", "user", "alice", "--group", "dev,ops", "--ttl", "2h", "-i", inv, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	st, err := os.Stat(out)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v; want 0600", out, err, st)
	}
	cfg, err := clientcmd.LoadFromFile(out)
	if err != nil {
		t.Fatal(err)
	}
	auth := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	block, _ := pem.Decode(auth.ClientCertificateData)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := pem.Decode(readTestFile(t, filepath.Join(dir, ".clusterctl", "lab", "pki", "ca.crt")))
	caCert, _ := x509.ParseCertificate(ca.Bytes)
	if cert.Subject.CommonName != "alice" || !slices.Equal(cert.Subject.Organization, []string{"dev", "ops"}) ||
		cert.CheckSignatureFrom(caCert) != nil || time.Until(cert.NotAfter) > 2*time.Hour || !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("certificate: CN %q O %v, until %v, usages %v, signed by the CA: %v", cert.Subject.CommonName, cert.Subject.Organization, cert.NotAfter, cert.ExtKeyUsage, cert.CheckSignatureFrom(caCert))
	}
	if code, _, stderr := runCLI(t, "kubeconfig", "user", "alice", "-i", inv, "--out", out); code != 2 || !strings.Contains(stderr, "exists") {
		t.Errorf("over an existing file: exit %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "kubeconfig", "user", "root", "--group", "system:masters", "-i", inv, "--force"); code != 2 || !strings.Contains(stderr, "system:masters is refused") {
		t.Errorf("system:masters, even with --force: exit %d %s", code, stderr)
	}
}

// Names Kubernetes and kubeadm keep for their own identities are refused (exit 2) unless --force, which
// says what they grant; the TTL is capped; the real expiry is printed; every issued certificate is
// recorded and listed.
func TestKubeconfigUserIdentities(t *testing.T) {
	dir, inv := renderedCluster(t)
	for _, tc := range []struct {
		args  []string
		names string
	}{
		{[]string{"system:node:cp1", "--group", "system:nodes"}, "Node cp1's kubelet identity"},
		{[]string{"mallory", "--group", "kubeadm:cluster-admins"}, "cluster-admin"},
		{[]string{"system:kube-controller-manager"}, "kube-controller-manager"},
		{[]string{"kube-apiserver-kubelet-client"}, "every kubelet"},
		{[]string{"system:serviceaccount:kube-system:default"}, "ServiceAccount kube-system:default"},
		{[]string{"eve", "--group", "system:serviceaccounts:kube-system"}, "service accounts"},
		{[]string{"eve", "--group", "system:authenticated"}, "reserves"},
	} {
		args := append(append([]string{"kubeconfig", "user"}, tc.args...), "-i", inv)
		if code, stdout, stderr := runCLI(t, args...); code != 2 || !strings.Contains(stderr, tc.names) || !strings.Contains(stderr, "--force") || stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, %d bytes out", tc.args, code, stderr, len(stdout))
		}
	}
	code, stdout, stderr := runCLI(t, "kubeconfig", "user", "system:node:cp1", "--group", "system:nodes", "--force", "--ttl", "1h", "-i", inv)
	if code != 0 || !strings.Contains(stderr, "warning: --force: user \"system:node:cp1\" grants Node cp1's kubelet identity") || !strings.Contains(stdout, "client-certificate-data") {
		t.Errorf("--force: exit %d %s", code, stderr)
	}
	for ttl, want := range map[string]string{"876000h": "at most 8760h", "8761h": "at most 8760h", "0s": "--ttl must be longer than 0", "-1h": "--ttl must be longer than 0"} {
		if code, _, stderr := runCLI(t, "kubeconfig", "user", "alice", "--ttl", ttl, "-i", inv); code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("--ttl %s: exit %d %s", ttl, code, stderr)
		}
	}
	// The CA of a rendered cluster is valid ten years: a year's certificate is not cut; its real expiry
	// is printed.
	code, _, stderr = runCLI(t, "kubeconfig", "user", "alice", "--group", "dev", "--ttl", "8760h", "-i", inv)
	// The certificate's validity starts a few minutes back (clock skew), so its end is compared with a
	// window, never a calendar day that midnight can move.
	want := time.Now().Add(8760 * time.Hour)
	if code != 0 || !validUntilNear(stderr, want) || strings.Contains(stderr, "cut to") {
		t.Errorf("8760h: exit %d %s (want the expiry near %s, not cut)", code, stderr, want.UTC().Format(time.RFC3339))
	}
	code, stdout, _ = runCLI(t, "kubeconfig", "user", "list", "-i", inv)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if code != 0 || len(lines) != 3 || !strings.Contains(lines[1], "system:node:cp1 (--force)") || !strings.Contains(lines[1], "system:nodes") ||
		!strings.Contains(lines[2], "alice") || !strings.Contains(lines[2], "dev") || !strings.Contains(lines[0], "ISSUED BY") {
		t.Errorf("list: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = runCLI(t, "kubeconfig", "user", "list", "-i", inv, "-o", "json")
	if code != 0 || !strings.Contains(stdout, `"type":"issued_users"`) || !strings.Contains(stdout, `"user":"alice"`) || !strings.Contains(stdout, `"serial":"`) {
		t.Errorf("list -o json: exit %d %s", code, stdout)
	}
	if st, err := os.Stat(filepath.Join(dir, ".clusterctl", "lab", "issued-users.json")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("record: %v %v", st, err)
	}
}

func TestKubeconfigMerge(t *testing.T) {
	dir, inv := renderedCluster(t)
	into := filepath.Join(dir, "kube", "config")
	other := clientcmdapi.NewConfig()
	other.Clusters["prod"] = &clientcmdapi.Cluster{Server: "https://prod.example:6443"}
	other.AuthInfos["prod"] = &clientcmdapi.AuthInfo{Token: "t"}
	other.Contexts["prod"] = &clientcmdapi.Context{Cluster: "prod", AuthInfo: "prod"}
	other.CurrentContext = "prod"
	if err := os.MkdirAll(filepath.Dir(into), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*other, into); err != nil {
		t.Fatal(err)
	}
	for range 2 { // twice: the second replaces what the first wrote
		if code, _, stderr := runCLI(t, "kubeconfig", "--merge", "--kubeconfig", into, "-i", inv); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	}
	cfg, err := clientcmd.LoadFromFile(into)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CurrentContext != "lab" || len(cfg.Contexts) != 2 || cfg.Contexts["prod"] == nil || cfg.AuthInfos["lab-admin"] == nil ||
		cfg.Clusters["lab"] == nil || !strings.HasPrefix(cfg.Clusters["lab"].Server, "https://") {
		t.Errorf("merged: current %q, contexts %v, users %v", cfg.CurrentContext, cfg.Contexts, cfg.AuthInfos)
	}
	if st, _ := os.Stat(into); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	code, stdout, _ := runCLI(t, "kubeconfig", "-i", inv)
	if code != 0 || !strings.Contains(stdout, "client-key-data") {
		t.Errorf("print: exit %d", code)
	}
}

// init's inventories are valid, and say what they were given; bad values are refused with exit 2.
func TestInit(t *testing.T) {
	code, stdout, stderr := runCLI(t, "init", "--hosts", "10.0.0.11,10.0.0.12,10.0.0.13,db=db1.example.com", "--control-planes", "3", "--name", "prod", "--user", "admin")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	file := filepath.Join(t.TempDir(), "hosts.yaml")
	if err := os.WriteFile(file, []byte(stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "inventory", "validate", "-i", file)
	if code != 0 || !strings.Contains(out, `cluster "prod"`) || !strings.Contains(out, "4 hosts (3 control-plane, 1 worker,") {
		t.Errorf("validate: exit %d\n%s%s\n%s", code, out, stderr, stdout)
	}
	if !strings.Contains(stdout, `name: "db"`) || !strings.Contains(stdout, `address: "db1.example.com"`) || !strings.Contains(stdout, `user: "admin"`) {
		t.Errorf("init output:\n%s", stdout)
	}
	conv := filepath.Join(t.TempDir(), "from.yaml")
	if code, _, stderr := runCLI(t, "init", "--from", "../../inventory/examples/kubespray/inventory.ini", "--out", conv); code != 0 {
		t.Fatalf("--from: exit %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "inventory", "validate", "-i", conv); code != 0 {
		t.Errorf("converted: exit %d %s", code, stderr)
	}
	for _, tc := range []struct {
		args []string
		line string
	}{
		{[]string{"init"}, "init needs --hosts"},
		{[]string{"init", "--hosts", "a;b"}, `"a;b" is neither an IP address nor a DNS name`},
		{[]string{"init", "--hosts", "10.0.0.1", "--control-planes", "2"}, "--control-planes 2: give between 1 and the number of --hosts (1)"},
		{[]string{"init", "--hosts", "x=10.0.0.1,x=10.0.0.2"}, "the name x is given twice"},
		{[]string{"init", "--hosts", "10.0.0.1", "--name", "Bad Name"}, `--name "Bad Name"`},
		{[]string{"init", "--hosts", "10.0.0.1", "--out", conv}, "exists: init never writes over a file"},
		{[]string{"init", "--hosts", "10.0.0.1", "--from", conv}, "init takes --hosts or --from, not both"},
	} {
		if code, _, stderr := runCLI(t, tc.args...); code != 2 || !strings.Contains(stderr, tc.line) {
			t.Errorf("%v: exit %d, want 2 with %q\n%s", tc.args, code, tc.line, stderr)
		}
	}
}

func readTestFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A state directory another user owns (their CA, their keys) is refused with exit 2, naming the owner.
func TestStateDirOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (chown)")
	}
	dir, inv := renderedCluster(t)
	state := filepath.Join(dir, ".clusterctl", "lab")
	if err := os.Chown(state, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "kubeconfig", "-i", inv)
	if code != 2 || stdout != "" || !strings.Contains(stderr, state+" is owned by user") || !strings.Contains(stderr, "65534") {
		t.Errorf("exit %d, %d bytes out, stderr %s", code, len(stdout), stderr)
	}
}

// A certificate cut to the CA's expiry says so, with the real expiry.
func TestKubeconfigUserCutToCA(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "hosts.yaml")
	if err := os.WriteFile(inv, []byte("cluster: {name: lab, certificates: {keyAlgorithm: ECDSA-P256, caValidity: 100h, validity: 50h}}\nhosts:\n  - {name: cp1, address: 10.10.0.11, roles: [control-plane]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "render", "-i", inv, "--out", filepath.Join(dir, "out")); code != 0 {
		t.Fatalf("render: %d %s", code, stderr)
	}
	if err := statedir.MarkBuilt(filepath.Join(dir, ".clusterctl", "lab"), "lab", time.Now()); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "kubeconfig", "user", "alice", "--ttl", "8760h", "-i", inv)
	if code != 0 || !validUntilNear(stderr, time.Now().Add(100*time.Hour)) || !strings.Contains(stderr, "cut to the cluster CA's expiry") {
		t.Errorf("exit %d %s", code, stderr)
	}
}

// validUntilNear reports whether the "valid until TIME" that stderr prints lies within a quarter of an
// hour before want (certificates start a few minutes back, for clock skew) or a minute after it.
func validUntilNear(stderr string, want time.Time) bool {
	_, rest, ok := strings.Cut(stderr, "valid until ")
	if !ok || len(strings.Fields(rest)) == 0 {
		return false
	}
	until, err := time.Parse(time.RFC3339, strings.TrimRight(strings.Fields(rest)[0], ",;."))
	return err == nil && !until.Before(want.Add(-15*time.Minute)) && !until.After(want.Add(time.Minute))
}
