package etcdmember

import (
	"fmt"
	"os"
	"regexp"
	"testing"
)

// atLeast reports whether the module version v (vX.Y.Z, maybe with a suffix) is at least min (vX.Y.Z).
func atLeast(v, min string) bool {
	var a, b [3]int
	if _, err := fmt.Sscanf(v, "v%d.%d.%d", &a[0], &a[1], &a[2]); err != nil {
		return false
	}
	if _, err := fmt.Sscanf(min, "v%d.%d.%d", &b[0], &b[1], &b[2]); err != nil {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return true
}

// The etcd client is at a release with the fix for GO-2026-6107 (CVE-2026-73500: a server could make the
// client's TLS handshakes pile up without bound), fixed in go.etcd.io/etcd/client/pkg/v3 v3.7.1.
func TestEtcdClientFixed(t *testing.T) {
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, mod := range []string{"go.etcd.io/etcd/client/pkg/v3", "go.etcd.io/etcd/client/v3"} {
		m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(mod) + ` (v\S+)`).FindSubmatch(data)
		if m == nil {
			t.Errorf("go.mod does not require %s", mod)
			continue
		}
		if !atLeast(string(m[1]), "v3.7.1") {
			t.Errorf("%s %s: GO-2026-6107 is fixed from v3.7.1 on", mod, m[1])
		}
	}
}
