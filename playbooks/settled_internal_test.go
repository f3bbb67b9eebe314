package playbooks

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/facts"
)

// settledPlan is a rendered plan of the three-local-proxy inventory, every host's facts those of a joined
// node with the stamp of that plan and its files as they were.
func settledPlan(t *testing.T) (*upRun, *plan) {
	t.Helper()
	inv, diags, err := inventory.Load(filepath.Join("testdata", "three-local-proxy.yaml"))
	if err != nil || diags.HasErrors() {
		t.Fatal(err, diags)
	}
	inv.Cluster.Artifacts = fakeArtifacts(t, inv.Cluster.KubernetesVersion)
	e := NewEnv(EnvConfig{Inv: inv, Hosts: allHosts(inv), StateDir: t.TempDir()})
	d, p, err := newDeployment(e, e.Hosts, deployOptions{Now: func() time.Time { return time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range p.hosts {
		p.facts[h.Name] = &facts.Facts{Arch: "amd64", CNIBinDir: "/opt/cni/bin", Files: map[string]bool{}, DefaultIface: "eth0",
			Addresses: []facts.Address{{Iface: "eth0", CIDR: h.Address + "/64"}}, KubeletActive: true, CRIAnswers: "ok"}
		p.nodeIPs[h.Name] = h.NodeIPs(p.facts[h.Name].NodeIPs())
	}
	if p, err = d.render(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	u := &upRun{deployment: d, res: &UpResult{}}
	for _, h := range p.hosts {
		digest, paths, err := u.stampOf(p, h.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(paths) == 0 || !strings.HasPrefix(paths[0], "/") {
			t.Fatalf("%s: the stamp's paths %v", h.Name, paths)
		}
		p.facts[h.Name].Stamp, p.facts[h.Name].StampFiles = "v1 "+digest+" state -", "state"
	}
	return u, p
}

// A host's stamp is the same for the same plan (a joining host's own files left out), another for another
// host or another inventory; the run is settled only when every host is, and says which is not and why.
func TestSettledStamps(t *testing.T) {
	u, p := settledPlan(t)
	if why, err := u.unsettledHost(p); err != nil || why != "" {
		t.Fatalf("every host stamped with the plan: %q, %v", why, err)
	}
	a, b := p.hosts[0].Name, p.hosts[1].Name
	da, _, _ := u.stampOf(p, a)
	db, _, _ := u.stampOf(p, b)
	joining, _, _ := u.stampOf(p.with(func(p *plan) { p.joining = map[string]bool{a: true} }), a)
	if da == db || joining != da {
		t.Errorf("digests: %s %s, %s joining %s", a, da, b, db)
	}

	for _, c := range []struct {
		name   string
		change func(*plan)
		want   string
	}{
		{"a file changed", func(p *plan) { p.facts[b].StampFiles = "other" }, b + ": its stamp is of another plan, or a file it lists changed since"},
		{"no stamp", func(p *plan) { p.facts[b].Stamp = "" }, b + " has no stamp"},
		{"routes missing", func(p *plan) { p.facts[b].RoutesMissing = 2 }, b + ": the kernel lacks 2 of its pod routes"},
		{"the kubelet stopped", func(p *plan) { p.facts[b].KubeletActive = false }, b + ": the kubelet is not running"},
	} {
		q := p.with(func(q *plan) {
			for name, f := range q.facts {
				c := *f
				q.facts[name] = &c
			}
		})
		c.change(q)
		if why, _ := u.unsettledHost(q); !strings.HasPrefix(why, c.want) {
			t.Errorf("%s: %q, want %q", c.name, why, c.want)
		}
	}

	// Another inventory is another plan: a Node label added changes every host's digest.
	u.e.Inv.Hosts[0].Labels = map[string]string{"zone": "b"}
	if why, _ := u.unsettledHost(p); !strings.Contains(why, "another plan") {
		t.Errorf("the inventory changed: %q", why)
	}
	u.e.Inv.Hosts[0].Labels = nil
	u.e.Inv.Hooks.Up.After = []inventory.Hook{{Run: "true"}}
	if why, _ := u.unsettledHost(p); !strings.Contains(why, "hooks") {
		t.Errorf("with hooks: %q", why)
	}
}
