package playbooks

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// The path passes every minor release once: given artifacts name their version, --via others, the tested
// patch the rest; artifacts off the path, two versions of one minor and a downgrade are refused.
func TestUpgradePath(t *testing.T) {
	v := version.MustParseSemantic
	for _, tc := range []struct {
		name     string
		from, to string
		given    map[string]string
		via      []string
		want     string
		err      string
	}{
		{name: "patch", from: "v1.37.0", to: "v1.37.2", want: "v1.37.2"},
		{name: "one minor", from: "v1.36.3", to: "v1.37.2", want: "v1.37.2"},
		{name: "two minors, tested patch", from: "v1.35.4", to: "v1.37.2", want: "v1.36.3 v1.37.2"},
		{name: "two minors, artifacts given", from: "v1.35.0", to: "v1.37.2", given: map[string]string{"v1.36.1": "/a/136", "v1.37.2": "/a/137"},
			want: "v1.36.1@/a/136 v1.37.2@/a/137"},
		{name: "three minors, via", from: "v1.34.4", to: "v1.37.2", via: []string{"v1.35.2"}, want: "v1.35.2 v1.36.3 v1.37.2"},
		{name: "artifacts off the path", from: "v1.36.3", to: "v1.37.2", given: map[string]string{"v1.35.4": "/a/135"}, err: "not on the way"},
		{name: "two versions of a minor", from: "v1.35.4", to: "v1.37.2", given: map[string]string{"v1.36.1": "/a/136"}, via: []string{"v1.36.3"}, err: "two versions of v1.36"},
		{name: "downgrade", from: "v1.37.2", to: "v1.36.3", err: "not an upgrade"},
		{name: "no known patch", from: "v1.31.0", to: "v1.34.4", err: "--via v1.32.N"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hops, err := UpgradePath(v(tc.from), v(tc.to), tc.given, tc.via)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if strings.Contains(tc.err, "not an upgrade") && !errors.Is(err, ErrUpgradeRefused) {
					t.Errorf("not refused: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range hops {
				s := h.To
				if h.Artifacts != "" {
					s += "@" + h.Artifacts
				}
				got = append(got, s)
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("path %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
	if got := PathLine("v1.35.4", []Hop{{To: "v1.36.3"}, {To: "v1.37.2"}}); got != "v1.35.4 → v1.36.3 → v1.37.2" {
		t.Errorf("PathLine: %s", got)
	}
}

func TestMinorOf(t *testing.T) {
	for v, want := range map[string]string{"3.6.8": "3.6", "3.7.0": "3.7", "v1.37.2": "1.37", "3": "3"} {
		if got := minorOf(v); got != want {
			t.Errorf("minorOf(%s) = %s, want %s", v, got, want)
		}
	}
}
