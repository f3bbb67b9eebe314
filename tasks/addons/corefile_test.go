package addons

import (
	"strings"
	"testing"
)

func TestMigrateCorefile(t *testing.T) {
	cur := Corefile("cluster.local")
	if got, notes := MigrateCorefile("v1.14.2", "v1.14.2", cur); got != cur || notes != nil {
		t.Errorf("same version: %q %v", got, notes)
	}
	// kubeadm's own Corefile carries over unchanged between the versions clusterctl pairs.
	got, notes := MigrateCorefile("v1.12.1", "v1.14.6", cur)
	if strings.TrimSpace(got) == "" || !strings.Contains(got, "kubernetes cluster.local in-addr.arpa ip6.arpa") {
		t.Errorf("migrated: %q (notes %v)", got, notes)
	}
	// A plugin the user added survives.
	custom := strings.Replace(cur, "    errors\n", "    errors\n    log\n", 1)
	if got, _ := MigrateCorefile("v1.12.1", "v1.14.6", custom); !strings.Contains(got, "log") {
		t.Errorf("the user's log plugin was dropped: %q", got)
	}
	// An unknown version keeps the Corefile and says so.
	if got, notes := MigrateCorefile("v1.1.0", "v1.14.6", custom); got != custom || len(notes) == 0 {
		t.Errorf("unknown version: %q %v", got, notes)
	}
}
