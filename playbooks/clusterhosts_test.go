package playbooks

import (
	"testing"

	"github.com/clusterctl/clusterctl/inventory"
)

func TestPartOfCluster(t *testing.T) {
	hosts := []*inventory.Host{
		{Name: "cp1", NodeName: "cp1", Roles: []inventory.Role{inventory.RoleControlPlane}},
		{Name: "etcd1", Roles: []inventory.Role{inventory.RoleEtcd}},
		{Name: "w1", NodeName: "w1", Roles: []inventory.Role{inventory.RoleWorker}},
		{Name: "w9", NodeName: "w9", Roles: []inventory.Role{inventory.RoleWorker}},
	}
	in, out := partOfCluster(hosts, map[string]bool{"cp1": true, "w1": true})
	if len(in) != 3 || in[1].Name != "etcd1" || len(out) != 1 || out[0].Name != "w9" {
		t.Errorf("in %v, out %v", in, out)
	}
}
