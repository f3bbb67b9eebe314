// Package hardening renders what protects a cluster beyond its certificates, as files made on the
// workstation like the static Pods: the API servers' encryption at rest (EncryptionConfiguration, from keys
// kept in the state directory), their audit policy and log, Pod Security admission's cluster default
// (AdmissionConfiguration), and the flags and mounts that make the control plane use them. Each file goes
// to control-plane nodes only, 0600.
package hardening

import (
	"encoding/json"
	"fmt"
	"path"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"sigs.k8s.io/yaml"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/manifests"
	"github.com/clusterctl/clusterctl/transport"
)

// Mode is every file's here: the API server (root) reads them; they hold keys, or say what is watched.
const Mode = 0o600

// Params are what the API servers' hardening is made of.
type Params struct {
	Security inventory.Security
	// Keys are the cluster's encryption keys (LoadKeys).
	Keys *Keys
	// AuditPolicy is the inventory's own policy file (CheckAuditPolicy has read it); nil: Policy().
	AuditPolicy []byte
	// AuditWebhook is the inventory's webhook kubeconfig (CheckAuditWebhook has read it); nil: none.
	AuditWebhook []byte
	// OIDC is the inventory's identity provider (nil: none), and OIDCCA its CA file's PEM (CheckCA has
	// read it; nil: the hosts' CAs).
	OIDC   *inventory.OIDC
	OIDCCA []byte
}

// Files are the API server's configuration files of every control-plane node.
func Files(p Params) ([]transport.File, error) {
	enc, err := EncryptionConfig(p.Security.Encryption.EncryptedResources(), p.Keys)
	if err != nil {
		return nil, err
	}
	policy := p.AuditPolicy
	if policy == nil {
		if policy, err = yaml.Marshal(Policy()); err != nil {
			return nil, err
		}
	}
	admission, err := AdmissionConfig(p.Security)
	if err != nil {
		return nil, err
	}
	files := []transport.File{
		{Path: kubeadm.AdmissionConfig, Data: admission, Mode: Mode},
		{Path: kubeadm.AuditPolicy, Data: policy, Mode: Mode},
	}
	if p.AuditWebhook != nil {
		files = append(files, transport.File{Path: kubeadm.AuditWebhook, Data: p.AuditWebhook, Mode: Mode})
	}
	if p.OIDC != nil {
		authn, err := AuthenticationConfig(p.OIDC, p.OIDCCA)
		if err != nil {
			return nil, err
		}
		files = append(files, transport.File{Path: kubeadm.AuthenticationConfig, Data: authn, Mode: Mode})
	}
	return append(files, transport.File{Path: kubeadm.EncryptionConfig, Data: enc, Mode: Mode}), nil
}

// APIServerArgs are the API server's flags for them (the cluster's security settings, its identity
// provider), and for no profiling: they come before the inventory's extraArgs, which may replace any of
// them.
func APIServerArgs(c *inventory.Cluster) []manifests.Arg {
	s, a := c.Security, c.APIServer
	args := []manifests.Arg{
		{Name: "admission-control-config-file", Value: kubeadm.AdmissionConfig},
		{Name: "audit-log-maxage", Value: strconv.Itoa(s.Audit.MaxAge)},
		{Name: "audit-log-maxbackup", Value: strconv.Itoa(s.Audit.MaxBackups)},
		{Name: "audit-log-maxsize", Value: strconv.Itoa(s.Audit.MaxSize)},
		{Name: "audit-log-path", Value: kubeadm.AuditLog},
		{Name: "audit-policy-file", Value: kubeadm.AuditPolicy},
	}
	if s.Audit.Webhook != "" {
		args = append(args, manifests.Arg{Name: "audit-webhook-config-file", Value: kubeadm.AuditWebhook})
	}
	if a.OIDC != nil {
		args = append(args, manifests.Arg{Name: "authentication-config", Value: kubeadm.AuthenticationConfig})
	}
	args = append(args,
		manifests.Arg{Name: "encryption-provider-config", Value: kubeadm.EncryptionConfig},
		// The API server reads the file again when it changes (a key rotation's stages), besides the
		// restart its new digest gives it (render's PKI annotation).
		manifests.Arg{Name: "encryption-provider-config-automatic-reload", Value: "true"},
		manifests.Arg{Name: "profiling", Value: "false"},
	)
	if s.CIS() {
		args = append(args, cisAPIServerArgs(c)...)
	}
	return args
}

