// Package addons makes the objects of kubeadm's two essential addons, as kubeadm's "addon" phase creates them:
// kube-proxy (ServiceAccount, RBAC, ConfigMap with its configuration and in-cluster kubeconfig, DaemonSet)
// and CoreDNS (ServiceAccount, RBAC, Corefile, Deployment, and the Service named kube-dns).
package addons

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/clusterctl/clusterctl/tasks/bootstrap"
)

// Params say how the addons are set up.
type Params struct {
	// Endpoint is the URL kube-proxy reaches the API server at (it runs before Services work).
	Endpoint        string
	ImageRepository string
	KubeProxyImage  string // default <repository>/kube-proxy:<KubernetesVersion>
	CoreDNSImage    string // default <repository>/coredns/coredns:<CoreDNSVersion>
	ClusterCIDR     string // the pod subnet
	DNSDomain       string
	DNSServiceIP    string // the tenth address of the service subnet
	// NoConntrackTuning leaves the kernel's conntrack table size and timeouts alone: in containers (nspawn,
	// kind) kube-proxy cannot write them, and they are the host's to set.
	NoConntrackTuning bool
	KubeProxyArgs     [][2]string
	KubeProxyMode     string // iptables (also when empty) or nftables
}

// KubeProxyName is kube-proxy's DaemonSet, ServiceAccount and ConfigMap, and its Pods' k8s-app label.
const KubeProxyName = kubeProxy

const (
	kubeProxy = "kube-proxy"
	coreDNS   = "coredns"
)

// KubeProxy is kube-proxy's ServiceAccount, RBAC, ConfigMap and DaemonSet (iptables or nftables mode: a
// changed mode rolls its Pods, and each removes the other mode's rules as it starts).
func KubeProxy(p Params) ([]runtime.Object, error) {
	confYAML, kubeconfig, err := kubeProxyConfig(p)
	if err != nil {
		return nil, err
	}
	image := p.KubeProxyImage
	command := []string{"/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf", "--hostname-override=$(NODE_NAME)"}
	for _, a := range p.KubeProxyArgs {
		command = append(command, "--"+a[0]+"="+a[1])
	}
	t := true
	labels := map[string]string{"k8s-app": kubeProxy}
	// kube-proxy reads its configuration at start: a changed one (a new API endpoint) rolls the Pods.
	sum := sha256.Sum256([]byte(string(confYAML) + kubeconfig))
	ds := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: kubeProxy, Namespace: bootstrap.KubeSystem, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
					"clusterctl.dev/config-sha256": hex.EncodeToString(sum[:])}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: kubeProxy, Image: image, ImagePullPolicy: corev1.PullIfNotPresent, Command: command,
						SecurityContext: &corev1.SecurityContext{Privileged: &t},
						Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: kubeProxy, MountPath: "/var/lib/kube-proxy"},
							{Name: "xtables-lock", MountPath: "/run/xtables.lock"},
							{Name: "lib-modules", MountPath: "/lib/modules", ReadOnly: true},
						},
					}},
					HostNetwork:        true,
					PriorityClassName:  "system-node-critical",
					ServiceAccountName: kubeProxy,
					NodeSelector:       map[string]string{corev1.LabelOSStable: "linux"},
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Volumes: []corev1.Volume{
						{Name: kubeProxy, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: kubeProxy}}}},
						hostPath("xtables-lock", "/run/xtables.lock", corev1.HostPathFileOrCreate),
						hostPath("lib-modules", "/lib/modules", ""),
					},
				},
			},
		},
	}
	return []runtime.Object{
		serviceAccount(kubeProxy),
		bootstrap.ClusterRoleBinding("kubeadm:node-proxier", "system:node-proxier",
			rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: kubeProxy, Namespace: bootstrap.KubeSystem}),
		bootstrap.SignComponentConfig(&corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: kubeProxy, Namespace: bootstrap.KubeSystem, Labels: map[string]string{"app": kubeProxy}},
			Data:       map[string]string{"config.conf": string(confYAML), "kubeconfig.conf": kubeconfig},
		}),
		// Joining nodes may read kube-proxy's configuration (kubeadm join does).
		bootstrap.GetRole(bootstrap.KubeSystem, kubeProxy, "configmaps", kubeProxy),
		bootstrap.RoleBinding(bootstrap.KubeSystem, kubeProxy,
			rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: bootstrap.NodeBootstrapGroup}),
		ds,
	}, nil
}

