package bootstrap

import (
	"crypto/sha256"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/cluster-bootstrap/token/jws"
)

var caPEM = []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")

// Each joining host gets a token of its own, kept by host in the state directory; its Secret puts it in
// clusterctl's join group (which nothing auto-approves) and does not sign cluster-info.
func TestTokenRoundTrip(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tok, err := NewToken("w1", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`).MatchString(tok.String()) {
		t.Errorf("token %q is not in bootstrap token form", tok)
	}
	other, _ := NewToken("w2", now, time.Hour)
	data, err := MarshalTokens(map[string]Token{"w1": tok, "w2": other})
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseTokens(data)
	if err != nil || len(back) != 2 || !back["w1"].Expires.Equal(tok.Expires) || back["w1"].String() != tok.String() || back["w2"].Host != "w2" {
		t.Errorf("round trip: %+v, %v; want %+v", back, err, tok)
	}
	if tok.Username() != "system:bootstrap:"+tok.ID {
		t.Errorf("username %q", tok.Username())
	}
	if _, err := ParseTokens([]byte(`{"w1": {"token": "abcdef.0123456789abcdef; rm -rf /", "expires": "2026-01-02T04:04:05Z"}}`)); err == nil {
		t.Error("a bad token was accepted")
	}
	sec := tok.Object()
	if sec.Type != bootstrapapi.SecretTypeBootstrapToken || sec.Name != "bootstrap-token-"+tok.ID || sec.Namespace != "kube-system" ||
		sec.StringData["auth-extra-groups"] != JoinGroup || sec.StringData["expiration"] != "2026-01-02T04:04:05Z" ||
		sec.StringData["usage-bootstrap-signing"] != "" || !strings.Contains(sec.StringData["description"], "w1") {
		t.Errorf("token Secret: %+v", sec)
	}
}

func TestClusterInfoSignedForToken(t *testing.T) {
	tok, _ := NewToken("w1", time.Now(), time.Hour)
	kc, err := ClusterInfoKubeconfig("https://10.0.0.1:6443", caPEM)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(kc)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.AuthInfos) != 0 || cfg.Clusters[""] == nil || cfg.Clusters[""].Server != "https://10.0.0.1:6443" {
		t.Errorf("cluster-info kubeconfig: %+v", cfg)
	}
	cm, err := ClusterInfo(kc, tok)
	if err != nil {
		t.Fatal(err)
	}
	if cm.Namespace != "kube-public" || cm.Name != "cluster-info" {
		t.Errorf("ConfigMap %s/%s", cm.Namespace, cm.Name)
	}
	sig := cm.Data["jws-kubeconfig-"+tok.ID]
	if !jws.DetachedTokenIsValid(sig, cm.Data["kubeconfig"], tok.ID, tok.Secret) {
		t.Error("the JWS signature does not verify with the token")
	}
	other, _ := NewToken("w2", time.Now(), time.Hour)
	if jws.DetachedTokenIsValid(sig, cm.Data["kubeconfig"], other.ID, other.Secret) {
		t.Error("the JWS signature verifies with another token")
	}
}

func TestBootstrapKubeconfig(t *testing.T) {
	tok, _ := NewToken("w1", time.Now(), time.Hour)
	data, err := BootstrapKubeconfig("prod", "https://api:6443", caPEM, tok)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.AuthInfos[ctx.AuthInfo].Token != tok.String() || string(cfg.Clusters[ctx.Cluster].CertificateAuthorityData) != string(caPEM) {
		t.Errorf("bootstrap kubeconfig:\n%s", data)
	}
}

func TestObjects(t *testing.T) {
	kc, err := KubeadmConfig(ClusterConfig{KubernetesVersion: "v1.34.4", ClusterName: "prod", PodSubnet: "10.244.0.0/16",
		APIServerArgs: [][2]string{{"audit-log-maxage", "30"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kind: ClusterConfiguration", "apiVersion: kubeadm.k8s.io/v1beta4", "podSubnet: 10.244.0.0/16",
		"- name: audit-log-maxage\n    value: \"30\""} {
		if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(kc.Data["ClusterConfiguration"]) {
			t.Errorf("kubeadm-config lacks %q:\n%s", want, kc.Data["ClusterConfiguration"])
		}
	}
	info, _ := ClusterInfo([]byte("x"))
	// By default no binding lets a kubeadm token's client request be approved for any node name.
	for _, o := range Objects(false, kc, KubeletConfig([]byte("kind: KubeletConfiguration")), info) {
		if b, ok := o.(*rbacv1.ClusterRoleBinding); ok && (b.Name == AutoApproveBinding || b.RoleRef.Name == "system:certificates.k8s.io:certificatesigningrequests:nodeclient") {
			t.Errorf("without kubeadmJoin: %s binds %s", b.Name, b.RoleRef.Name)
		}
	}
	objs := Objects(true, kc, KubeletConfig([]byte("kind: KubeletConfiguration")), info)
	bindings := map[string]rbacv1.ClusterRoleBinding{}
	for _, o := range objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		if u["apiVersion"] == nil || u["kind"] == nil {
			t.Errorf("%T has no apiVersion/kind", o)
		}
		if b, ok := o.(*rbacv1.ClusterRoleBinding); ok {
			bindings[b.Name] = *b
		}
	}
	if b := bindings["kubeadm:cluster-admins"]; b.RoleRef.Name != "cluster-admin" || b.Subjects[0].Name != ClusterAdminsGroup {
		t.Errorf("admin binding: %+v", b)
	}
	if b := bindings["kubeadm:node-autoapprove-bootstrap"]; b.Subjects[0].Name != NodeBootstrapGroup {
		t.Errorf("node client auto-approval: %+v", b)
	}
	if b := bindings["kubeadm:node-autoapprove-certificate-rotation"]; b.Subjects[0].Name != NodesGroup {
		t.Errorf("client rotation auto-approval: %+v", b)
	}
	if _, ok := objs[0].(*rbacv1.ClusterRoleBinding); !ok {
		t.Error("the admin binding must come first: everything after is applied as admin")
	}
	var anon bool
	for _, o := range objs {
		if rb, ok := o.(*rbacv1.RoleBinding); ok && rb.Namespace == "kube-public" {
			anon = rb.Subjects[0].Name == "system:anonymous" && rb.RoleRef.Name == "kubeadm:bootstrap-signer-clusterinfo"
		}
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == "kubeadm-config" && cm.Namespace != "kube-system" {
			t.Error("kubeadm-config outside kube-system")
		}
	}
	if !anon {
		t.Error("anonymous clients cannot read cluster-info")
	}
}

// The signature is kubeadm's ChecksumForConfigMap: the values hashed in the order of their keys, data first.
func TestSignComponentConfig(t *testing.T) {
	cm := SignComponentConfig(&corev1.ConfigMap{Data: map[string]string{"b": "2", "a": "1"}, BinaryData: map[string][]byte{"c": []byte("3")}})
	if got, want := cm.Annotations[ComponentConfigHash], fmt.Sprintf("sha256:%x", sha256.Sum256([]byte("123"))); got != want {
		t.Errorf("signature %s, want %s", got, want)
	}
}
