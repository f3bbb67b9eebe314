package playbooks

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

func hv(name, v string) hostVersion { return hostVersion{name, version.MustParseGeneric(v)} }

func TestVersionReasons(t *testing.T) {
	cps := func(vs ...string) []hostVersion {
		var out []hostVersion
		for i, v := range vs {
			out = append(out, hv("cp"+string(rune('1'+i)), v))
		}
		return out
	}
	for _, c := range []struct {
		name          string
		to            string
		api, kubelets []hostVersion
		limit         bool
		from          string
		refused       []string // each in some reason; none: allowed
		skew          []string // kubelets outside the skew policy (readiness blockers)
	}{
		{name: "one minor", to: "v1.37.2", api: cps("v1.36.3", "v1.36.3"), kubelets: []hostVersion{hv("w1", "v1.36.3")}, from: "1.36.3"},
		{name: "patch", to: "v1.37.2", api: cps("v1.37.0"), kubelets: []hostVersion{hv("w1", "v1.37.0")}, from: "1.37.0"},
		{name: "resumed: some API servers at the target", to: "v1.37.2", api: cps("v1.37.2", "v1.36.3", "v1.36.3"), from: "1.36.3"},
		{name: "two minors", to: "v1.37.2", api: cps("v1.35.4"), from: "1.35.4", refused: []string{"skips a minor version (the API server on cp1 runs v1.35.4): upgrade to v1.36 first"}},
		{name: "downgrade", to: "v1.36.3", api: cps("v1.37.2"), kubelets: []hostVersion{hv("w1", "v1.37.2")}, from: "1.37.2",
			refused: []string{"API server on cp1 runs v1.37.2, newer than the target", "kubelet on w1 runs v1.37.2, newer than the target"}},
		{name: "workers before the control plane", to: "v1.37.2", api: cps("v1.37.2", "v1.36.3"), limit: true, from: "1.36.3",
			refused: []string{"the API server on cp2 runs v1.36.3: upgrading kubelets to v1.37.2 would make them newer than an API server"}},
		{name: "workers after the control plane", to: "v1.37.2", api: cps("v1.37.2", "v1.37.2"), kubelets: []hostVersion{hv("w1", "v1.36.3")}, limit: true, from: "1.37.2"},
		{name: "a kubelet four minors behind", to: "v1.37.2", api: cps("v1.36.3"), kubelets: []hostVersion{hv("w1", "v1.33.1")}, from: "1.36.3",
			skew: []string{"kubelet on w1 runs v1.33.1, more than three minor versions behind"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			from, reasons, skew := versionReasons(version.MustParseSemantic(c.to), c.api, c.kubelets, c.limit)
			if got := strings.Join(skew, "\n"); len(skew) != len(c.skew) || len(c.skew) > 0 && !strings.Contains(got, c.skew[0]) {
				t.Errorf("skew: %q, want %q", skew, c.skew)
			}
			if from == nil || from.String() != c.from {
				t.Errorf("from %v, want %s", from, c.from)
			}
			all := strings.Join(reasons, "\n")
			if len(c.refused) == 0 && len(reasons) > 0 {
				t.Errorf("refused: %s", all)
			}
			for _, want := range c.refused {
				if !strings.Contains(all, want) {
					t.Errorf("reasons lack %q:\n%s", want, all)
				}
			}
			if len(reasons) != len(c.refused) {
				t.Errorf("%d reasons, want %d:\n%s", len(reasons), len(c.refused), all)
			}
		})
	}
}