// kubeProxyConfig is kube-proxy's configuration file and its in-cluster kubeconfig.
func kubeProxyConfig(p Params) (confYAML []byte, kubeconfig string, err error) {
	conf := map[string]any{
		"apiVersion":       "kubeproxy.config.k8s.io/v1alpha1",
		"kind":             "KubeProxyConfiguration",
		"bindAddress":      "0.0.0.0",
		"clientConnection": map[string]any{"kubeconfig": "/var/lib/kube-proxy/kubeconfig.conf"},
		"clusterCIDR":      p.ClusterCIDR,
		"mode":             cmp.Or(p.KubeProxyMode, "iptables"),
	}
	if p.NoConntrackTuning {
		conf["conntrack"] = map[string]any{"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"}
	}
	confYAML, err = yaml.Marshal(conf)
	if err != nil {
		return nil, "", err
	}
	// The in-cluster kubeconfig: the ServiceAccount's token and CA, the API server's real address.
	kubeconfig = fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
    server: %s
  name: default
contexts:
- context:
    cluster: default
    namespace: default
    user: default
  name: default
current-context: default
users:
- name: default
  user:
    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
`, p.Endpoint)
	return confYAML, kubeconfig, nil
}

// Corefile is CoreDNS's configuration as kubeadm writes it.
func Corefile(domain string) string {
	return strings.ReplaceAll(`.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes DOMAIN in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success DOMAIN
       disable denial DOMAIN
    }
    loop
    reload
    loadbalance
}
`, "DOMAIN", domain)
}

// CoreDNS is CoreDNS's ServiceAccount, RBAC, ConfigMap, Deployment (two replicas, spread over nodes) and the
// kube-dns Service at the address kubelets give pods.
func CoreDNS(p Params) []runtime.Object {
	return []runtime.Object{
		serviceAccount(coreDNS),
		&rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
				{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
				{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
			},
		},
		bootstrap.ClusterRoleBinding("system:coredns", "system:coredns",
			rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: coreDNS, Namespace: bootstrap.KubeSystem}),
		&corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: coreDNS, Namespace: bootstrap.KubeSystem},
			Data:       map[string]string{"Corefile": Corefile(p.DNSDomain)},
		},
		coreDNSDeployment(p),
		coreDNSService(p),
	}
}

// coreDNSDeployment is kubeadm's CoreDNS Deployment: two replicas spread over nodes, probes, least privilege.
func coreDNSDeployment(p Params) *appsv1.Deployment {
	labels := map[string]string{"k8s-app": "kube-dns"}
	replicas := int32(2)
	f, t := false, true
	maxUnavailable := intstr.FromInt32(1)
	probe := func(path string, port int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP}},
			TimeoutSeconds: 5, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 5}
	}
	liveness := probe("/health", 8080)
	liveness.InitialDelaySeconds = 60
	// Readiness every second (kubeadm's manifest: the default 10 s): a new cluster's CoreDNS answers /ready
	// a second or two after it starts, and a 10 s period kept it unready, and up waiting, up to 8 s longer
	// (measured on the lab); 2 s, up to a second longer. Ten failures (10 s) take a replica out of the
	// Service.
	readiness := probe("/ready", 8181)
	readiness.PeriodSeconds, readiness.FailureThreshold = 1, 10
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: coreDNS, Namespace: bootstrap.KubeSystem, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &maxUnavailable}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					PriorityClassName:  "system-cluster-critical",
					ServiceAccountName: coreDNS,
					// CoreDNS forwards to the node's resolvers, not to itself.
					DNSPolicy:    corev1.DNSDefault,
					NodeSelector: map[string]string{corev1.LabelOSStable: "linux"},
					Tolerations: []corev1.Toleration{
						{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
						{Key: bootstrap.ControlPlaneLabel, Effect: corev1.TaintEffectNoSchedule},
					},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100,
							PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
								LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
									Key: "k8s-app", Operator: metav1.LabelSelectorOpIn, Values: []string{"kube-dns"}}}}}}}}},
					Containers: []corev1.Container{{
						Name: coreDNS, Image: p.CoreDNSImage, ImagePullPolicy: corev1.PullIfNotPresent,
						Args: []string{"-conf", "/etc/coredns/Corefile"},
						Resources: corev1.ResourceRequirements{
							Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"),
								corev1.ResourceMemory: resource.MustParse("70Mi")},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "config-volume", MountPath: "/etc/coredns", ReadOnly: true}},
						Ports: []corev1.ContainerPort{
							{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
							{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
							{Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP},
							{Name: "liveness-probe", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
							{Name: "readiness-probe", ContainerPort: 8181, Protocol: corev1.ProtocolTCP},
						},
						LivenessProbe:  liveness,
						ReadinessProbe: readiness,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: &f, ReadOnlyRootFilesystem: &t,
							Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"ALL"}},
						},
					}},
					Volumes: []corev1.Volume{{Name: "config-volume", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: coreDNS},
						Items:                []corev1.KeyToPath{{Key: "Corefile", Path: "Corefile"}}}}}},
				},
			},
		},
	}
}

// coreDNSService is the kube-dns Service at the cluster's DNS address.
func coreDNSService(p Params) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: bootstrap.KubeSystem,
			Labels:      map[string]string{"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"},
			Annotations: map[string]string{"prometheus.io/port": "9153", "prometheus.io/scrape": "true"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: p.DNSServiceIP,
			Selector:  map[string]string{"k8s-app": "kube-dns"},
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
				{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)},
			},
		},
	}
}

func serviceAccount(name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: bootstrap.KubeSystem},
	}
}

func hostPath(name, p string, t corev1.HostPathType) corev1.Volume {
	v := corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p}}}
	if t != "" {
		v.HostPath.Type = &t
	}
	return v
}
