package inventory

import (
	"reflect"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// A host's settings are the cluster's, then its groups' in order, then its own; the later value wins.
func TestNodeSettings(t *testing.T) {
	inv, diags := parse("hosts.yaml", []byte(`
cluster:
  nodeLabels: {site: a, tier: base}
  nodeTaints: [{key: dedicated, value: all, effect: NoSchedule}]
  kubelet:
    config: {maxPods: 100, systemReserved: {cpu: 1, memory: 1Gi}}
groups:
  - name: workers
    roles: [worker]
    labels: {tier: worker}
    kubelet: {systemReserved: {cpu: 500m}, evictionHard: {memory.available: 200Mi}}
  - name: big
    hosts: [w2]
    taints: [{key: dedicated, value: big, effect: NoSchedule}, {key: big, effect: PreferNoSchedule}]
    kubelet: {maxPods: 250}
hosts:
  - {name: cp1, address: 10.0.0.1, roles: [control-plane]}
  - {name: w1, address: 10.0.0.2, roles: [worker]}
  - {name: w2, address: 10.0.0.3, roles: [worker], labels: {tier: own}, kubelet: {systemReserved: null}}
`), "")
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	cp1, w1, w2 := inv.NodeSettings(&inv.Hosts[0]), inv.NodeSettings(&inv.Hosts[1]), inv.NodeSettings(&inv.Hosts[2])
	if want := map[string]string{"site": "a", "tier": "base"}; !reflect.DeepEqual(cp1.Labels, want) {
		t.Errorf("cp1 labels %v", cp1.Labels)
	}
	if want := map[string]string{"site": "a", "tier": "own"}; !reflect.DeepEqual(w2.Labels, want) {
		t.Errorf("w2 labels %v", w2.Labels)
	}
	if want := []Taint{{Key: "dedicated", Value: "big", Effect: "NoSchedule"}, {Key: "big", Effect: "PreferNoSchedule"}}; !reflect.DeepEqual(w2.Taints, want) {
		t.Errorf("w2 taints %v", w2.Taints)
	}
	base := &kubeletv1beta1.KubeletConfiguration{ClusterDomain: "cluster.local"}
	for _, c := range []struct {
		name    string
		s       NodeSettings
		maxPods int32
		cpu     string
		evicted bool
	}{{"cp1", cp1, 100, "1", false}, {"w1", w1, 100, "500m", true}, {"w2", w2, 250, "", true}} {
		kc, err := MergeKubelet(base, c.s.Kubelet)
		if err != nil {
			t.Fatal(err)
		}
		if kc.MaxPods != c.maxPods || kc.SystemReserved["cpu"] != c.cpu || (kc.EvictionHard["memory.available"] == "200Mi") != c.evicted || kc.ClusterDomain != "cluster.local" {
			t.Errorf("%s: maxPods %d, systemReserved %v, evictionHard %v, clusterDomain %q", c.name, kc.MaxPods, kc.SystemReserved, kc.EvictionHard, kc.ClusterDomain)
		}
	}
	if base.MaxPods != 0 {
		t.Error("MergeKubelet changed its base")
	}
}
