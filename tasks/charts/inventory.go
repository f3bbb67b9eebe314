package charts

import (
	"context"
	"fmt"
	"slices"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/artifacts/pull"
)

// PullCharts are the inventory's add-on charts that come from a repository or a registry (those a pull
// fetches into the artifacts).
func PullCharts(inv *inventory.Inventory) []pull.Chart {
	var out []pull.Chart
	for _, a := range inv.Cluster.Addons {
		if s := a.Source(); s == inventory.AddonRepository || s == inventory.AddonOCI {
			out = append(out, pull.Chart{Name: a.Chart, Version: a.Version, Repository: a.Repository})
		}
	}
	return out
}

// Desire loads the add-ons pick chooses (all when nil): charts from the artifacts or their path, with
// their values; manifests as read.
func Desire(inv *inventory.Inventory, artDir string, m *artifacts.Manifest, pick func(*inventory.Addon) bool) ([]*Desired, error) {
	var out []*Desired
	for i := range inv.Cluster.Addons {
		a := &inv.Cluster.Addons[i]
		if pick != nil && !pick(a) {
			continue
		}
		d := &Desired{Addon: a}
		var err error
		if a.IsChart() {
			if d.Chart, err = Load(a, inv.Resolve, artDir, m); err != nil {
				return nil, err
			}
			if d.Values, err = Values(a, inv.Resolve); err != nil {
				return nil, err
			}
		} else if d.Set, err = LoadManifests(a, inv.Resolve); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// ImagesOf says which images the add-ons run: those their rendered manifests name and those they list
// (images), each with the add-ons that run it.
func ImagesOf(ctx context.Context, desired []*Desired, kubeVersion string) (map[string][]string, error) {
	out := map[string][]string{}
	add := func(ref, addon string) {
		if !slices.Contains(out[ref], addon) {
			out[ref] = append(out[ref], addon)
		}
	}
	for _, d := range desired {
		a := d.Addon
		manifest := ""
		if d.Chart != nil {
			var err error
			if manifest, err = Render(ctx, d.Chart, d.Values, a.Name, a.NamespaceOrDefault(), kubeVersion); err != nil {
				return nil, fmt.Errorf("add-on %s: %w", a.Name, err)
			}
		} else {
			manifest = d.Set.YAML
		}
		refs, err := Images(manifest)
		if err != nil {
			return nil, fmt.Errorf("add-on %s: %w", a.Name, err)
		}
		for _, r := range refs {
			add(r, a.Name)
		}
		for _, r := range a.Images {
			n, err := NormalizeImage(r)
			if err != nil {
				return nil, fmt.Errorf("add-on %s: %w", a.Name, err)
			}
			add(n, a.Name)
		}
	}
	return out, nil
}

// PullImages is pull.Options' AddonImages for an inventory: the add-ons loaded from the manifest just
// pulled, rendered for the inventory's Kubernetes version.
func PullImages(inv *inventory.Inventory) pull.AddonImages {
	return func(ctx context.Context, m *artifacts.Manifest, dir string) (map[string][]string, error) {
		desired, err := Desire(inv, dir, m, nil)
		if err != nil {
			return nil, err
		}
		return ImagesOf(ctx, desired, inv.Cluster.KubernetesVersion)
	}
}
