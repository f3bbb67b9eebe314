package playbooks

import (
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/charts"
)

// The network step installs the pod network add-on and nothing else; the addons step the others, in the
// plan's order, with the uninstalls (which the plan puts first); a dry run's addons step shows them all.
func TestStepChanges(t *testing.T) {
	inv := &inventory.Inventory{}
	inv.Cluster.Addons = []inventory.Addon{{Name: "net", Network: true}, {Name: "storage"}, {Name: "metrics"}}
	plan := []charts.Change{
		{Name: "old", Action: charts.Uninstall}, {Name: "gone-manifests", Action: charts.Uninstall, Chart: "manifests"},
		{Name: "net", Action: charts.Install}, {Name: "storage", Action: charts.Upgrade}, {Name: "metrics", Action: charts.Unchanged},
	}
	names := func(chs []charts.Change) string {
		var out []string
		for _, ch := range chs {
			out = append(out, ch.Action+" "+ch.Name)
		}
		return strings.Join(out, ", ")
	}
	for _, tc := range []struct {
		step string
		pick func(*inventory.Addon) bool
		want string
	}{
		{"network", networkStepPicks, "install net"},
		{"addons", addonsStepPicks(false), "uninstall old, uninstall gone-manifests, upgrade storage, unchanged metrics"},
		{"addons", addonsStepPicks(true), "uninstall old, uninstall gone-manifests, install net, upgrade storage, unchanged metrics"},
	} {
		if got := names(stepChanges(inv, plan, tc.step, tc.pick)); got != tc.want {
			t.Errorf("%s step: %s, want %s", tc.step, got, tc.want)
		}
	}
}
