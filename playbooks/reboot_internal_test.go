package playbooks

import (
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/reboot"
)

func TestRebootOrderAndPlan(t *testing.T) {
	host := func(name string, roles ...inventory.Role) *inventory.Host {
		return &inventory.Host{Name: name, NodeName: name, Roles: roles}
	}
	cp := inventory.RoleControlPlane
	hosts := []*inventory.Host{host("cp1", cp, inventory.RoleEtcd), host("w1", inventory.RoleWorker), host("etcd1", inventory.RoleEtcd),
		host("w2", inventory.RoleWorker), host("cp2", cp, inventory.RoleEtcd), host("w3", inventory.RoleWorker)}
	inv := &inventory.Inventory{}
	for _, h := range hosts {
		inv.Hosts = append(inv.Hosts, *h)
	}
	inv.Hooks.Reboot.Before = []inventory.Hook{{Run: "apt-get -y upgrade"}}
	r := &rebootRun{e: &Env{EnvConfig: EnvConfig{Inv: inv, Hosts: hosts}}, o: RebootOptions{MaxUnavailable: 2, DrainTimeout: time.Minute},
		res: &RebootResult{}, todo: hosts, state: map[string]reboot.State{"w2": {Needs: "reboot-required"}}}
	var got []string
	for _, b := range r.order() {
		got = append(got, strings.Join(names(b), " "))
	}
	if g := strings.Join(got, " | "); g != "cp1 | etcd1 | cp2 | w1 w2 | w3" {
		t.Errorf("order %q: want control-plane and etcd hosts one at a time, then workers two at a time", g)
	}
	if err := r.plan(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`cp1 (control-plane node): cordon, drain (up to 1m0s), hook reboot.before "apt-get -y upgrade", reboot, SSH in a new boot, Node Ready, static Pods Ready, etcd healthy on every member, uncordon`,
		`etcd1 (etcd host): hook reboot.before "apt-get -y upgrade", reboot, SSH in a new boot, etcd healthy on every member`,
		`cp2 (control-plane node): cordon, drain (up to 1m0s), hook reboot.before "apt-get -y upgrade", reboot, SSH in a new boot, Node Ready, static Pods Ready, etcd healthy on every member, uncordon`,
		`w1 (worker, batch 4 of 5): cordon, drain (up to 1m0s), hook reboot.before "apt-get -y upgrade", reboot, SSH in a new boot, Node Ready, uncordon`,
		`w2 (worker, batch 4 of 5) (reboot-required): cordon, drain (up to 1m0s), hook reboot.before "apt-get -y upgrade", reboot, SSH in a new boot, Node Ready, uncordon`,
		`w3 (worker, batch 5 of 5): cordon, drain (up to 1m0s), hook reboot.before "apt-get -y upgrade", reboot, SSH in a new boot, Node Ready, uncordon`,
	}
	if strings.Join(r.res.Order, "\n") != strings.Join(want, "\n") {
		t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(r.res.Order, "\n"), strings.Join(want, "\n"))
	}
}
