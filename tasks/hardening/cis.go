package hardening

import (
	"strings"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/kubelet"
	"github.com/clusterctl/clusterctl/tasks/manifests"
)

// Profile cis (inventory.ProfileCIS): what the CIS Kubernetes Benchmark v1.12 asks of the control plane
// beyond clusterctl's defaults. docs/security.md lists its checks and how each is met.

// cipherSuites is every component's --tls-cipher-suites under profile cis.
func cipherSuites() manifests.Arg {
	return manifests.Arg{Name: "tls-cipher-suites", Value: strings.Join(kubelet.StrongCipherSuites, ",")}
}

// AdmissionPlugins are the API server's admission plugins beyond its defaults: kubeadm's NodeRestriction;
// under profile cis EventRateLimit (its limits in the admission configuration) and
// DenyServiceExternalIPs, and AlwaysPullImages when the nodes pull images from a registry (with images
// imported from the artifacts there is nothing to pull them from: every Pod would fail to start).
func AdmissionPlugins(c *inventory.Cluster) string {
	plugins := []string{"NodeRestriction"}
	if c.Security.CIS() {
		plugins = append(plugins, "EventRateLimit", "DenyServiceExternalIPs")
		if c.Registry.Pull {
			plugins = append(plugins, "AlwaysPullImages")
		}
	}
	return strings.Join(plugins, ",")
}

// cisAPIServerArgs are the API server's flags under profile cis: the admission plugins, strong ciphers,
// service-account tokens checked against their Secret or Pod still existing (the default, written out),
// and no tokens valid for a year in place of their hour (kubeadm's default extends them for clients that
// do not reload their token; every supported client does).
func cisAPIServerArgs(c *inventory.Cluster) []manifests.Arg {
	return []manifests.Arg{
		{Name: "enable-admission-plugins", Value: AdmissionPlugins(c)},
		{Name: "service-account-extend-token-expiration", Value: "false"},
		{Name: "service-account-lookup", Value: "true"},
		cipherSuites(),
	}
}

// TerminatedPodGCThreshold is how many terminated Pods the controller-manager keeps under profile cis
// (kubeadm's default is 12500).
const TerminatedPodGCThreshold = "1000"

// ControllerManagerArgs are the controller-manager's flags: no profiling; under profile cis strong
// ciphers and the terminated-Pod GC threshold.
func ControllerManagerArgs(s inventory.Security) []manifests.Arg {
	args := []manifests.Arg{{Name: "profiling", Value: "false"}}
	if s.CIS() {
		args = append(args, manifests.Arg{Name: "terminated-pod-gc-threshold", Value: TerminatedPodGCThreshold}, cipherSuites())
	}
	return args
}

// SchedulerArgs are the scheduler's flags: no profiling; under profile cis strong ciphers.
func SchedulerArgs(s inventory.Security) []manifests.Arg {
	args := []manifests.Arg{{Name: "profiling", Value: "false"}}
	if s.CIS() {
		args = append(args, cipherSuites())
	}
	return args
}

// EtcdArgs are etcd's flags: under profile cis strong ciphers for clients and peers.
func EtcdArgs(s inventory.Security) []manifests.Arg {
	if !s.CIS() {
		return nil
	}
	return []manifests.Arg{{Name: "cipher-suites", Value: strings.Join(kubelet.StrongCipherSuites, ",")}}
}

// eventRateLimit is the EventRateLimit admission plugin's configuration
// (eventratelimit.admission.k8s.io/v1alpha1): events the API server takes in, in all and per namespace,
// before it answers 429 (the kubelets and controllers drop the event, never their work).
type eventRateLimit struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Limits     []eventLimit `json:"limits"`
}

type eventLimit struct {
	Type      string `json:"type"`
	QPS       int32  `json:"qps"`
	Burst     int32  `json:"burst"`
	CacheSize int32  `json:"cacheSize,omitempty"`
}

// eventRateLimits: the whole server 5000 events a second (bursts of 20000), a namespace 50 (bursts of
// 100), the most recent 2000 namespaces tracked.
var eventRateLimits = eventRateLimit{APIVersion: "eventratelimit.admission.k8s.io/v1alpha1", Kind: "Configuration",
	Limits: []eventLimit{{Type: "Server", QPS: 5000, Burst: 20000}, {Type: "Namespace", QPS: 50, Burst: 100, CacheSize: 2000}}}
