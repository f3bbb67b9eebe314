package inventory

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// This file holds the cluster's security settings (cluster.security): encryption at rest, the audit log and
// Pod Security admission's cluster default. Every one has a secure default; none needs to be written.

// Security is how the cluster protects what it stores and what it admits, and what it records.
type Security struct {
	// Profile is a hardening profile on top of the defaults: cis, for the CIS Kubernetes Benchmark (v1.12):
	// Pod Security admission enforcing restricted unless podSecurity.enforce says otherwise, the
	// EventRateLimit and DenyServiceExternalIPs admission plugins (and AlwaysPullImages when the nodes pull
	// their images from a registry), strong TLS cipher suites on every component, etcd as its own user (etcd,
	// made on each etcd host) with its data 0700 etcd:etcd, kubelets protecting the kernel's defaults (the
	// settings they need applied by setup), the default seccomp profile, a Pod PID limit and an event rate,
	// and the controller-manager's terminated-Pod GC threshold. docs/security.md lists the benchmark's checks
	// and what passes them.
	Profile string `yaml:"profile,omitempty" json:"profile,omitempty"`
	// Encryption is what the API servers encrypt in etcd: Secrets always, with a key clusterctl makes on
	// the workstation (the state directory's encryption-keys.json) and pushes to control-plane nodes
	// only; `clusterctl encryption rotate` replaces it.
	Encryption Encryption `yaml:"encryption,omitempty" json:"encryption,omitzero"`
	// Audit is the API servers' audit log: on each control-plane node under /var/log/kubernetes/audit/,
	// rotated.
	Audit Audit `yaml:"audit,omitempty" json:"audit,omitzero"`
	// PodSecurity is Pod Security admission's level for namespaces without labels of their own.
	PodSecurity PodSecurity `yaml:"podSecurity,omitempty" json:"podSecurity,omitzero"`
}

// IsZero lets omitempty drop security settings left to their defaults.
func (s Security) IsZero() bool {
	return s.Profile == "" && len(s.Encryption.Resources) == 0 && s.Audit == Audit{} && s.PodSecurity.IsZero()
}

// Encryption is what is encrypted at rest.
type Encryption struct {
	// Resources are resources encrypted in etcd besides Secrets, each resource or resource.group as the
	// API names it (configmaps, deployments.apps, widgets.example.com). Objects written before are
	// rewritten by the next up.
	Resources []string `yaml:"resources,omitempty" json:"resources,omitempty"`
}

// Defaults of cluster.security.audit: the CIS benchmark's values.
const (
	DefaultAuditMaxAge     = 30
	DefaultAuditMaxBackups = 10
	DefaultAuditMaxSize    = 100
)

// Audit is the API servers' audit log.
type Audit struct {
	// Policy is an audit policy file of your own (audit.k8s.io/v1 Policy), relative to the inventory's
	// directory. Default: clusterctl's, every request at the Metadata level (never a request's or
	// response's body), nothing for health probes and the kubelets' and leaders' leases.
	Policy string `yaml:"policy,omitempty" json:"policy,omitempty"`
	// Webhook is a kubeconfig file (relative to the inventory's directory) of a webhook the API servers
	// also send audit events to, in batches.
	Webhook string `yaml:"webhook,omitempty" json:"webhook,omitempty"`
	// MaxAge is how many days a rotated audit log is kept (default 30).
	MaxAge int `yaml:"maxAge,omitempty" json:"maxAge,omitempty"`
	// MaxBackups is how many rotated audit logs are kept (default 10).
	MaxBackups int `yaml:"maxBackups,omitempty" json:"maxBackups,omitempty"`
	// MaxSize is the size in megabytes at which the audit log is rotated (default 100).
	MaxSize int `yaml:"maxSize,omitempty" json:"maxSize,omitempty"`
}

// ProfileCIS is cluster.security.profile's value for the CIS Kubernetes Benchmark.
const ProfileCIS = "cis"

// CIS tells whether the cluster follows the CIS Kubernetes Benchmark (profile cis).
func (s Security) CIS() bool { return s.Profile == ProfileCIS }

// Pod Security Standards' levels.
const (
	PodSecurityPrivileged = "privileged"
	PodSecurityBaseline   = "baseline"
	PodSecurityRestricted = "restricted"
)

// PodSecurityLevels are the values of podSecurity.enforce (and of an add-on namespace's podSecurity).
var PodSecurityLevels = []string{PodSecurityPrivileged, PodSecurityBaseline, PodSecurityRestricted}