// APIServerVolumes are the API server's mounts for them: its configuration directory, read-only, and its
// audit log's directory.
func APIServerVolumes() []manifests.Volume {
	return []manifests.Volume{
		{Name: "apiserver-config", HostPath: kubeadm.APIServerConfigDir, MountPath: kubeadm.APIServerConfigDir, ReadOnly: true, Type: corev1.HostPathDirectoryOrCreate},
		{Name: "audit-log", HostPath: kubeadm.AuditLogDir, MountPath: kubeadm.AuditLogDir, Type: corev1.HostPathDirectoryOrCreate},
	}
}

// podSecurityConfiguration is Pod Security admission's configuration
// (k8s.io/pod-security-admission/admission/api/v1), the fields clusterctl sets.
type podSecurityConfiguration struct {
	metav1.TypeMeta `json:",inline"`
	Defaults        podSecurityDefaults   `json:"defaults"`
	Exemptions      podSecurityExemptions `json:"exemptions"`
}

type podSecurityDefaults struct {
	Enforce        string `json:"enforce"`
	EnforceVersion string `json:"enforce-version"`
	Audit          string `json:"audit"`
	AuditVersion   string `json:"audit-version"`
	Warn           string `json:"warn"`
	WarnVersion    string `json:"warn-version"`
}

type podSecurityExemptions struct {
	Usernames      []string `json:"usernames"`
	RuntimeClasses []string `json:"runtimeClasses"`
	Namespaces     []string `json:"namespaces"`
}

// AdmissionConfig is the API server's admission configuration: Pod Security admission enforcing the
// inventory's level (baseline by default, restricted under profile cis) in namespaces without labels of
// their own, warning of and auditing what restricted would refuse, with kube-system and the inventory's
// namespaces exempt; under profile cis, EventRateLimit's limits.
func AdmissionConfig(s inventory.Security) ([]byte, error) {
	ps := s.PodSecurity
	cfg, err := json.Marshal(podSecurityConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "pod-security.admission.config.k8s.io/v1", Kind: "PodSecurityConfiguration"},
		Defaults: podSecurityDefaults{Enforce: ps.Enforce, EnforceVersion: "latest", Audit: inventory.PodSecurityRestricted,
			AuditVersion: "latest", Warn: inventory.PodSecurityRestricted, WarnVersion: "latest"},
		Exemptions: podSecurityExemptions{Usernames: []string{}, RuntimeClasses: []string{}, Namespaces: ps.Exempt()},
	})
	if err != nil {
		return nil, err
	}
	plugins := []apiserverv1.AdmissionPluginConfiguration{{Name: "PodSecurity", Configuration: &runtime.Unknown{Raw: cfg, ContentType: runtime.ContentTypeJSON}}}
	if s.CIS() {
		limits, err := json.Marshal(eventRateLimits)
		if err != nil {
			return nil, err
		}
		plugins = append(plugins, apiserverv1.AdmissionPluginConfiguration{Name: "EventRateLimit", Configuration: &runtime.Unknown{Raw: limits, ContentType: runtime.ContentTypeJSON}})
	}
	return yaml.Marshal(apiserverv1.AdmissionConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiserver.config.k8s.io/v1", Kind: "AdmissionConfiguration"},
		Plugins:  plugins,
	})
}

// Mounted tells whether a control-plane file is one of the API server's configuration files here.
func Mounted(p string) bool { return path.Dir(p) == kubeadm.APIServerConfigDir }

// fileError names the inventory field and file a problem is in.
func fileError(field, file string, err error) error {
	return fmt.Errorf("cluster.%s: %s: %w", field, file, err)
}
