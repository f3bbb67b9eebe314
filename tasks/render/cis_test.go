package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/transport"
)

// renderCIS renders a control-plane node and a worker under profile cis (or without it), the worker's
// images pulled from a registry when pull is set.
func renderCIS(t *testing.T, profile string, pull bool) *Result {
	t.Helper()
	dir := t.TempDir()
	yml := "cluster:\n  name: lab\n"
	if pull {
		yml += "  registry:\n    pull: true\n"
	}
	if profile != "" {
		yml += "  security:\n    profile: " + profile + "\n"
	}
	yml += "hosts:\n  - {name: cp1, address: 10.10.0.11, roles: [control-plane]}\n  - {name: w1, address: 10.10.0.21, roles: [worker]}\n"
	inv, diags := inventory.Parse(filepath.Join(dir, "hosts.yaml"), []byte(yml))
	if err := diags.Err(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	r, err := Render(Options{Inv: inv, StateDir: state, Images: testImages(inv), Now: time.Now, EtcdIDs: map[string][2]int{"cp1": {997, 996}, "w1": {998, 998}},
		Hostnames: map[string]string{"cp1": "CP1", "w1": "w1.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Profile cis: the benchmark's settings in every file they belong to; none of them without it.
func TestCIS(t *testing.T) {
	r := renderCIS(t, "cis", true)
	cp1, w1 := files(r, "cp1"), files(r, "w1")
	api := string(cp1[kubeadm.Manifest(kubeadm.APIServer)].Data)
	for _, want := range []string{"--enable-admission-plugins=NodeRestriction,EventRateLimit,DenyServiceExternalIPs,AlwaysPullImages",
		"--service-account-extend-token-expiration=false", "--service-account-lookup=true", "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,"} {
		if !strings.Contains(api, want) {
			t.Errorf("the API server lacks %s", want)
		}
	}
	if adm := string(cp1[kubeadm.AdmissionConfig].Data); !strings.Contains(adm, "enforce: restricted") || !strings.Contains(adm, "name: EventRateLimit") || !strings.Contains(adm, "type: Namespace") {
		t.Errorf("admission configuration:\n%s", adm)
	}
	if cm := string(cp1[kubeadm.Manifest(kubeadm.ControllerManager)].Data); !strings.Contains(cm, "--terminated-pod-gc-threshold=1000") || !strings.Contains(cm, "--tls-cipher-suites=") {
		t.Errorf("controller-manager:\n%s", cm)
	}
	if s := string(cp1[kubeadm.Manifest(kubeadm.Scheduler)].Data); !strings.Contains(s, "--tls-cipher-suites=") {
		t.Errorf("scheduler:\n%s", s)
	}
	etcd := string(cp1[kubeadm.Manifest(kubeadm.Etcd)].Data)
	for _, want := range []string{"runAsUser: 997", "runAsGroup: 996", "runAsNonRoot: true", "--key-file=/etc/kubernetes/etcd-keys/server.key",
		"--peer-key-file=/etc/kubernetes/etcd-keys/peer.key", "--cipher-suites=", "path: /etc/kubernetes/etcd-keys", "- ALL"} {
		if !strings.Contains(etcd, want) {
			t.Errorf("etcd's manifest lacks %q:\n%s", want, etcd)
		}
	}
	for _, k := range []string{"server.key", "peer.key"} {
		own, orig := cp1[kubeadm.EtcdKeysDir+"/"+k], cp1[kubeadm.PKIDir+"/etcd/"+k]
		if own.UID != 997 || own.GID != 996 || own.Mode != 0o600 || string(own.Data) != string(orig.Data) || orig.UID != 0 || orig.Mode != 0o600 {
			t.Errorf("%s: etcd's copy %d:%d %04o, the PKI directory's %d:%d %04o", k, own.UID, own.GID, own.Mode, orig.UID, orig.GID, orig.Mode)
		}
	}
	// The kubelet names its node by its hostname when that is the node's name (cp1), else it is told (w1).
	if f := string(cp1[kubeadm.KubeletFlags].Data); strings.Contains(f, "hostname-override") {
		t.Errorf("cp1's kubelet flags: %s", f)
	}
	if f := string(w1[kubeadm.KubeletFlags].Data); !strings.Contains(f, "--hostname-override=w1") {
		t.Errorf("w1's kubelet flags: %s", f)
	}
	if _, ok := w1[kubeadm.EtcdKeysDir+"/server.key"]; ok {
		t.Error("a worker got etcd's keys")
	}
	for _, host := range []map[string]transport.File{cp1, w1} {
		kc := string(host[kubeadm.KubeletConfig].Data)
		for _, want := range []string{"protectKernelDefaults: true", "seccompDefault: true", "podPidsLimit: 4096", "eventRecordQPS: 50",
			"streamingConnectionIdleTimeout: 5m0s", "tlsCipherSuites:"} {
			if !strings.Contains(kc, want) {
				t.Errorf("the kubelet's configuration lacks %q:\n%s", want, kc)
			}
		}
		for _, p := range []string{kubeadm.KubeletConfig, kubeadm.KubeletDropIn, kubeadm.KubeletUnit, kubeadm.KubeletFlags} {
			if host[p].Mode != 0o600 {
				t.Errorf("%s: mode %04o", p, host[p].Mode)
			}
		}
		if s := string(host[kubeadm.SysctlConfig].Data); !strings.Contains(s, "kernel.panic = 10\n") || !strings.Contains(s, "vm.overcommit_memory = 1\n") {
			t.Errorf("kernel settings:\n%s", s)
		}
	}

	// Images imported, not pulled: no AlwaysPullImages (nothing to pull them from).
	if api := string(files(renderCIS(t, "cis", false), "cp1")[kubeadm.Manifest(kubeadm.APIServer)].Data); !strings.Contains(api, "--enable-admission-plugins=NodeRestriction,EventRateLimit,DenyServiceExternalIPs\n") {
		t.Errorf("imported images, yet:\n%s", api)
	}

	// Without the profile: kubeadm's settings.
	d := files(renderCIS(t, "", true), "cp1")
	if etcd := string(d[kubeadm.Manifest(kubeadm.Etcd)].Data); strings.Contains(etcd, "runAsUser") || strings.Contains(etcd, "etcd-keys") {
		t.Errorf("etcd runs as a user without the profile:\n%s", etcd)
	}
	if f := string(d[kubeadm.KubeletFlags].Data); !strings.Contains(f, "--hostname-override=cp1") {
		t.Errorf("cp1's kubelet flags without the profile: %s", f)
	}
	if api := string(d[kubeadm.Manifest(kubeadm.APIServer)].Data); !strings.Contains(api, "--enable-admission-plugins=NodeRestriction\n") || strings.Contains(api, "tls-cipher-suites") {
		t.Errorf("the API server without the profile:\n%s", api)
	}
	if d[kubeadm.KubeletConfig].Mode != 0o644 || strings.Contains(string(d[kubeadm.KubeletConfig].Data), "protectKernelDefaults") || strings.Contains(string(d[kubeadm.SysctlConfig].Data), "kernel.panic") {
		t.Error("the kubelet protects kernel defaults without the profile")
	}
	if adm := string(d[kubeadm.AdmissionConfig].Data); !strings.Contains(adm, "enforce: baseline") || strings.Contains(adm, "EventRateLimit") {
		t.Errorf("admission configuration without the profile:\n%s", adm)
	}
}

// External etcd under profile cis: each member's unit runs it as the etcd user, its data made that user's
// before each start, with its own copies of its keys.
func TestCISExternalEtcd(t *testing.T) {
	inv, diags := inventory.Parse("hosts.yaml", []byte(`
cluster: {name: lab, security: {profile: cis}}
hosts:
  - {name: e1, address: 10.10.0.31, roles: [etcd]}
  - {name: cp1, address: 10.10.0.11, roles: [control-plane]}
`))
	if err := diags.Err(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	res, err := Render(Options{Inv: inv, StateDir: state, Images: testImages(inv), Now: time.Now, EtcdIDs: map[string][2]int{"e1": {990, 990}, "cp1": {991, 991}}})
	if err != nil {
		t.Fatal(err)
	}
	e1 := files(res, "e1")
	unit := string(e1[kubeadm.EtcdUnit].Data)
	for _, want := range []string{"User=990\n", "Group=990\n", "ExecStartPre=+/bin/chown -R 990:990 /var/lib/etcd\n", "--key-file=/etc/kubernetes/etcd-keys/server.key",
		"--peer-key-file=/etc/kubernetes/etcd-keys/peer.key", "--cipher-suites="} {
		if !strings.Contains(unit, want) {
			t.Errorf("e1's etcd unit lacks %q:\n%s", want, unit)
		}
	}
	if k := e1[kubeadm.EtcdKeysDir+"/peer.key"]; k.UID != 990 || k.Mode != 0o600 || len(k.Data) == 0 {
		t.Errorf("e1's copy of its peer key: %d %04o %d bytes", k.UID, k.Mode, len(k.Data))
	}
	if _, ok := files(res, "cp1")[kubeadm.EtcdKeysDir+"/server.key"]; ok {
		t.Error("cp1, no etcd member, got etcd's keys")
	}
}