// PodSecurity is Pod Security admission's cluster default: the level it enforces in a namespace without a
// pod-security.kubernetes.io/enforce label; it warns of and audits what restricted would refuse.
type PodSecurity struct {
	// Enforce is privileged, baseline (the default: no privileged Pods, host namespaces or host paths) or
	// restricted (the default of profile cis: besides, non-root, no privilege escalation, capabilities
	// dropped, a seccomp profile).
	Enforce string `yaml:"enforce,omitempty" json:"enforce,omitempty"`
	// ExemptNamespaces are namespaces Pod Security admission leaves alone besides kube-system (where the
	// control plane, kube-proxy and the pod network run): those of a pod network installed from manifests,
	// for example. A namespace's own labels are the better way where its owner sets them.
	ExemptNamespaces []string `yaml:"exemptNamespaces,omitempty" json:"exemptNamespaces,omitempty"`
}

// IsZero lets omitempty drop Pod Security settings left to their defaults.
func (p PodSecurity) IsZero() bool { return p.Enforce == "" && len(p.ExemptNamespaces) == 0 }

// Exempt are the namespaces Pod Security admission leaves alone: kube-system, then the inventory's.
func (p PodSecurity) Exempt() []string {
	out := []string{"kube-system"}
	for _, n := range p.ExemptNamespaces {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// EncryptedResources are the resources encrypted at rest: secrets, then the inventory's, each once.
func (e Encryption) EncryptedResources() []string {
	out := []string{"secrets"}
	for _, r := range e.Resources {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

func (s *Security) applyDefaults() {
	a := &s.Audit
	setInt(&a.MaxAge, DefaultAuditMaxAge)
	setInt(&a.MaxBackups, DefaultAuditMaxBackups)
	setInt(&a.MaxSize, DefaultAuditMaxSize)
	if s.CIS() {
		setString(&s.PodSecurity.Enforce, PodSecurityRestricted)
	}
	setString(&s.PodSecurity.Enforce, PodSecurityBaseline)
}

// resourceRE is a resource as the API names it, with its group unless it is in the core group: lower-case
// DNS labels joined by dots.
var resourceRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// security checks cluster.security.
func (v *validator) security(s *Security) {
	const key = "cluster.security"
	if s.Profile != "" && !s.CIS() {
		v.errorf(key+".profile", "%q is not a profile: use %s (the CIS Kubernetes Benchmark), or leave it out for the defaults", s.Profile, ProfileCIS)
	}
	for i, r := range s.Encryption.Resources {
		switch {
		case strings.Contains(r, "*"):
			v.errorf(fmt.Sprintf("%s.encryption.resources[%d]", key, i), "%q: name each resource (wildcards would encrypt what the API server must read before it can decrypt, such as its own leases and events, at a cost on every write)", r)
		case !resourceRE.MatchString(r) || len(r) > 253:
			v.errorf(fmt.Sprintf("%s.encryption.resources[%d]", key, i), "%q is not a resource: its plural name, with its group unless it is in the core group (configmaps, deployments.apps)", r)
		}
	}
	for _, f := range []struct {
		name string
		n    int
		max  int
		unit string
	}{{"maxAge", s.Audit.MaxAge, 3650, "days"}, {"maxBackups", s.Audit.MaxBackups, 1000, "files"}, {"maxSize", s.Audit.MaxSize, 100000, "megabytes"}} {
		if f.n < 1 || f.n > f.max {
			v.errorf(key+".audit."+f.name, "%d: from 1 to %d %s", f.n, f.max, f.unit)
		}
	}
	for _, f := range []struct{ name, p string }{{"policy", s.Audit.Policy}, {"webhook", s.Audit.Webhook}} {
		if strings.ContainsRune(f.p, 0) || len(f.p) > 4096 {
			v.errorf(key+".audit."+f.name, "%q is not a file path", f.p)
		}
	}
	if !slices.Contains(PodSecurityLevels, s.PodSecurity.Enforce) {
		v.errorf(key+".podSecurity.enforce", "%q is not a Pod Security level: use %s", s.PodSecurity.Enforce, strings.Join(PodSecurityLevels, ", "))
	}
	for i, n := range s.PodSecurity.ExemptNamespaces {
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			v.errorf(fmt.Sprintf("%s.podSecurity.exemptNamespaces[%d]", key, i), "%q is not a namespace name: %s", n, brief(errs[0]))
		}
	}
}
