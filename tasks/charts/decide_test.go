package charts

import (
	"strings"
	"testing"

	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"

	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/clusterctl/clusterctl/inventory"
)

// rev is revision n of release demo: chart demo@1.0.0, status, the values it was installed with, marked
// as clusterctl's (with the digest of chart content "sha-a") unless foreign.
func rev(n int, status rcommon.Status, values map[string]any, foreign bool) *release.Release {
	labels := map[string]string{ManagedLabel: "true", DigestLabel: digestLabel("sha-a")}
	if foreign {
		labels = nil
	}
	return &release.Release{Name: "demo", Namespace: "demo", Version: n, Labels: labels, Config: values,
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "demo", Version: "1.0.0"}},
		Info:  &release.Info{Status: status}}
}

// decide installs what is missing or never finished, rolls back an interrupted upgrade first, upgrades
// what changed (chart version, chart content, values: each a reason), leaves the rest alone and refuses
// a release it did not install.
func TestDecide(t *testing.T) {
	v1 := map[string]any{"replicas": float64(1)}
	v2 := map[string]any{"replicas": float64(2)}
	want := func(version, digest string, values map[string]any) *Desired {
		return &Desired{Addon: &inventory.Addon{Name: "demo", Chart: "demo", Namespace: "demo"}, Values: values,
			Chart: &Chart{Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "demo", Version: version}}, Digest: digest}}
	}
	for _, tc := range []struct {
		name    string
		d       *Desired
		hist    []*release.Release
		action  string
		recover string
		reasons string
		diff    string
		err     string
	}{
		{name: "none", d: want("1.0.0", "sha-a", v1), action: Install, diff: "+replicas: 1"},
		{name: "same", d: want("1.0.0", "sha-a", v1), hist: []*release.Release{rev(1, rcommon.StatusDeployed, v1, false)}, action: Unchanged},
		{name: "values", d: want("1.0.0", "sha-a", v2), hist: []*release.Release{rev(1, rcommon.StatusDeployed, v1, false)},
			action: Upgrade, reasons: "values", diff: "-replicas: 1\n+replicas: 2"},
		{name: "version", d: want("1.1.0", "sha-b", v1), hist: []*release.Release{rev(1, rcommon.StatusDeployed, v1, false)},
			action: Upgrade, reasons: "chart demo@1.0.0 → demo@1.1.0"},
		{name: "content", d: want("1.0.0", "sha-b", v1), hist: []*release.Release{rev(1, rcommon.StatusDeployed, v1, false)},
			action: Upgrade, reasons: "the chart's content changed"},
		{name: "latest of several, any order", d: want("1.0.0", "sha-a", v2),
			hist:   []*release.Release{rev(3, rcommon.StatusDeployed, v2, false), rev(1, rcommon.StatusSuperseded, v1, false), rev(2, rcommon.StatusSuperseded, v1, false)},
			action: Unchanged},
		{name: "first install interrupted", d: want("1.0.0", "sha-a", v1), hist: []*release.Release{rev(1, rcommon.StatusPendingInstall, v1, false)},
			action: Install, recover: Uninstall, reasons: "revision 1 is pending-install"},
		{name: "first install failed", d: want("1.0.0", "sha-a", v1), hist: []*release.Release{rev(1, rcommon.StatusFailed, v1, false)},
			action: Install, recover: Uninstall, reasons: "revision 1 is failed"},
		{name: "upgrade interrupted", d: want("1.0.0", "sha-a", v2),
			hist:   []*release.Release{rev(1, rcommon.StatusDeployed, v1, false), rev(2, rcommon.StatusPendingUpgrade, v2, false)},
			action: Upgrade, recover: "rollback", reasons: "revision 2 is pending-upgrade (an interrupted run): rolled back to 1 first; values"},
		{name: "upgrade failed", d: want("1.0.0", "sha-a", v2),
			hist:   []*release.Release{rev(1, rcommon.StatusDeployed, v1, false), rev(2, rcommon.StatusFailed, v2, false)},
			action: Upgrade, reasons: "revision 2 is failed"},
		// a release whose deployed revision was superseded and whose newest failed is upgraded, never
		// uninstalled: it served once
		{name: "failed after superseded", d: want("1.0.0", "sha-a", v2),
			hist:   []*release.Release{rev(1, rcommon.StatusSuperseded, v1, false), rev(2, rcommon.StatusFailed, v2, false)},
			action: Upgrade, reasons: "revision 2 is failed"},
		{name: "interrupted after a failure", d: want("1.0.0", "sha-a", v1),
			hist:   []*release.Release{rev(1, rcommon.StatusSuperseded, v1, false), rev(2, rcommon.StatusFailed, v2, false), rev(3, rcommon.StatusPendingUpgrade, v2, false)},
			action: Upgrade, recover: "rollback", reasons: "revision 3 is pending-upgrade (an interrupted run): rolled back to 1 first"},
		{name: "someone else's", d: want("1.0.0", "sha-a", v1), hist: []*release.Release{rev(1, rcommon.StatusDeployed, v1, true)},
			err: "clusterctl did not install"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := decide(tc.d, "demo", tc.hist)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "helm uninstall demo -n demo") {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ch.Action != tc.action || ch.recover != tc.recover || strings.Join(ch.Reasons, "; ") != tc.reasons {
				t.Errorf("got %s (recover %q) because %q; want %s (recover %q) because %q", ch.Action, ch.recover, strings.Join(ch.Reasons, "; "), tc.action, tc.recover, tc.reasons)
			}
			if !strings.Contains(ch.Diff, tc.diff) || tc.action == Unchanged && ch.Diff != "" {
				t.Errorf("diff:\n%s\nwant it to hold %q", ch.Diff, tc.diff)
			}
		})
	}
}
