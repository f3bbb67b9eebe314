package addons

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/bootstrap"
	"github.com/clusterctl/clusterctl/tasks/images"
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

// The mode is kube-proxy's configuration's, and a changed mode rolls its Pods (the template's config hash).
func TestKubeProxyMode(t *testing.T) {
	config := func(mode string) (string, string) {
		objs, err := KubeProxy(Params{Endpoint: "https://10.0.0.1:6443", ClusterCIDR: "10.244.0.0/16", KubeProxyMode: mode})
		if err != nil {
			t.Fatal(err)
		}
		var conf, sum string
		for _, o := range objs {
			switch x := o.(type) {
			case *appsv1.DaemonSet:
				sum = x.Spec.Template.Annotations["clusterctl.dev/config-sha256"]
			case *corev1.ConfigMap:
				conf = x.Data["config.conf"]
			}
		}
		return conf, sum
	}
	ipt, iptSum := config("")
	nft, nftSum := config(inventory.ProxyNFTables)
	if !strings.Contains(ipt, "mode: iptables") || !strings.Contains(nft, "mode: nftables") {
		t.Errorf("configurations:\n%s\n%s", ipt, nft)
	}
	if iptSum == "" || iptSum == nftSum {
		t.Errorf("the Pods' config hash does not follow the mode: %q, %q", iptSum, nftSum)
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

// A new cluster's objects: the token (when a node joins) with cluster-info signed by it, kubeadm's
// ConfigMaps, and the addons with the set's images.
func TestClusterObjects(t *testing.T) {
	inv, diags := inventory.Parse("hosts.yaml", []byte("cluster: {name: c1, kubernetesVersion: v1.34.4}\nhosts:\n  - {name: cp1, address: 10.0.0.1, roles: [control-plane]}\n"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	token, err := bootstrap.NewToken("w1", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	set := images.For("registry.k8s.io", "v1.34.4")
	for _, tok := range []*bootstrap.Token{&token, nil} {
		var tokens []bootstrap.Token
		if tok != nil {
			tokens = append(tokens, *tok)
		}
		objs, err := ClusterObjects(ClusterParams{Cluster: inv.Cluster, NodeEndpoint: "https://10.0.0.1:6443", CAPEM: []byte("CA"),
			KubeletConfig: []byte("kind: KubeletConfiguration\n"), Tokens: tokens, Images: set})
		if err != nil {
			t.Fatal(err)
		}
		found := map[string]bool{}
		for _, o := range objs {
			switch x := o.(type) {
			case *corev1.Secret:
				found["secret "+x.Name] = true
			case *corev1.ConfigMap:
				found["configmap "+x.Name] = true
				if x.Name == "cluster-info" && len(x.Data) > 1 {
					t.Errorf("cluster-info signed for clusterctl's tokens (token %v): %v", tok != nil, x.Data)
				}
			case *appsv1.DaemonSet:
				if img := x.Spec.Template.Spec.Containers[0].Image; img != set.Ref(images.Proxy) {
					t.Errorf("kube-proxy image %s", img)
				}
				found["daemonset "+x.Name] = true
			case *appsv1.Deployment:
				found["deployment "+x.Name] = true
			}
		}
		for _, want := range []string{"configmap cluster-info", "configmap kubeadm-config", "configmap kubelet-config", "daemonset kube-proxy", "deployment coredns"} {
			if !found[want] {
				t.Errorf("token %v: no %s in %v", tok != nil, want, found)
			}
		}
		if found["secret "+token.SecretName()] != (tok != nil) {
			t.Errorf("token secret with token %v: %v", tok != nil, found)
		}
	}
}

// kubeadm-config carries the controller-manager's client rate, as its manifest does, and an inventory's
// extraArgs of the same name replace it.
func TestKubeadmConfigControllerManagerRate(t *testing.T) {
	for _, tc := range []struct{ extra, want, notWant string }{
		{"", "name: kube-api-qps\n    value: \"100\"", ""},
		{", controllerManager: {extraArgs: {kube-api-qps: \"7\"}}", "name: kube-api-qps\n    value: \"7\"", "name: kube-api-qps\n    value: \"100\""},
	} {
		inv, diags := inventory.Parse("hosts.yaml", []byte("cluster: {name: c1"+tc.extra+"}\nhosts:\n  - {name: cp1, address: 10.0.0.1, roles: [control-plane]}\n"))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		objs, err := ClusterObjects(ClusterParams{Cluster: inv.Cluster, NodeEndpoint: "https://10.0.0.1:6443", CAPEM: []byte("CA"),
			KubeletConfig: []byte("kind: KubeletConfiguration\n"), Images: images.For("registry.k8s.io", "v1.37.2")})
		if err != nil {
			t.Fatal(err)
		}
		var cfg string
		for _, o := range objs {
			if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == "kubeadm-config" {
				cfg = cm.Data["ClusterConfiguration"]
			}
		}
		// kubeadm upgrade writes the kubelet serving CA's flags too, and empties its own signing pair (the
		// controller-manager refuses it beside the per-signer ones).
		for _, w := range []string{"name: cluster-signing-cert-file\n    value: \"\"", "name: cluster-signing-kubelet-serving-cert-file\n    value: /etc/kubernetes/pki/kubelet-serving-ca.crt",
			"name: cluster-signing-kubelet-client-cert-file\n    value: /etc/kubernetes/pki/ca.crt", "name: kubelet-certificate-authority\n    value: /etc/kubernetes/pki/kubelet-serving-ca.crt",
			// and the hardening's flags and mounts, without which its manifests would lose encryption and audit.
			"name: encryption-provider-config\n    value: /etc/kubernetes/apiserver/encryption-config.yaml",
			"- hostPath: /etc/kubernetes/apiserver\n    mountPath: /etc/kubernetes/apiserver\n    name: apiserver-config\n    pathType: DirectoryOrCreate\n    readOnly: true",
			"scheduler:\n  extraArgs:\n  - name: profiling\n    value: \"false\""} {
			if !strings.Contains(cfg, w) {
				t.Errorf("kubeadm-config lacks %q:\n%s", w, cfg)
			}
		}
		if !strings.Contains(cfg, tc.want) || !strings.Contains(cfg, "name: kube-api-burst\n    value: \"200\"") ||
			tc.notWant != "" && strings.Contains(cfg, tc.notWant) {
			t.Errorf("extra %q: kubeadm-config:\n%s", tc.extra, cfg)
		}
	}
}
