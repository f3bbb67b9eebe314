package apiclient

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Namespaces and CRDs go first, workloads last, after the ServiceAccounts and ConfigMaps their Pods need.
func TestApplyWave(t *testing.T) {
	for gk, want := range map[schema.GroupKind]int{
		{Kind: "Namespace"}: 0,
		{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: 0,
		{Kind: "ServiceAccount"}: 1,
		{Kind: "ConfigMap"}:      1,
		{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}: 1,
		{Kind: "Service"}:                          1,
		{Group: "apps", Kind: "DaemonSet"}:         2,
		{Group: "apps", Kind: "Deployment"}:        2,
		{Group: "batch", Kind: "Job"}:              2,
		{Kind: "Pod"}:                              2,
		{Group: "example.com", Kind: "Deployment"}: 1, // a custom kind of the same name
	} {
		if got := applyWave(gk); got != want {
			t.Errorf("applyWave(%v) = %d, want %d", gk, got, want)
		}
	}
}
