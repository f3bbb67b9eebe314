package manifests

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

var uidRE = regexp.MustCompile(`(?m)^  uid: ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$`)

// A static Pod's UID is the manifest's own: the same manifest and node give the same UID (a kubelet of
// another version does not see a new Pod), another node or another manifest another one.
func TestMarshalUID(t *testing.T) {
	pod := APIServerProxy("docker.io/library/haproxy:3.2", "/etc/kubernetes/clusterctl-apiserver-proxy.cfg", "abc", 7443)
	a, err := Marshal(pod, "w1")
	if err != nil {
		t.Fatal(err)
	}
	m := uidRE.FindSubmatch(a)
	if m == nil {
		t.Fatalf("no uid:\n%s", a)
	}
	if b, _ := Marshal(pod, "w1"); !bytes.Equal(a, b) {
		t.Error("the same manifest marshalled twice differs")
	}
	if pod.UID != "" {
		t.Error("Marshal changed the Pod it was given")
	}
	if b, _ := Marshal(pod, "w2"); bytes.Equal(uidRE.FindSubmatch(b)[1], m[1]) {
		t.Error("two nodes' manifests have the same UID")
	}
	other := APIServerProxy("docker.io/library/haproxy:3.2", "/etc/kubernetes/clusterctl-apiserver-proxy.cfg", "abd", 7443)
	if b, _ := Marshal(other, "w1"); bytes.Equal(uidRE.FindSubmatch(b)[1], m[1]) {
		t.Error("a changed manifest kept its UID")
	}
}

// An external member's unit runs the static Pod's flags, every member in a new cluster's initial-cluster,
// the user's extra flags quoted for systemd, and names the certificates' digest.
func TestEtcdUnit(t *testing.T) {
	p := &Params{NodeName: "etcd1", AdvertiseAddress: "10.0.0.11",
		EtcdNew: []EtcdMember{{"etcd1", "https://10.0.0.11:2380"}, {"etcd2", "https://10.0.0.12:2380"}},
		Etcd:    Component{ExtraArgs: []Arg{{"quota-backend-bytes", "8589934592"}, {"log-level", "50% $x"}}}}
	unit, err := EtcdUnit(p, "/usr/local/bin/etcd", "d1g")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ExecStart=/usr/local/bin/etcd --advertise-client-urls=https://10.0.0.11:2379 ",
		"EnvironmentFile=-/etc/kubernetes/etcd-initial.env",
		" --quota-backend-bytes=8589934592 ",
		` "--log-level=50%% $$x"`,
		"Type=notify",
		"# Certificates: d1g",
	} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("unit lacks %q:\n%s", want, unit)
		}
	}
	if bytes.Contains(unit, []byte("--initial-cluster")) {
		t.Errorf("the unit has the initial cluster:\n%s", unit)
	}
	env, err := EtcdInitialEnv(p)
	if want := "ETCD_INITIAL_CLUSTER=etcd1=https://10.0.0.11:2380,etcd2=https://10.0.0.12:2380\nETCD_INITIAL_CLUSTER_STATE=new\n"; err != nil || !strings.HasSuffix(string(env), want) {
		t.Errorf("initial env: %q, %v; want it to end with %q", env, err, want)
	}
	p.Etcd.ExtraArgs = []Arg{{"name", "x\nExecStartPre=/bin/sh"}}
	if _, err := EtcdUnit(p, "/usr/local/bin/etcd", "d1g"); err == nil {
		t.Error("a newline in a flag made a unit")
	}
	p.EtcdNew, p.Etcd.ExtraArgs = nil, nil
	p.EtcdServers = []string{"https://10.0.0.11:2379", "https://10.0.0.12:2379"}
	var servers string
	for _, a := range APIServer(p).Spec.Containers[0].Command {
		if strings.HasPrefix(a, "--etcd-servers=") {
			servers = a
		}
	}
	if servers != "--etcd-servers=https://10.0.0.11:2379,https://10.0.0.12:2379" {
		t.Errorf("API server: %s", servers)
	}
}

// The controller-manager signs kubelet serving certificates with the kubelet serving CA and everything else
// with the cluster CA, through per-signer flags only (it refuses them beside --cluster-signing-cert-file);
// without the cluster CA's key it signs serving certificates only. The API server verifies kubelets with the
// kubelet serving CA.
func TestSigners(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Params
		want []string
		not  []string
	}{
		{"default", Params{}, []string{
			"--cluster-signing-kubelet-serving-cert-file=/etc/kubernetes/pki/kubelet-serving-ca.crt",
			"--cluster-signing-kubelet-serving-key-file=/etc/kubernetes/pki/kubelet-serving-ca.key",
			"--cluster-signing-kubelet-client-cert-file=/etc/kubernetes/pki/ca.crt",
			"--cluster-signing-kube-apiserver-client-key-file=/etc/kubernetes/pki/ca.key",
			"--cluster-signing-legacy-unknown-cert-file=/etc/kubernetes/pki/ca.crt",
		}, []string{"--cluster-signing-cert-file", "--cluster-signing-key-file"}},
		{"rotation", Params{Signer: "ca-signer", ServingSigner: "kubelet-serving-ca-signer"}, []string{
			"--cluster-signing-kubelet-serving-cert-file=/etc/kubernetes/pki/kubelet-serving-ca-signer.crt",
			"--cluster-signing-kubelet-client-key-file=/etc/kubernetes/pki/ca-signer.key",
		}, nil},
		{"external CA", Params{ExternalCA: true}, []string{
			"--cluster-signing-kubelet-serving-cert-file=/etc/kubernetes/pki/kubelet-serving-ca.crt",
		}, []string{"--cluster-signing-kubelet-client", "--cluster-signing-kube-apiserver-client", "--cluster-signing-cert-file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := strings.Join(ControllerManager(&tc.p).Spec.Containers[0].Command, "\n") + "\n"
			for _, w := range tc.want {
				if !strings.Contains(cmd, w+"\n") {
					t.Errorf("no %s in\n%s", w, cmd)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(cmd, n) {
					t.Errorf("%s in\n%s", n, cmd)
				}
			}
		})
	}
	api := strings.Join(APIServer(&Params{AdvertiseAddress: "10.0.0.1", BindPort: 6443}).Spec.Containers[0].Command, "\n")
	if !strings.Contains(api, "--kubelet-certificate-authority=/etc/kubernetes/pki/kubelet-serving-ca.crt") {
		t.Errorf("the API server does not verify kubelets with the kubelet serving CA:\n%s", api)
	}
}
