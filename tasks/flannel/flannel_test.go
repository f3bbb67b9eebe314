package flannel

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/network"
)

func TestObjects(t *testing.T) {
	objs, err := Objects("registry.example:5000/flannel:v0.28.10", "10.244.0.0/16", "https://127.0.0.1:6443")
	if err != nil {
		t.Fatal(err)
	}
	var ds *appsv1.DaemonSet
	var conf string
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.DaemonSet:
			ds = o
		case *corev1.ConfigMap:
			conf = o.Data["net-conf.json"]
		case *corev1.Namespace:
			// enforced, and warned and audited at that level (the cluster's restricted defaults would warn)
			for _, mode := range []string{"enforce", "warn", "audit"} {
				if o.Labels["pod-security.kubernetes.io/"+mode] != "privileged" {
					t.Errorf("namespace %s: %s is not the privileged Pod Security level: flanneld runs on the host's network", o.Name, mode)
				}
			}
		}
	}
	if ds == nil {
		t.Fatal("no DaemonSet")
	}
	c := ds.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.example:5000/flannel:v0.28.10" || !ds.Spec.Template.Spec.HostNetwork {
		t.Errorf("image %s, hostNetwork %v", c.Image, ds.Spec.Template.Spec.HostNetwork)
	}
	for _, want := range []string{"--kube-subnet-mgr", "--ip-masq", "--iface=$(NODE_IP)"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %v lack %s", c.Args, want)
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["KUBERNETES_SERVICE_HOST"] != "127.0.0.1" || env["KUBERNETES_SERVICE_PORT"] != "6443" {
		t.Errorf("flanneld does not reach the API server at the nodes' endpoint: %v", env)
	}
	if c.SecurityContext.Privileged == nil || *c.SecurityContext.Privileged {
		t.Error("flanneld runs privileged; it needs NET_ADMIN and NET_RAW only")
	}
	var nc netConf
	if err := json.Unmarshal([]byte(conf), &nc); err != nil || nc.Network != "10.244.0.0/16" || nc.Backend.Type != "vxlan" || nc.Backend.Port != 8472 {
		t.Errorf("net-conf.json %s: %+v, %v", conf, nc, err)
	}
}

func TestCheckAndMTU(t *testing.T) {
	node := func(mtu int) network.Node {
		return network.Node{Host: "w1", IP: "10.0.0.2", Facts: &facts.Facts{
			Addresses: []facts.Address{{Iface: "eth0", CIDR: "10.0.0.2/24"}}, MTUs: map[string]int{"eth0": mtu}}}
	}
	if got := New(0, false).MTU(node(9001)); got != 8951 {
		t.Errorf("MTU of a 9001 interface: %d, want 8951", got)
	}
	if got := New(1400, false).MTU(node(1500)); got != 1400 {
		t.Errorf("cni.mtu 1400: %d", got)
	}
	if f := New(0, false).Check([]network.Node{node(1500)}); len(f) != 0 {
		t.Errorf("1500: %v", f)
	}
	f := New(0, false).Check([]network.Node{node(1320)})
	if len(f) != 1 || f[0].Check != network.CheckName || f[0].Host != "w1" || !strings.Contains(f[0].Message, "1270") {
		t.Errorf("1320 leaves 1270: %+v", f)
	}
	f = New(1480, false).Check([]network.Node{node(1500)})
	if len(f) != 1 || !strings.Contains(f[0].Message, "cni.mtu 1480") {
		t.Errorf("cni.mtu above what VXLAN leaves: %+v", f)
	}
}
