package hardening

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
)

func TestLoadKeys(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 2, 4, 30, 0, 0, time.UTC)
	// Reading alone makes nothing.
	if _, err := ReadKeys(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadKeys of an empty state directory: %v", err)
	}
	keys, created, err := LoadKeys(dir, now)
	if err != nil || !created {
		t.Fatalf("first load: created %v, %v", created, err)
	}
	if k := keys.Write(); k.Name != "key-20261202-043000" || len(k.Secret) != 32 || bytes.Equal(k.Secret, make([]byte, 32)) {
		t.Errorf("new key %q, %d bytes", k.Name, len(k.Secret))
	}
	info, err := os.Stat(filepath.Join(dir, KeysFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, %v", KeysFile, info, err)
	}
	again, created, err := LoadKeys(dir, now.Add(time.Hour))
	if err != nil || created || !bytes.Equal(again.Write().Secret, keys.Write().Secret) {
		t.Errorf("second load: created %v, %v: the key was not kept", created, err)
	}
	for name, content := range map[string]string{
		"no key":    `{"keys": []}`,
		"short key": `{"keys": [{"name": "k", "secret": "AAAA"}]}`,
		"bad name":  `{"keys": [{"name": "K:1", "secret": "` + strings.Repeat("A", 43) + `="}]}`,
		"two names": `{"keys": [{"name": "a", "secret": "` + strings.Repeat("A", 43) + `="}, {"name": "a", "secret": "` + strings.Repeat("A", 43) + `="}]}`,
	} {
		d := t.TempDir()
		os.WriteFile(filepath.Join(d, KeysFile), []byte(content), 0o600)
		if _, _, err := LoadKeys(d, now); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	d := t.TempDir()
	os.WriteFile(filepath.Join(d, KeysFile), []byte(`{"keys": []}`), 0o644)
	if _, _, err := LoadKeys(d, now); err == nil || !strings.Contains(err.Error(), "others can read") {
		t.Errorf("a keys file others can read: %v", err)
	}
}

func TestEncryptionConfig(t *testing.T) {
	k1, _ := NewKey(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), bytes.NewReader(bytes.Repeat([]byte{1}, 32)))
	k2, _ := NewKey(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), bytes.NewReader(bytes.Repeat([]byte{2}, 32)))
	data, err := EncryptionConfig([]string{"secrets", "configmaps"}, &Keys{Keys: []Key{k2, k1}})
	if err != nil {
		t.Fatal(err)
	}
	var cfg apiserverv1.EncryptionConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatal(err)
	}
	r := cfg.Resources[0]
	if len(cfg.Resources) != 1 || strings.Join(r.Resources, ",") != "secrets,configmaps" || len(r.Providers) != 2 ||
		r.Providers[0].Secretbox == nil || r.Providers[1].Identity == nil {
		t.Fatalf("%s", data)
	}
	if keys := r.Providers[0].Secretbox.Keys; len(keys) != 2 || keys[0].Name != k2.Name || keys[0].Secret != base64.StdEncoding.EncodeToString(k2.Secret) {
		t.Errorf("the write key is not first:\n%s", data)
	}
	if _, err := EncryptionConfig([]string{"secrets"}, &Keys{}); err == nil {
		t.Error("no key: accepted")
	}
}

func TestAuditChecks(t *testing.T) {
	own, err := yaml.Marshal(Policy())
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		policy, want string
	}{
		"clusterctl's":  {string(own), ""},
		"unknown field": {"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Metadata, verb: [get]}]\n", "unknown field"},
		"old version":   {"apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: Metadata}]\n", "want audit.k8s.io/v1"},
		"no rules":      {"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n", "no rules"},
		"bad level":     {"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: Everything}]\n", `level "Everything"`},
	} {
		err := CheckAuditPolicy("policy.yaml", []byte(tc.policy))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "cluster.security.audit.policy: policy.yaml")) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	webhook := "apiVersion: v1\nkind: Config\nclusters: [{name: w, cluster: {server: %s}}]\nusers: [{name: w, user: {}}]\ncontexts: [{name: w, context: {cluster: w, user: w}}]\ncurrent-context: w\n"
	if err := CheckAuditWebhook("w.conf", []byte(strings.ReplaceAll(webhook, "%s", "https://audit.example:8443/events"))); err != nil {
		t.Error(err)
	}
	if err := CheckAuditWebhook("w.conf", []byte(strings.ReplaceAll(webhook, "%s", "http://audit.example/events"))); err == nil || !strings.Contains(err.Error(), "not an https:// URL") {
		t.Errorf("a plain-HTTP webhook: %v", err)
	}
}

// The default policy never records a body: no rule is above Metadata, and Secrets, ConfigMaps and
// TokenReviews are named at Metadata before any rule that could raise them.
func TestPolicyLogsNoBodies(t *testing.T) {
	for i, r := range Policy().Rules {
		if r.Level != auditv1.LevelNone && r.Level != auditv1.LevelMetadata {
			t.Errorf("rule %d logs at %s", i, r.Level)
		}
	}
}

func TestFilesAndArgs(t *testing.T) {
	k, _ := NewKey(time.Now(), bytes.NewReader(make([]byte, 32)))
	s := inventory.Security{Audit: inventory.Audit{MaxAge: 7, MaxBackups: 3, MaxSize: 50},
		PodSecurity: inventory.PodSecurity{Enforce: "restricted", ExemptNamespaces: []string{"calico-system", "kube-system"}}}
	files, err := Files(Params{Security: s, Keys: &Keys{Keys: []Key{k}}, AuditWebhook: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
		if f.Mode != 0o600 || !Mounted(f.Path) {
			t.Errorf("%s: mode %04o, mounted %v", f.Path, f.Mode, Mounted(f.Path))
		}
	}
	if got := strings.Join(paths, " "); got != strings.Join([]string{kubeadm.AdmissionConfig, kubeadm.AuditPolicy, kubeadm.AuditWebhook, kubeadm.EncryptionConfig}, " ") {
		t.Errorf("files %s", got)
	}
	if !strings.Contains(string(files[0].Data), "enforce: restricted") || !strings.Contains(string(files[0].Data), "- kube-system\n      - calico-system\n      runtimeClasses") {
		t.Errorf("admission configuration:\n%s", files[0].Data)
	}
	var flags []string
	s.Audit.Webhook = "w.conf"
	for _, a := range APIServerArgs(&inventory.Cluster{Security: s}) {
		flags = append(flags, a.Name+"="+a.Value)
	}
	for _, want := range []string{"audit-log-maxage=7", "audit-log-maxbackup=3", "audit-log-maxsize=50", "audit-webhook-config-file=" + kubeadm.AuditWebhook,
		"encryption-provider-config=" + kubeadm.EncryptionConfig, "profiling=false", "audit-log-path=" + kubeadm.AuditLog} {
		if !strings.Contains(" "+strings.Join(flags, " ")+" ", " "+want+" ") {
			t.Errorf("the API server's flags lack %s: %v", want, flags)
		}
	}
}
