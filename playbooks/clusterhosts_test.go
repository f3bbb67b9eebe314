package playbooks

import (
	"errors"
	"testing"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/etcdmember"
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

// etcd status: a host that did not answer is a member of unknown standing when no member gave the list,
// not "not a member".
func TestEtcdMemberUnknown(t *testing.T) {
	hosts := []*inventory.Host{{Name: "cp1", NodeName: "cp1"}, {Name: "cp2", NodeName: "cp2"}}
	seen := &etcdSeen{statuses: map[string]*etcdmember.Status{}, lists: map[string][]etcdmember.Member{}, peers: map[string]string{},
		failed: map[string]error{"cp1": errors.New("cannot connect"), "cp2": errors.New("cannot connect")}}
	for _, m := range seen.members(hosts, nil) {
		if m.Member != nil || m.IsMember() {
			t.Errorf("%s: member %v, want unknown", m.Host, *m.Member)
		}
	}
	seen.peers["cp1"] = "https://10.0.0.1:2380"
	delete(seen.failed, "cp1")
	for _, m := range seen.members(hosts, []etcdmember.Member{{Name: "cp1", PeerURL: "https://10.0.0.1:2380", Started: true}}) {
		if want := m.Host == "cp1"; m.Member == nil || *m.Member != want {
			t.Errorf("%s: member %v, want %v", m.Host, m.Member, want)
		}
	}
}
