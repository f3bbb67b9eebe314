package readiness

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// DeprecatedMetric is the API server's gauge of the deprecated APIs requested since it started, one
// series per group, version, resource and subresource, with the release that removes it.
const DeprecatedMetric = "apiserver_requested_deprecated_apis"

// MaxMetricsBytes bounds what is read of one API server's /metrics.
const MaxMetricsBytes = 64 << 20

// DeprecatedAPI is one series of DeprecatedMetric.
type DeprecatedAPI struct {
	Group, Version, Resource, Subresource, RemovedRelease string
}

// String is the API as kubectl names it: resource.version.group (core: resource.version).
func (a DeprecatedAPI) String() string {
	s := a.Resource
	if a.Subresource != "" {
		s += "/" + a.Subresource
	}
	s += "." + a.Version
	if a.Group != "" {
		s += "." + a.Group
	}
	return s
}

// ParseDeprecated reads the series of DeprecatedMetric from an API server's /metrics (Prometheus text
// format) whose value is 1, reading at most MaxMetricsBytes. Other metrics are skipped; a series of it
// that does not parse is an error.
func ParseDeprecated(r io.Reader) ([]DeprecatedAPI, error) {
	sc := bufio.NewScanner(io.LimitReader(r, MaxMetricsBytes))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []DeprecatedAPI
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, DeprecatedMetric+"{") {
			continue
		}
		labels, value, err := parseSeries(line[len(DeprecatedMetric):])
		if err != nil {
			return nil, fmt.Errorf("%s: %w in %q", DeprecatedMetric, err, truncated(line))
		}
		if value != 1 {
			continue
		}
		out = append(out, DeprecatedAPI{Group: labels["group"], Version: labels["version"], Resource: labels["resource"],
			Subresource: labels["subresource"], RemovedRelease: labels["removed_release"]})
	}
	return out, sc.Err()
}

func truncated(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// parseSeries parses `{name="value",...} number` (label values with the format's escapes: \\ \" \n).
func parseSeries(s string) (map[string]string, float64, error) {
	if !strings.HasPrefix(s, "{") {
		return nil, 0, fmt.Errorf("no labels")
	}
	s = s[1:]
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, " ")
		if strings.HasPrefix(s, "}") {
			s = s[1:]
			break
		}
		eq := strings.Index(s, "=\"")
		if eq <= 0 {
			return nil, 0, fmt.Errorf("a label without a quoted value")
		}
		name := s[:eq]
		s = s[eq+2:]
		var b strings.Builder
		closed := false
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case c == '\\' && i+1 < len(s):
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				default:
					b.WriteByte(s[i])
				}
			case c == '"':
				s, closed = s[i+1:], true
			default:
				b.WriteByte(c)
			}
			if closed {
				break
			}
		}
		if !closed {
			return nil, 0, fmt.Errorf("an unterminated label value")
		}
		labels[name] = b.String()
		s = strings.TrimPrefix(strings.TrimLeft(s, " "), ",")
	}
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, 0, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return nil, 0, fmt.Errorf("value %q: %w", fields[0], err)
	}
	return labels, v, nil
}

// RemovedAPIs finds the deprecated APIs the API server on host was asked for that the target version
// removes (a removed release at or before the target's minor version): clients still using them break
// when that API server is upgraded.
func RemovedAPIs(host string, apis []DeprecatedAPI, target *version.Version) Report {
	var out Report
	for _, a := range apis {
		if a.RemovedRelease == "" {
			continue
		}
		removed, err := version.ParseGeneric(a.RemovedRelease)
		if err != nil || removed.Major() != target.Major() || removed.Minor() > target.Minor() {
			continue
		}
		out = append(out, blocker(CheckRemovedAPI, "API "+a.String(), "was requested from the API server on %s since it started, and is removed in Kubernetes %d.%d (the target is v%s): move its clients (manifests, charts, controllers) to the API that replaces it (kubectl get %s -A shows its objects); the API server's audit log names the clients",
			host, removed.Major(), removed.Minor(), target, a.String()))
	}
	return out
}
