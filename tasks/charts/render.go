package charts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"go.yaml.in/yaml/v3"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	release "helm.sh/helm/v4/pkg/release/v1"
)

// Render is what the chart makes with these values for the release name and namespace on a cluster of
// kubeVersion (v1.37.2), without a cluster: its manifest and its hooks', as helm template renders them.
func Render(ctx context.Context, ch *Chart, vals map[string]any, releaseName, namespace, kubeVersion string) (string, error) {
	inst := action.NewInstall(action.NewConfiguration())
	inst.DryRunStrategy = action.DryRunClient
	inst.Replace = true
	inst.ReleaseName = releaseName
	inst.Namespace = namespace
	inst.IncludeCRDs = true
	if kubeVersion != "" {
		kv, err := common.ParseKubeVersion(kubeVersion)
		if err != nil {
			return "", err
		}
		inst.KubeVersion = kv
	}
	r, err := inst.RunWithContext(ctx, ch.Chart, vals)
	if err != nil {
		return "", fmt.Errorf("rendering chart %s %s: %w", ch.Metadata.Name, ch.Metadata.Version, err)
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return "", errors.New("rendering: Helm returned no release")
	}
	var b strings.Builder
	b.WriteString(rel.Manifest)
	for _, h := range rel.Hooks {
		b.WriteString("\n---\n")
		b.WriteString(h.Manifest)
	}
	return b.String(), nil
}

// Images are the images a stream of YAML documents runs: every container's (containers, initContainers,
// ephemeralContainers at any depth: Pods, workloads' templates, CronJobs', custom resources that embed a
// Pod spec), also inside YAML held in a ConfigMap's data (a provisioner's helper Pod), normalized as
// container runtimes name them (busybox is docker.io/library/busybox:latest). A reference by digest
// alone cannot be imported by tag: it is an error naming it.
func Images(manifest string) ([]string, error) {
	seen := map[string]bool{}
	var errs []error
	collect := func(ref string) {
		norm, err := NormalizeImage(ref)
		if err != nil {
			errs = append(errs, err)
			return
		}
		seen[norm] = true
	}
	walkDocuments([]byte(manifest), collect, 0)
	out := make([]string, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	slices.Sort(out)
	return out, errors.Join(errs...)
}

// maxNesting bounds YAML found inside YAML (a ConfigMap's value that is itself a manifest).
const maxNesting = 2

func walkDocuments(data []byte, collect func(string), depth int) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc any
		if err := dec.Decode(&doc); err != nil {
			return // the end, or not YAML (a script, a config file): nothing more to find
		}
		walk(doc, collect, depth)
	}
}

var containerLists = []string{"containers", "initContainers", "ephemeralContainers"}

func walk(v any, collect func(string), depth int) {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if slices.Contains(containerLists, k) {
				if list, ok := child.([]any); ok {
					for _, c := range list {
						if m, ok := c.(map[string]any); ok {
							if img, ok := m["image"].(string); ok && img != "" {
								collect(img)
							}
						}
					}
				}
			}
			walk(child, collect, depth)
		}
	case []any:
		for _, child := range t {
			walk(child, collect, depth)
		}
	case string:
		// a value that is itself a manifest (a ConfigMap's helperPod.yaml)
		if depth < maxNesting && strings.Contains(t, "\n") && (strings.Contains(t, "containers:") || strings.Contains(t, "\"containers\"")) {
			walkDocuments([]byte(t), collect, depth+1)
		}
	}
}

// NormalizeImage names an image as the container runtime does: with its registry (docker.io by default,
// library/ for a single name) and its tag (latest when none).
func NormalizeImage(ref string) (string, error) {
	if strings.Contains(ref, "@") {
		base, _, _ := strings.Cut(ref, "@")
		if !strings.Contains(base[strings.LastIndex(base, "/")+1:], ":") {
			return "", fmt.Errorf("image %s is named by digest alone: name it by tag in the add-on's values, or list it in images", ref)
		}
		ref = base
	}
	t, err := name.NewTag(ref, name.WeakValidation)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", ref, err)
	}
	reg := t.Context().RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return reg + "/" + t.Context().RepositoryStr() + ":" + t.TagStr(), nil
}
