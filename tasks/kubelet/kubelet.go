// Package kubelet makes the kubelet's configuration (a typed KubeletConfiguration), its per-node flags and
// its systemd unit, as kubeadm lays them out: /var/lib/kubelet/config.yaml, /var/lib/kubelet/kubeadm-flags.env,
// /etc/systemd/system/kubelet.service and its 10-kubeadm.conf drop-in.
package kubelet

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/templates"
)

// Params are the cluster-wide settings of every kubelet.
type Params struct {
	ClusterDNS               string // the DNS Service's address (the tenth of the service subnet)
	ClusterDomain            string
	ContainerRuntimeEndpoint string
	// FailCgroupV1 is the inventory's cluster.kubelet.failCgroupV1 (nil: the kubelet's default, true).
	FailCgroupV1 *bool
	// CIS: profile cis (CISConfig).
	CIS bool
}

// Config is the KubeletConfiguration of every node: webhook authentication and authorization (no anonymous
// access), the cluster CA for client certificates, cluster DNS, the systemd cgroup driver, client certificate
// rotation and serving certificates through CSRs (serverTLSBootstrap; clusterctl approves them after
// checking them), and static Pods from /etc/kubernetes/manifests.
func Config(p Params) *kubeletv1beta1.KubeletConfiguration {
	f, t := false, true
	zero := metav1.Duration{}
	kc := &kubeletv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
		Authentication: kubeletv1beta1.KubeletAuthentication{
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: kubeadm.CACert},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: &t, CacheTTL: zero},
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: &f},
		},
		Authorization: kubeletv1beta1.KubeletAuthorization{
			Mode:    kubeletv1beta1.KubeletAuthorizationModeWebhook,
			Webhook: kubeletv1beta1.KubeletWebhookAuthorization{CacheAuthorizedTTL: zero, CacheUnauthorizedTTL: zero},
		},
		CgroupDriver:             "systemd",
		ClusterDNS:               []string{p.ClusterDNS},
		ClusterDomain:            p.ClusterDomain,
		ContainerRuntimeEndpoint: p.ContainerRuntimeEndpoint,
		HealthzBindAddress:       "127.0.0.1",
		HealthzPort:              ptr(int32(10248)),
		RotateCertificates:       true,
		ServerTLSBootstrap:       true,
		StaticPodPath:            kubeadm.ManifestsDir,
		FailCgroupV1:             p.FailCgroupV1,
	}
	if p.CIS {
		cisConfig(kc)
	}
	return kc
}

// PodPidsLimit is the most processes (and threads) a Pod may have under profile cis: room for a JVM's or a
// Go server's threads, none for a fork bomb.
const PodPidsLimit = 4096

// cisConfig is what profile cis adds (the CIS Kubernetes Benchmark's section 4.2): the kubelet refuses to
// start on a kernel whose settings differ from its defaults (KernelDefaults; setup applies them), strong
// TLS cipher suites only, RuntimeDefault seccomp for containers that name no profile, a PID limit per Pod,
// events at a bounded rate, and idle streaming connections (exec, attach, port-forward) closed after
// 5 minutes.
func cisConfig(kc *kubeletv1beta1.KubeletConfiguration) {
	t := true
	kc.ProtectKernelDefaults = true
	kc.TLSCipherSuites = StrongCipherSuites
	kc.SeccompDefault = &t
	kc.PodPidsLimit = ptr(int64(PodPidsLimit))
	kc.EventRecordQPS = ptr(int32(50))
	kc.EventBurst = 100
	kc.StreamingConnectionIdleTimeout = metav1.Duration{Duration: 5 * time.Minute}
}

// StrongCipherSuites are the TLS 1.2 cipher suites profile cis leaves every component: ECDHE key exchange,
// AEAD ciphers, as the CIS benchmark lists them for the kubelet (its 4.2.12; the API server's 1.2.29
// allows these too). TLS 1.3's are Go's own and always on. ChaCha20-Poly1305's are named without the
// _SHA256 Go gives them; Kubernetes and etcd take both names.
var StrongCipherSuites = []string{
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
	"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
}

