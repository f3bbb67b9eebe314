package preflight

import (
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/tasks/facts"
)

func TestHostChecks(t *testing.T) {
	for _, tc := range []struct {
		facts          facts.Facts
		check          string
		warning, error string
	}{
		{facts.Facts{Init: "systemd", Arch: "amd64", OS: "debian", OSVersion: "12"}, "", "", ""},
		{facts.Facts{Init: "init"}, "InitSystem", "", "PID 1 is init, not systemd"},
		{facts.Facts{Arch: "s390x"}, "Architecture", "", "the host is s390x: clusterctl has artifacts for amd64 and arm64 only"},
		{facts.Facts{OS: "ubuntu", OSVersion: "24.04", OSPretty: "Ubuntu 24.04.1 LTS"}, "Distribution", "Ubuntu 24.04.1 LTS is expected to work but not tested", ""},
		{facts.Facts{OS: "alpine", OSVersion: "3.20"}, "Distribution", "alpine 3.20 is not a distribution clusterctl knows", ""},
	} {
		for _, c := range hostChecks() {
			warnings, errs := c.Check(&tc.facts, &Node{})
			got := strings.Join(append(warnings, errs...), "; ")
			switch {
			case c.Name != tc.check && got != "":
				t.Errorf("%+v: %s says %q", tc.facts, c.Name, got)
			case c.Name == tc.check && (tc.warning != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.warning)) || tc.error != "" && (len(errs) != 1 || !strings.Contains(errs[0], tc.error))):
				t.Errorf("%+v: %s: warnings %q, errors %q", tc.facts, c.Name, warnings, errs)
			}
		}
	}
}
