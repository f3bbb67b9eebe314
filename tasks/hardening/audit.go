package hardening

import (
	"errors"
	"fmt"
	"net/url"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// Policy is clusterctl's audit policy: who did what to which object and when, for every request, at the
// Metadata level, so that no request or response body is ever logged (Secrets, ConfigMaps and TokenReviews
// hold credentials); nothing for the requests that say nothing of anyone's actions: health probes and the
// version, the kubelets' node leases and the control plane's leader-election leases, which each
// renew every few seconds.
func Policy() *auditv1.Policy {
	lease := []auditv1.GroupResources{{Group: "coordination.k8s.io", Resources: []string{"leases"}}}
	return &auditv1.Policy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "audit.k8s.io/v1", Kind: "Policy"},
		OmitStages: []auditv1.Stage{auditv1.StageRequestReceived},
		Rules: []auditv1.PolicyRule{
			{Level: auditv1.LevelNone, NonResourceURLs: []string{"/healthz*", "/livez*", "/readyz*", "/version"}},
			{Level: auditv1.LevelNone, UserGroups: []string{"system:nodes"}, Verbs: []string{"get", "update"},
				Namespaces: []string{"kube-node-lease"}, Resources: lease},
			{Level: auditv1.LevelNone, Users: []string{"system:kube-controller-manager", "system:kube-scheduler"},
				Verbs: []string{"get", "update"}, Namespaces: []string{"kube-system"}, Resources: lease},
			// Never more than Metadata, whatever a rule after this one says, should one be added.
			{Level: auditv1.LevelMetadata, Resources: []auditv1.GroupResources{
				{Group: "", Resources: []string{"secrets", "configmaps", "serviceaccounts/token"}},
				{Group: "authentication.k8s.io", Resources: []string{"tokenreviews"}},
			}},
			{Level: auditv1.LevelMetadata},
		},
	}
}

// CheckAuditPolicy reads an audit policy file of the user's as the API server would (audit.k8s.io/v1
// Policy, unknown fields refused), so that a mistake stops the run before an API server fails to start.
func CheckAuditPolicy(file string, data []byte) error {
	var p auditv1.Policy
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return fileError("security.audit.policy", file, err)
	}
	if p.APIVersion != "audit.k8s.io/v1" || p.Kind != "Policy" {
		return fileError("security.audit.policy", file, fmt.Errorf("apiVersion %q and kind %q: want audit.k8s.io/v1 and Policy", p.APIVersion, p.Kind))
	}
	if len(p.Rules) == 0 {
		return fileError("security.audit.policy", file, errors.New("the policy has no rules: it would log nothing"))
	}
	levels := []auditv1.Level{auditv1.LevelNone, auditv1.LevelMetadata, auditv1.LevelRequest, auditv1.LevelRequestResponse}
	for i, r := range p.Rules {
		if !slices.Contains(levels, r.Level) {
			return fileError("security.audit.policy", file, fmt.Errorf("rules[%d]: level %q is not None, Metadata, Request or RequestResponse", i, r.Level))
		}
	}
	return nil
}

// CheckAuditWebhook reads the audit webhook's kubeconfig: one cluster, reached over HTTPS.
func CheckAuditWebhook(file string, data []byte) error {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return fileError("security.audit.webhook", file, err)
	}
	if len(cfg.Clusters) != 1 {
		return fileError("security.audit.webhook", file, fmt.Errorf("%d clusters: a webhook's kubeconfig names one", len(cfg.Clusters)))
	}
	for name, c := range cfg.Clusters {
		if u, err := url.Parse(c.Server); err != nil || u.Scheme != "https" || u.Host == "" {
			return fileError("security.audit.webhook", file, fmt.Errorf("cluster %q: server %q is not an https:// URL (audit events hold who did what)", name, c.Server))
		}
	}
	return nil
}