func ptr[T any](v T) *T { return &v }

// Marshal writes the configuration as YAML.
func Marshal(kc *kubeletv1beta1.KubeletConfiguration) ([]byte, error) {
	return yaml.Marshal(kc)
}

// Flags is the node's kubeadm-flags.env: its IP and name (unless override is false: the kubelet's own
// name for it, its hostname, is the node's), then the inventory's extra kubelet flags.
func Flags(nodeIP, nodeName string, override bool, extra [][2]string) ([]byte, error) {
	var args []string
	if nodeIP != "" {
		args = append(args, "--node-ip="+nodeIP)
	}
	if override {
		args = append(args, "--hostname-override="+nodeName)
	}
	for _, a := range extra {
		args = append(args, "--"+a[0]+"="+a[1])
	}
	// The flags go through an EnvironmentFile and systemd's word splitting: a value that could end the
	// quoted variable, start a new line or a new word is refused here too (the inventory refuses it first).
	for _, a := range args {
		if strings.ContainsFunc(a, func(r rune) bool { return r < 0x20 || r == 0x7f || strings.ContainsRune(" \t\"'\\$`;", r) }) {
			return nil, fmt.Errorf("kubelet flag %q: spaces, quotes, '\\', '$', '`', ';' and control characters cannot go into kubeadm-flags.env", a)
		}
	}
	return templates.Render("kubeadm-flags.env", map[string]string{"Args": strings.Join(args, " ")})
}

// InstanceConfig is the node's instance-config.yaml as kubeadm writes it: the runtime endpoint, which kubeadm
// reads (upgrade, certs) and merges into config.yaml when it rewrites that file.
func InstanceConfig(criEndpoint string) []byte {
	return []byte("containerRuntimeEndpoint: " + strconv.Quote(criEndpoint) + "\n")
}

// Unit and DropIn are the kubelet's systemd unit and kubeadm's drop-in for a kubelet binary at kubeletPath.
func Unit(kubeletPath string) ([]byte, error) {
	return templates.Render("kubelet.service", map[string]string{"KubeletPath": kubeletPath})
}

// DropIn is the 10-kubeadm.conf drop-in.
func DropIn(kubeletPath string) ([]byte, error) {
	return templates.Render("10-kubeadm.conf", map[string]string{"KubeletPath": kubeletPath})
}

// NthIP is the n-th address of a CIDR (the API server's Service is the first, CoreDNS's the tenth).
func NthIP(cidr string, n int) (string, error) {
	_, ipnet, err := net.ParseCIDR(cidr)
	if err != nil {
		return "", err
	}
	ip := ipnet.IP.To16()
	if v4 := ipnet.IP.To4(); v4 != nil {
		ip = v4
	}
	out := make(net.IP, len(ip))
	copy(out, ip)
	carry := n
	for i := len(out) - 1; i >= 0 && carry > 0; i-- {
		sum := int(out[i]) + carry
		out[i] = byte(sum)
		carry = sum >> 8
	}
	return out.String(), nil
}

// Setting is one kernel setting (sysctl) and its value.
type Setting struct{ Name, Value string }

// KernelDefaults are the kernel settings a kubelet with protectKernelDefaults requires as they are
// (k8s.io/kubernetes/pkg/kubelet/cm's setupKernelTunables): it refuses to start when one differs.
var KernelDefaults = []Setting{
	{"vm.overcommit_memory", "1"},
	{"vm.panic_on_oom", "0"},
	{"kernel.panic", "10"},
	{"kernel.panic_on_oops", "1"},
	{"kernel.keys.root_maxkeys", "1000000"},
	{"kernel.keys.root_maxbytes", "25000000"},
}
