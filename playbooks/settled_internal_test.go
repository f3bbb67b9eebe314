package playbooks

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/bootstrap"
	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/transport"
)

// settledPlan is a rendered plan of the inventory in testdata, every host's facts those of a joined node
// with the stamp of that plan and its files as they were.
func settledPlan(t *testing.T, file string) (*upRun, *plan) {
	t.Helper()
	inv, diags, err := inventory.Load(filepath.Join("testdata", file))
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
	u, p := settledPlan(t, "three-local-proxy.yaml")
	if why, err := u.unsettledHost(p); err != nil || why != "" {
		t.Fatalf("every host stamped with the plan: %q, %v", why, err)
	}
	a, b := p.hosts[0].Name, p.hosts[1].Name
	da, _, _ := u.stampOf(p, a)
	db, _, _ := u.stampOf(p, b)
	// The same host joining (a token of its own): its plan has the bootstrap kubeconfig, its stamp not.
	tok, err := bootstrap.NewToken(a, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	u.tokens = map[string]bootstrap.Token{a: tok}
	asJoining := p.with(func(p *plan) { p.joining = map[string]bool{a: true} })
	if n, _ := u.node(asJoining, a); !slices.ContainsFunc(n.Files, func(f transport.File) bool { return f.Path == kubeadm.BootstrapKubeconfig }) {
		t.Fatalf("%s joining: no %s in its plan", a, kubeadm.BootstrapKubeconfig)
	}
	joining, _, _ := u.stampOf(asJoining, a)
	u.tokens = nil
	if da == db || joining != da {
		t.Errorf("digests: %s %s, %s %s, %s joining %s", a, da, b, db, a, joining)
	}

	for _, c := range []struct {
		name   string
		change func(*plan)
		want   string
	}{
		{"a file changed", func(p *plan) { p.facts[b].StampFiles = "other" }, b + ": a file its stamp lists changed since"},
		{"no stamp", func(p *plan) { p.facts[b].Stamp = "" }, b + ": no stamp"},
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

// An etcd host's initial cluster is written only until its member is in the cluster (the first run gets
// it, a re-run does not): its stamp is the same either way, or no re-run of a cluster with etcd hosts
// would be settled.
func TestSettledStampEtcdHosts(t *testing.T) {
	u, p := settledPlan(t, "external-etcd.yaml")
	for _, name := range []string{"etcd1", "w1"} {
		first, paths, err := u.stampOf(p, name)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(paths, kubeadm.EtcdInitialEnv) {
			t.Errorf("%s: the stamp lists %s", name, kubeadm.EtcdInitialEnv)
		}
		found := false
		rerun := p.with(func(q *plan) {
			r := *q.rendered
			r.Hosts = slices.Clone(r.Hosts)
			for i, hf := range r.Hosts {
				if hf.Host == name {
					hf.Files = slices.DeleteFunc(slices.Clone(hf.Files), func(f transport.File) bool { return f.Path == kubeadm.EtcdInitialEnv })
					found = found || len(hf.Files) < len(r.Hosts[i].Files)
					r.Hosts[i] = hf
				}
			}
			q.rendered = &r
		})
		if !found {
			t.Fatalf("%s: the first run's plan has no %s", name, kubeadm.EtcdInitialEnv)
		}
		if again, _, _ := u.stampOf(rerun, name); again != first {
			t.Errorf("%s: the re-run's stamp differs from the first run's", name)
		}
	}
}
