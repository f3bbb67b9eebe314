package render

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/clusterctl/clusterctl/inventory"
)

// The cluster's kubelet settings reach every node and the kubelet-config ConfigMap; a group's and a host's
// reach only their hosts, over the cluster's, and leave clusterctl's own fields as they are.
func TestKubeletSettings(t *testing.T) {
	inv, diags := inventory.Parse("hosts.yaml", []byte(`
cluster:
  kubelet:
    config: {maxPods: 150, systemReserved: {cpu: 1}}
groups:
  - {name: big, hosts: [w2], kubelet: {maxPods: 300}}
hosts:
  - {name: cp1, address: 10.10.0.11, roles: [control-plane]}
  - {name: w1, address: 10.10.0.21, roles: [worker]}
  - {name: w2, address: 10.10.0.22, roles: [worker], kubelet: {evictionHard: {memory.available: 300Mi}}}
`))
	if err := diags.Err(); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	os.MkdirAll(state, 0o700)
	r, err := Render(Options{Inv: inv, StateDir: state, Images: testImages(inv),
		Now: func() time.Time { return time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	read := func(what string, data []byte) *kubeletv1beta1.KubeletConfiguration {
		var kc kubeletv1beta1.KubeletConfiguration
		if err := yaml.UnmarshalStrict(data, &kc); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if kc.ClusterDNS[0] != "10.96.0.10" || !kc.ServerTLSBootstrap || *kc.Authentication.Anonymous.Enabled || kc.SystemReserved["cpu"] != "1" {
			t.Errorf("%s: clusterctl's settings or the cluster's lost: %+v", what, kc)
		}
		return &kc
	}
	for _, c := range []struct {
		what    string
		data    []byte
		maxPods int32
		evicts  string
	}{
		{"kubelet-config", r.KubeletConfig, 150, ""},
		{"cp1", files(r, "cp1")["/var/lib/kubelet/config.yaml"].Data, 150, ""},
		{"w1", files(r, "w1")["/var/lib/kubelet/config.yaml"].Data, 150, ""},
		{"w2", files(r, "w2")["/var/lib/kubelet/config.yaml"].Data, 300, "300Mi"},
	} {
		if kc := read(c.what, c.data); kc.MaxPods != c.maxPods || kc.EvictionHard["memory.available"] != c.evicts {
			t.Errorf("%s: maxPods %d, evictionHard %v", c.what, kc.MaxPods, kc.EvictionHard)
		}
	}
	if string(files(r, "w1")["/var/lib/kubelet/config.yaml"].Data) != string(r.KubeletConfig) {
		t.Error("w1, with no settings of its own, does not run the cluster's kubelet-config")
	}
}
