package render

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/hardening"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/manifests"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/transport"
)

var update = flag.Bool("update", false, "rewrite golden files")

const hostsYAML = `
cluster:
  name: lab
  controlPlaneEndpoint: api.lab.example:6443
  apiServer:
    certSANs: [203.0.113.9]
    extraArgs:
      audit-log-path: /var/log/kubernetes/audit.log
      authorization-mode: Node,RBAC,Webhook
    extraVolumes:
      - {name: audit, hostPath: /var/log/kubernetes, mountPath: /var/log/kubernetes, pathType: DirectoryOrCreate}
  kubelet:
    extraArgs: {max-pods: "150"}
  certificates: {keyAlgorithm: ECDSA-P256}
hosts:
  - {name: cp1, address: 10.10.0.11, roles: [control-plane]}
  - {name: cp2, address: 10.10.0.12, roles: [control-plane]}
  - {name: cp3, address: 10.10.0.13, roles: [control-plane]}
  - {name: w1, address: 10.10.0.21, roles: [worker]}
`

func renderLab(t *testing.T, state string) *Result {
	t.Helper()
	inv, diags := inventory.Parse("hosts.yaml", []byte(hostsYAML))
	if err := diags.Err(); err != nil {
		t.Fatal(err)
	}
	res, err := Render(Options{Inv: inv, StateDir: state, Images: testImages(inv),
		Now: func() time.Time { return time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func files(r *Result, host string) map[string]transport.File {
	out := map[string]transport.File{}
	for _, h := range r.Hosts {
		if h.Host == host {
			for _, f := range h.Files {
				out[f.Path] = f
			}
		}
	}
	return out
}

func TestWhatEachHostGets(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	os.MkdirAll(state, 0o700)
	r := renderLab(t, state)
	if r.Endpoint != "https://api.lab.example:6443" {
		t.Errorf("endpoint %s", r.Endpoint)
	}
	cp1, cp2, w1 := files(r, "cp1"), files(r, "cp2"), files(r, "w1")
	for _, p := range []string{
		"/etc/kubernetes/pki/ca.key", "/etc/kubernetes/pki/etcd/ca.key", "/etc/kubernetes/pki/front-proxy-ca.key", "/etc/kubernetes/pki/sa.key",
		"/etc/kubernetes/pki/apiserver.crt", "/etc/kubernetes/pki/etcd/peer.key", kubeadm.AdminKubeconfig, kubeadm.SuperAdminConfig,
		"/etc/kubernetes/controller-manager.conf", "/etc/kubernetes/scheduler.conf", kubeadm.KubeletKubeconfig,
		"/etc/kubernetes/manifests/etcd.yaml", "/etc/kubernetes/manifests/kube-apiserver.yaml",
		"/etc/kubernetes/manifests/kube-controller-manager.yaml", "/etc/kubernetes/manifests/kube-scheduler.yaml",
		"/var/lib/kubelet/config.yaml", kubeadm.ContainerdConfig,
	} {
		if _, ok := cp1[p]; !ok {
			t.Errorf("cp1 lacks %s", p)
		}
	}
	if _, ok := cp2[kubeadm.SuperAdminConfig]; ok {
		t.Error("super-admin.conf on a joining control-plane node (kubeadm writes it on the first only)")
	}
	// Workers: the CA certificate, no key, no control-plane material.
	for p := range w1 {
		if strings.HasSuffix(p, ".key") || strings.Contains(p, "/manifests/") || strings.HasSuffix(p, ".conf") && strings.HasPrefix(p, "/etc/kubernetes/") {
			t.Errorf("worker gets %s", p)
		}
	}
	if _, ok := w1[kubeadm.CACert]; !ok {
		t.Error("worker lacks the CA certificate")
	}
	for p := range w1 {
		if strings.HasPrefix(p, kubeadm.APIServerConfigDir) {
			t.Errorf("worker gets the API server's %s", p)
		}
	}
	// Both control-plane nodes encrypt with the state directory's one key.
	keys, created, err := hardening.LoadKeys(state, time.Now())
	if err != nil || created || len(keys.Keys) != 1 {
		t.Fatalf("the state directory's keys: %+v, created %v, %v", keys, created, err)
	}
	secret := base64.StdEncoding.EncodeToString(keys.Write().Secret)
	for host, fs := range map[string]map[string]transport.File{"cp1": cp1, "cp2": cp2} {
		if enc := string(fs[kubeadm.EncryptionConfig].Data); !strings.Contains(enc, "name: "+keys.Write().Name) || !strings.Contains(enc, secret) {
			t.Errorf("%s's encryption configuration does not hold the state directory's key:\n%s", host, enc)
		}
	}
	for host, fs := range map[string]map[string]transport.File{"cp1": cp1, "w1": w1} {
		for p, f := range fs {
			secret := strings.HasSuffix(p, ".key") || strings.HasSuffix(p, ".conf") && strings.HasPrefix(p, "/etc/kubernetes/") || strings.Contains(p, "/manifests/") ||
				strings.HasPrefix(p, kubeadm.APIServerConfigDir+"/")
			if secret && f.Mode != 0o600 || !secret && f.Mode != 0o644 {
				t.Errorf("%s %s: mode %04o", host, p, f.Mode)
			}
		}
	}
	// Each node's certificates name it; the kubelet.conf is its own identity; the API server cert has the SANs.
	apiserver, _ := pki.ParseCert(cp2["/etc/kubernetes/pki/apiserver.crt"].Data)
	if !strings.Contains(strings.Join(apiserver.DNSNames, ","), "cp2,kubernetes") || !strings.Contains(strings.Join(apiserver.DNSNames, ","), "api.lab.example") {
		t.Errorf("cp2 apiserver DNS names %v", apiserver.DNSNames)
	}
	kc, err := clientcmd.Load(cp2[kubeadm.KubeletKubeconfig].Data)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := pki.ParseCert(kc.AuthInfos["system:node:cp2"].ClientCertificateData)
	if cert == nil || cert.Subject.CommonName != "system:node:cp2" || cert.Subject.Organization[0] != "system:nodes" ||
		kc.Clusters["lab"].Server != "https://api.lab.example:6443" {
		t.Errorf("kubelet.conf: %+v", kc)
	}
	cm, _ := clientcmd.Load(cp2["/etc/kubernetes/controller-manager.conf"].Data)
	if cm.Clusters["lab"].Server != "https://10.10.0.12:6443" || cm.CurrentContext != "system:kube-controller-manager@lab" {
		t.Errorf("controller-manager.conf talks to %s (%s)", cm.Clusters["lab"].Server, cm.CurrentContext)
	}
	admin, _ := clientcmd.Load(r.Workstation[0].Data)
	acert, _ := pki.ParseCert(admin.AuthInfos["kubernetes-admin"].ClientCertificateData)
	if acert.Subject.Organization[0] != "kubeadm:cluster-admins" || acert.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("admin.conf identity %v", acert.Subject)
	}
	// Manifests round-trip strictly into corev1.Pod; the joining etcd member knows the ones before it.
	for p, f := range cp2 {
		if !strings.Contains(p, "/manifests/") {
			continue
		}
		var pod corev1.Pod
		if err := yaml.UnmarshalStrict(f.Data, &pod); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	var etcd corev1.Pod
	yaml.UnmarshalStrict(cp2["/etc/kubernetes/manifests/etcd.yaml"].Data, &etcd)
	cmd := strings.Join(etcd.Spec.Containers[0].Command, " ")
	if !strings.Contains(cmd, "--initial-cluster=cp1=https://10.10.0.11:2380,cp2=https://10.10.0.12:2380") || !strings.Contains(cmd, "--initial-cluster-state=existing") {
		t.Errorf("etcd on cp2: %s", cmd)
	}
	var kcfg kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(w1["/var/lib/kubelet/config.yaml"].Data, &kcfg); err != nil {
		t.Fatal(err)
	}
	if kcfg.ClusterDNS[0] != "10.96.0.10" || !kcfg.ServerTLSBootstrap || !kcfg.RotateCertificates || *kcfg.Authentication.Anonymous.Enabled {
		t.Errorf("kubelet config: %+v", kcfg)
	}
	if got := string(w1["/var/lib/kubelet/kubeadm-flags.env"].Data); got != "KUBELET_KUBEADM_ARGS=\"--node-ip=10.10.0.21 --hostname-override=w1 --max-pods=150\"\n" {
		t.Errorf("flags: %q", got)
	}
}

// Golden files: what cp1 and w1 get, except keys and certificates (random; in kubeconfigs their data is
// redacted), so that a change of flags, paths, identities or units shows in review.
func TestGolden(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	os.MkdirAll(state, 0o700)
	r := renderLab(t, state)
	for _, host := range []string{"cp1", "w1"} {
		for _, h := range r.Hosts {
			if h.Host != host {
				continue
			}
			for _, f := range h.Files {
				if strings.HasSuffix(f.Path, ".key") || strings.HasSuffix(f.Path, ".crt") || strings.HasSuffix(f.Path, ".pub") {
					continue
				}
				if strings.HasSuffix(f.Path, ".conf") && strings.HasPrefix(f.Path, "/etc/kubernetes/") || strings.HasPrefix(f.Path, "/etc/kubernetes/manifests/") ||
					f.Path == kubeadm.EncryptionConfig {
					f.Data = redactedRE.ReplaceAll(f.Data, []byte("$1: REDACTED"))
				}
				golden := filepath.Join("testdata", host+strings.ReplaceAll(f.Path, "/", "_"))
				if *update {
					os.WriteFile(golden, f.Data, 0o644)
					continue
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (go test ./tasks/render -update writes it)", err)
				}
				if !bytes.Equal(f.Data, want) {
					t.Errorf("%s %s differs from %s:\n%s", host, f.Path, golden, f.Data)
				}
			}
		}
	}
}

var redactedRE = regexp.MustCompile(`(certificate-authority-data|client-certificate-data|client-key-data|clusterctl.dev/pki-sha256|  uid|        secret): .*`)

func TestRenderingTwiceGivesTheSameBytes(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	os.MkdirAll(state, 0o700)
	a, b := renderLab(t, state), renderLab(t, state)
	if len(b.Changes) != 0 {
		t.Errorf("second render changed %v", b.Changes)
	}
	for i := range a.Hosts {
		for j := range a.Hosts[i].Files {
			fa, fb := a.Hosts[i].Files[j], b.Hosts[i].Files[j]
			if fa.Path != fb.Path || !bytes.Equal(fa.Data, fb.Data) || fa.Mode != fb.Mode {
				t.Errorf("%s %s differs between renders", a.Hosts[i].Host, fa.Path)
			}
		}
	}
	if !bytes.Equal(a.Workstation[0].Data, b.Workstation[0].Data) {
		t.Error("admin.conf differs between renders")
	}
}

// TestCARotationStages follows a CA rotation through its stages: what each host trusts, what the
// controller-manager and the token signer sign with, and what leaves are signed by.
func TestCARotationStages(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	os.MkdirAll(state, 0o700)
	before := files(renderLab(t, state), "cp1")
	oldCA, err := pki.ParseCert(before[kubeadm.CACert].Data)
	if err != nil {
		t.Fatal(err)
	}
	store := &pki.Store{Dir: filepath.Join(state, "pki"), Issuer: &pki.Issuer{Algorithm: "ECDSA-P256", CAValidity: 87600 * time.Hour,
		Now: func() time.Time { return time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC) }}}
	rot := store.NewRotation(time.Now())
	// stage records a stage as under way, the ones before as done, as the rotation's run does.
	stage := func(s int) {
		t.Helper()
		for done := pki.StageGenerate; done < s; done++ {
			if err := rot.MarkDone(pki.StageStep(done)); err != nil {
				t.Fatal(err)
			}
		}
		if err := rot.Begin(pki.StageStep(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.GenerateNewCAs(); err != nil {
		t.Fatal(err)
	}
	stage(pki.StageGenerate)
	if got := files(renderLab(t, state), "cp1"); string(got[kubeadm.CACert].Data) != string(before[kubeadm.CACert].Data) {
		t.Error("generating the new CAs changed what hosts get")
	}
	certsOf := func(data []byte) []*x509.Certificate {
		var out []*x509.Certificate
		for rest := data; ; {
			c, r, ok := nextCert(rest)
			if !ok {
				return out
			}
			out, rest = append(out, c), r
		}
	}
	signedBy := func(f transport.File, ca *x509.Certificate) bool {
		c, err := pki.ParseCert(f.Data)
		return err == nil && c.CheckSignatureFrom(ca) == nil
	}
	signerFlag := func(fs map[string]transport.File, signer string) string {
		m := regexp.MustCompile(`--cluster-signing-` + signer + `-cert-file=(\S+)`).FindSubmatch(fs["/etc/kubernetes/manifests/kube-controller-manager.yaml"].Data)
		if m == nil {
			return ""
		}
		return string(m[1])
	}
	cmFlag := func(fs map[string]transport.File) string { return signerFlag(fs, "kubelet-client") }

	stage(pki.StageTrust)
	r := renderLab(t, state)
	trust, w1 := files(r, "cp1"), files(r, "w1")
	bundle := certsOf(trust[kubeadm.CACert].Data)
	if len(bundle) != 2 || !bundle[0].Equal(oldCA) || string(w1[kubeadm.CACert].Data) != string(trust[kubeadm.CACert].Data) {
		t.Fatalf("trust stage: ca.crt holds %d certificates, want the old then the new CA on every host", len(bundle))
	}
	newCA := bundle[1]
	for _, f := range []string{"front-proxy-ca.crt", "etcd/ca.crt", "kubelet-serving-ca.crt"} {
		if n := len(certsOf(trust["/etc/kubernetes/pki/"+f].Data)); n != 2 {
			t.Errorf("trust stage: %s holds %d certificates", f, n)
		}
	}
	if n := strings.Count(string(trust["/etc/kubernetes/pki/sa.pub"].Data), "BEGIN PUBLIC KEY"); n != 2 {
		t.Errorf("trust stage: sa.pub holds %d keys", n)
	}
	if cmFlag(trust) != "/etc/kubernetes/pki/ca-signer.crt" || !bytes.Equal(certsOf(trust["/etc/kubernetes/pki/ca-signer.crt"].Data)[0].Raw, oldCA.Raw) {
		t.Error("trust stage: the controller-manager should sign with ca-signer.crt, the old CA")
	}
	if signerFlag(trust, "kubelet-serving") != "/etc/kubernetes/pki/kubelet-serving-ca-signer.crt" ||
		len(certsOf(trust["/etc/kubernetes/pki/kubelet-serving-ca-signer.crt"].Data)) != 1 {
		t.Error("trust stage: the controller-manager should sign serving certificates with kubelet-serving-ca-signer.crt, one CA")
	}
	if _, ok := w1["/etc/kubernetes/pki/kubelet-serving-ca.key"]; ok {
		t.Error("trust stage: a worker received the kubelet serving CA's key")
	}
	if string(trust["/etc/kubernetes/pki/sa.key"].Data) != string(before["/etc/kubernetes/pki/sa.key"].Data) {
		t.Error("trust stage: tokens should still be signed with the old key")
	}
	if !signedBy(trust["/etc/kubernetes/pki/apiserver.crt"], oldCA) {
		t.Error("trust stage: leaves should still be the old CA's")
	}
	kc, err := clientcmd.Load(trust["/etc/kubernetes/controller-manager.conf"].Data)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range kc.Clusters {
		if string(cl.CertificateAuthorityData) != string(trust[kubeadm.CACert].Data) {
			t.Error("trust stage: kubeconfigs should hold the bundle")
		}
	}

	stage(pki.StageReissue)
	if err := store.Swap(rot); err != nil {
		t.Fatal(err)
	}
	reissue := files(renderLab(t, state), "cp1")
	if b := certsOf(reissue[kubeadm.CACert].Data); len(b) != 2 || !b[0].Equal(newCA) || !b[1].Equal(oldCA) {
		t.Error("reissue stage: ca.crt should hold the new then the old CA")
	}
	for _, f := range []string{"apiserver.crt", "apiserver-kubelet-client.crt"} {
		if !signedBy(reissue["/etc/kubernetes/pki/"+f], newCA) {
			t.Errorf("reissue stage: %s not signed by the new CA", f)
		}
	}
	if !bytes.Equal(certsOf(reissue["/etc/kubernetes/pki/ca-signer.crt"].Data)[0].Raw, newCA.Raw) ||
		string(reissue["/etc/kubernetes/pki/sa.key"].Data) == string(before["/etc/kubernetes/pki/sa.key"].Data) {
		t.Error("reissue stage: the controller-manager and the token signer should use the new CA and key")
	}
	// etcd's bundle is reordered, not changed, and its reissued certificates keep their keys: it reads
	// them at each connection, so its manifest (which restarts it) stays.
	if bytes.Equal(reissue["/etc/kubernetes/pki/etcd/ca.crt"].Data, trust["/etc/kubernetes/pki/etcd/ca.crt"].Data) ||
		bytes.Equal(reissue["/etc/kubernetes/pki/etcd/server.crt"].Data, trust["/etc/kubernetes/pki/etcd/server.crt"].Data) {
		t.Error("reissue stage: etcd's bundle should be reordered and its serving certificate reissued")
	}
	if !bytes.Equal(reissue["/etc/kubernetes/manifests/etcd.yaml"].Data, trust["/etc/kubernetes/manifests/etcd.yaml"].Data) {
		t.Error("reissue stage: etcd's manifest changed; etcd would restart for a reordered bundle")
	}
	for _, m := range []string{"kube-apiserver.yaml", "kube-controller-manager.yaml"} {
		if bytes.Equal(reissue["/etc/kubernetes/manifests/"+m].Data, trust["/etc/kubernetes/manifests/"+m].Data) {
			t.Errorf("reissue stage: %s should change (its certificates and signer did)", m)
		}
	}

	stage(pki.StageSign)
	sign := files(renderLab(t, state), "cp1")
	for p, f := range reissue {
		if !bytes.Equal(sign[p].Data, f.Data) {
			t.Errorf("sign stage: %s differs from the reissue stage's; nothing should restart", p)
		}
	}

	stage(pki.StageFinish)
	finish := files(renderLab(t, state), "cp1")
	if b := certsOf(finish[kubeadm.CACert].Data); len(b) != 1 || !b[0].Equal(newCA) {
		t.Error("finish stage: ca.crt should be the new CA alone")
	}
	if _, ok := finish["/etc/kubernetes/pki/ca-signer.crt"]; ok || cmFlag(finish) != kubeadm.CACert {
		t.Error("finish stage: the controller-manager should sign with ca.crt again")
	}
	if signerFlag(finish, "kubelet-serving") != "/etc/kubernetes/pki/kubelet-serving-ca.crt" || len(certsOf(finish["/etc/kubernetes/pki/kubelet-serving-ca.crt"].Data)) != 1 {
		t.Error("finish stage: the controller-manager should sign serving certificates with kubelet-serving-ca.crt, the new CA alone")
	}
	if err := store.EndRotation(); err != nil {
		t.Fatal(err)
	}
	after := files(renderLab(t, state), "cp1")
	for p, f := range finish {
		if string(after[p].Data) != string(f.Data) {
			t.Errorf("%s changed after the rotation ended", p)
		}
	}
}

func nextCert(data []byte) (*x509.Certificate, []byte, bool) {
	for {
		b, rest := pem.Decode(data)
		if b == nil {
			return nil, nil, false
		}
		data = rest
		if b.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(b.Bytes)
			return c, rest, err == nil
		}
	}
}

// TestLocalProxyFollowsTheClusterControlPlanes: without a controlPlaneEndpoint, several control-plane nodes
// put every node behind its local proxy; control-plane hosts the inventory lists but the cluster does not
// have (not joined, not joining) count for nothing.
func TestLocalProxyFollowsTheClusterControlPlanes(t *testing.T) {
	inv, diags := inventory.Parse("hosts.yaml", []byte(`
cluster: {name: lab}
hosts:
  - {name: cp1, address: 10.10.0.11, roles: [control-plane]}
  - {name: cp2, address: 10.10.0.12, roles: [control-plane]}
  - {name: cp3, address: 10.10.0.13, roles: [control-plane]}
  - {name: w1, address: 10.10.0.21, roles: [worker]}
`))
	if err := diags.Err(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	os.MkdirAll(state, 0o700)
	render := func(cps []string) *Result {
		res, err := Render(Options{Inv: inv, StateDir: state, Images: testImages(inv), ControlPlanes: cps})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	one := render([]string{"cp1"})
	if one.NodeEndpoint != "https://10.10.0.11:6443" || len(one.Hosts) != 2 {
		t.Errorf("cp1 alone: endpoint %s, %d hosts rendered", one.NodeEndpoint, len(one.Hosts))
	}
	if _, ok := files(one, "w1")[kubeadm.APIServerProxyConfig]; ok {
		t.Error("cp1 alone: w1 got a proxy configuration")
	}
	two := render([]string{"cp1", "cp2"})
	cfg := string(files(two, "w1")[kubeadm.APIServerProxyConfig].Data)
	if two.NodeEndpoint != "https://127.0.0.1:7443" || !strings.Contains(cfg, "10.10.0.12:6443") || strings.Contains(cfg, "10.10.0.13") {
		t.Errorf("cp1 and cp2: endpoint %s, proxy:\n%s", two.NodeEndpoint, cfg)
	}
	// The proxy is a static Pod from the proxy image, restarted when its configuration changes.
	pod := string(files(two, "w1")[kubeadm.Manifest(kubeadm.APIServerProxy)].Data)
	sum := sha256.Sum256([]byte(cfg))
	if !strings.Contains(pod, "image: "+testImages(inv).Ref(images.APIServerProxy)) || !strings.Contains(pod, hex.EncodeToString(sum[:])) ||
		!strings.Contains(pod, "path: "+kubeadm.APIServerProxyConfig) {
		t.Errorf("proxy Pod:\n%s", pod)
	}
	if etcd := string(files(two, "cp2")["/etc/kubernetes/manifests/etcd.yaml"].Data); strings.Contains(etcd, "cp3=") {
		t.Error("cp2's etcd names cp3 as a peer")
	}
}

// A kubeconfig of the state directory holds a client key: one others can read is refused, as a key is.
func TestLooseKubeconfigsAreRefused(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	os.MkdirAll(state, 0o700)
	renderLab(t, state)
	inv, _ := inventory.Parse("hosts.yaml", []byte(hostsYAML))
	for _, f := range []string{"admin.conf", "kubeconfig/super-admin.conf"} {
		p := filepath.Join(state, f)
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Render(Options{Inv: inv, StateDir: state, Images: testImages(inv)})
		if err == nil || !strings.Contains(err.Error(), "chmod 600 "+p) {
			t.Errorf("%s at 0644: %v", f, err)
		}
		os.Chmod(p, 0o600)
	}
}

// Render does not rely on validation alone for what would change the shape of a file: a kubelet flag value
// with a newline (a new line of kubeadm-flags.env) is refused even in an inventory that skipped validation.
func TestRenderRefusesHostileKubeletFlags(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	os.MkdirAll(state, 0o700)
	inv, _ := inventory.Parse("hosts.yaml", []byte(hostsYAML))
	inv.Cluster.Kubelet.ExtraArgs = inventory.Args{{Name: "v", Value: "2\nLD_PRELOAD=/tmp/x.so"}}
	_, err := Render(Options{Inv: inv, StateDir: state, Images: testImages(inv)})
	if err == nil || !strings.Contains(err.Error(), "kubeadm-flags.env") {
		t.Errorf("got %v", err)
	}
}

// testImages pins the etcd and pause versions the goldens were made with.
func testImages(inv *inventory.Inventory) images.Set {
	s := images.For(inv.Cluster.ImageRepository, inv.Cluster.KubernetesVersion)
	s.Etcd, s.Pause = "3.6.5", "3.10.1"
	return s
}

// With a private registry, every host gets containerd's hosts.toml and the registry's CA beside it, and,
// when credentials are given, the kubelet's config.json (0600); the runtime install adds containerd's unit,
// a configuration in containerd 2's format and crictl's.
func TestRegistryAndRuntimeFiles(t *testing.T) {
	inv, diags := inventory.Parse("hosts.yaml", []byte(hostsYAML))
	if err := diags.Err(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	os.MkdirAll(state, 0o700)
	caPEM := files(renderLab(t, state), "w1")[kubeadm.CACert].Data // any certificate will do
	res, err := Render(Options{Inv: inv, StateDir: state, Images: testImages(inv), InstallRuntime: true,
		Registry: &Registry{Host: "registry.example:5000", CA: caPEM, Username: "puller", Password: "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	w1 := files(res, "w1")
	hosts := string(w1["/etc/containerd/certs.d/registry.example:5000/hosts.toml"].Data)
	if !strings.Contains(hosts, `server = "https://registry.example:5000"`) || !strings.Contains(hosts, `ca = "/etc/containerd/certs.d/registry.example:5000/ca.crt"`) {
		t.Errorf("hosts.toml:\n%s", hosts)
	}
	if string(w1["/etc/containerd/certs.d/registry.example:5000/ca.crt"].Data) != string(caPEM) {
		t.Error("the registry's CA is not beside hosts.toml")
	}
	auth := w1[kubeadm.KubeletRegistryAuth]
	if auth.Mode != 0o600 || !strings.Contains(string(auth.Data), `"registry.example:5000"`) || !strings.Contains(string(auth.Data), base64.StdEncoding.EncodeToString([]byte("puller:s3cret"))) {
		t.Errorf("config.json (%v):\n%s", auth.Mode, auth.Data)
	}
	cfg := string(w1[kubeadm.ContainerdConfig].Data)
	for _, want := range []string{"version = 3", `config_path = "/etc/containerd/certs.d"`, `BinaryName = "/usr/local/sbin/runc"`, `bin_dirs = ["/opt/cni/bin"]`} {
		if !strings.Contains(cfg, want) {
			t.Errorf("containerd's configuration has no %s:\n%s", want, cfg)
		}
	}
	if unit := string(w1[kubeadm.ContainerdUnit].Data); !strings.Contains(unit, "ExecStart=/usr/local/bin/containerd\n") || !strings.Contains(unit, "KillMode=process") {
		t.Errorf("containerd's unit:\n%s", unit)
	}
	if _, ok := w1[kubeadm.CrictlConfig]; !ok {
		t.Error("no crictl configuration")
	}
	if _, err := Render(Options{Inv: inv, StateDir: state, Images: testImages(inv), Registry: &Registry{Host: "r", CA: []byte("not PEM")}}); err == nil {
		t.Error("a registry CA that is not a certificate was accepted")
	}
}

// External etcd: etcd hosts get their member's certificates, unit and initial cluster, and nothing of a
// node; control-plane hosts get no etcd static Pod, no etcd server or peer certificate and no etcd CA key,
// and their API servers use every member.
func TestExternalEtcdFiles(t *testing.T) {
	inv, diags := inventory.Parse("hosts.yaml", []byte(`
cluster: {name: lab}
hosts:
  - {name: e1, address: 10.10.0.31, roles: [etcd]}
  - {name: e2, address: 10.10.0.32, roles: [etcd]}
  - {name: cp1, address: 10.10.0.11, roles: [control-plane, etcd]}
  - {name: w1, address: 10.10.0.21, roles: [worker]}
`))
	if err := diags.Err(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	os.MkdirAll(state, 0o700)
	res, err := Render(Options{Inv: inv, StateDir: state, Images: testImages(inv)})
	if err != nil {
		t.Fatal(err)
	}
	e1 := files(res, "e1")
	var paths []string
	for p := range e1 {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	want := []string{kubeadm.EtcdInitialEnv, "/etc/kubernetes/pki/etcd/ca.crt", "/etc/kubernetes/pki/etcd/healthcheck-client.crt",
		"/etc/kubernetes/pki/etcd/healthcheck-client.key", "/etc/kubernetes/pki/etcd/peer.crt", "/etc/kubernetes/pki/etcd/peer.key",
		"/etc/kubernetes/pki/etcd/server.crt", "/etc/kubernetes/pki/etcd/server.key", kubeadm.EtcdUnit}
	slices.Sort(want)
	if !slices.Equal(paths, want) {
		t.Errorf("e1's files:\n%s\nwant\n%s", strings.Join(paths, "\n"), strings.Join(want, "\n"))
	}
	env := string(e1[kubeadm.EtcdInitialEnv].Data)
	if !strings.Contains(env, "ETCD_INITIAL_CLUSTER=e1=https://10.10.0.31:2380,e2=https://10.10.0.32:2380,cp1=https://10.10.0.11:2380\n") ||
		!strings.Contains(env, "ETCD_INITIAL_CLUSTER_STATE=new") {
		t.Errorf("e1's initial cluster:\n%s", env)
	}
	cp1 := files(res, "cp1")
	for _, p := range []string{"/etc/kubernetes/manifests/etcd.yaml", "/etc/kubernetes/pki/etcd/ca.key"} {
		if _, ok := cp1[p]; ok {
			t.Errorf("cp1 got %s", p)
		}
	}
	if _, ok := cp1[kubeadm.EtcdUnit]; !ok {
		t.Error("cp1, an etcd host, has no etcd unit")
	}
	api := string(cp1["/etc/kubernetes/manifests/kube-apiserver.yaml"].Data)
	if !strings.Contains(api, "--etcd-servers=https://10.10.0.31:2379,https://10.10.0.32:2379,https://10.10.0.11:2379") {
		t.Errorf("API server's etcd servers:\n%s", api)
	}
	if _, ok := files(res, "w1")[kubeadm.EtcdUnit]; ok {
		t.Error("w1 got an etcd unit")
	}
	// A host joining the running etcd cluster gets the members it joins, state existing; the others'
	// units do not change.
	unit := e1[kubeadm.EtcdUnit].Data
	res2, err := Render(Options{Inv: inv, StateDir: state, Images: testImages(inv),
		EtcdJoin: map[string][]manifests.EtcdMember{"e2": {{Name: "e1", PeerURL: "https://10.10.0.31:2380"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if env := string(files(res2, "e2")[kubeadm.EtcdInitialEnv].Data); !strings.Contains(env, "ETCD_INITIAL_CLUSTER=e1=https://10.10.0.31:2380,e2=https://10.10.0.32:2380\n") ||
		!strings.Contains(env, "STATE=existing") {
		t.Errorf("e2 joining:\n%s", env)
	}
	if !bytes.Equal(files(res2, "e1")[kubeadm.EtcdUnit].Data, unit) {
		t.Error("e1's unit changed when e2 joined")
	}
}

// TestLeafRotationKeepsEtcdRunning: etcd reads its serving and peer certificates again at each new
// connection, so renewing them with their keys kept leaves etcd's manifest as it was (no restart), while the
// API server's, which reads its certificates at start, changes; new keys change etcd's manifest too.
func TestLeafRotationKeepsEtcdRunning(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	os.MkdirAll(state, 0o700)
	inv, diags := inventory.Parse("hosts.yaml", []byte(hostsYAML))
	if err := diags.Err(); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	render := func(later time.Time, renew *Renewal) map[string]transport.File {
		t.Helper()
		res, err := Render(Options{Inv: inv, StateDir: state, Images: testImages(inv), Renew: renew, Now: func() time.Time { return later }})
		if err != nil {
			t.Fatal(err)
		}
		return files(res, "cp2")
	}
	const (
		etcd   = "/etc/kubernetes/manifests/etcd.yaml"
		api    = "/etc/kubernetes/manifests/kube-apiserver.yaml"
		server = "/etc/kubernetes/pki/etcd/server.crt"
		key    = "/etc/kubernetes/pki/etcd/server.key"
	)
	before := files(renderLab(t, state), "cp2")
	renewed := render(now.Add(48*time.Hour), &Renewal{IssuedBefore: now.Add(time.Hour)})
	if bytes.Equal(renewed[server].Data, before[server].Data) || !bytes.Equal(renewed[key].Data, before[key].Data) {
		t.Fatal("the rotation should renew etcd's serving certificate and keep its key")
	}
	if !bytes.Equal(renewed[etcd].Data, before[etcd].Data) {
		t.Error("renewing etcd's certificates with their keys kept changed etcd's manifest (a restart it does not need)")
	}
	if bytes.Equal(renewed[api].Data, before[api].Data) {
		t.Error("renewing the API server's certificates left its manifest unchanged (it reads them at start)")
	}
	newKeys := render(now.Add(96*time.Hour), &Renewal{IssuedBefore: now.Add(72 * time.Hour), NewKeys: true})
	if bytes.Equal(newKeys[key].Data, renewed[key].Data) || bytes.Equal(newKeys[etcd].Data, renewed[etcd].Data) {
		t.Error("new keys should change etcd's manifest (a restart with the new pair)")
	}
}
