package addons

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestKubeProxy(t *testing.T) {
	objs, err := KubeProxy(Params{Endpoint: "https://10.0.0.1:6443", KubeProxyImage: "registry.k8s.io/kube-proxy:v1.34.4",
		ClusterCIDR: "10.244.0.0/16", NoConntrackTuning: true, KubeProxyArgs: [][2]string{{"v", "2"}}})
	if err != nil {
		t.Fatal(err)
	}
	var ds *appsv1.DaemonSet
	var cm *corev1.ConfigMap
	for _, o := range objs {
		switch x := o.(type) {
		case *appsv1.DaemonSet:
			ds = x
		case *corev1.ConfigMap:
			cm = x
		}
	}
	if ds == nil || cm == nil {
		t.Fatal("no DaemonSet or ConfigMap")
	}
	c := ds.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.k8s.io/kube-proxy:v1.34.4" || c.Command[len(c.Command)-1] != "--v=2" || !ds.Spec.Template.Spec.HostNetwork {
		t.Errorf("kube-proxy container: %+v", c)
	}
	for _, want := range []string{"clusterCIDR: 10.244.0.0/16", "mode: iptables", "maxPerCore: 0"} {
		if !strings.Contains(cm.Data["config.conf"], want) {
			t.Errorf("config.conf lacks %q:\n%s", want, cm.Data["config.conf"])
		}
	}
	if !strings.Contains(cm.Data["kubeconfig.conf"], "server: https://10.0.0.1:6443") {
		t.Errorf("kubeconfig.conf:\n%s", cm.Data["kubeconfig.conf"])
	}
}

func TestCoreDNS(t *testing.T) {
	objs := CoreDNS(Params{CoreDNSImage: "registry.k8s.io/coredns/coredns:v1.12.1", DNSDomain: "corp.local", DNSServiceIP: "10.96.0.10"})
	var svc *corev1.Service
	var deploy *appsv1.Deployment
	for _, o := range objs {
		switch x := o.(type) {
		case *corev1.Service:
			svc = x
		case *appsv1.Deployment:
			deploy = x
		}
	}
	if svc == nil || svc.Name != "kube-dns" || svc.Spec.ClusterIP != "10.96.0.10" || len(svc.Spec.Ports) != 3 {
		t.Errorf("kube-dns Service: %+v", svc)
	}
	if deploy == nil || deploy.Spec.Template.Spec.DNSPolicy != corev1.DNSDefault || deploy.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("CoreDNS Deployment: %+v", deploy)
	}
	if f := Corefile("corp.local"); !strings.Contains(f, "kubernetes corp.local in-addr.arpa ip6.arpa") || strings.Contains(f, "DOMAIN") {
		t.Errorf("Corefile:\n%s", f)
	}
}
