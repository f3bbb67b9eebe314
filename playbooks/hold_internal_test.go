package playbooks

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/transport"
)

// A new cluster's first control-plane node is pushed without its scheduler's manifest, for waitAPI to
// write once the API server is ready; a node whose API server runs already (a re-run, add-node), another
// host, and a dry run keep it in the push.
func TestHoldScheduler(t *testing.T) {
	inv, diags, err := inventory.Load(filepath.Join("testdata", "three-local-proxy.yaml"))
	if err != nil || diags.HasErrors() {
		t.Fatal(err, diags)
	}
	e := NewEnv(EnvConfig{Inv: inv, Hosts: allHosts(inv), StateDir: t.TempDir()})
	d, p, err := newDeployment(e, e.Hosts, deployOptions{Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	sched := kubeadm.Manifest(kubeadm.Scheduler)
	node := func() *apply.Node {
		return &apply.Node{Files: []transport.File{{Path: kubeadm.Manifest(kubeadm.APIServer)}, {Path: sched}, {Path: "/etc/kubernetes/kubelet.conf"}}}
	}
	pushes := func(u *upRun, host string) bool {
		n := node()
		u.hold(p)(host, n)
		return slices.ContainsFunc(n.Files, func(f transport.File) bool { return f.Path == sched })
	}
	cp1, other := p.cp1.Name, ""
	for _, h := range p.hosts {
		if h != p.cp1 {
			other = h.Name
			break
		}
	}
	facts := func(apiServer bool) map[string]*facts.Facts {
		m := map[string]*facts.Facts{}
		for _, h := range p.hosts {
			m[h.Name] = &facts.Facts{Files: map[string]bool{kubeadm.Manifest(kubeadm.APIServer): apiServer}}
		}
		return m
	}

	p = p.with(func(p *plan) { p.facts = facts(false) })
	u := &upRun{deployment: d}
	if pushes(u, cp1) || len(u.heldScheduler) != 1 || u.heldScheduler[0].Path != sched {
		t.Errorf("a new cluster's %s: the scheduler's manifest pushed (held: %v)", cp1, u.heldScheduler)
	}
	if u := (&upRun{deployment: d}); !pushes(u, other) || len(u.heldScheduler) != 0 {
		t.Errorf("%s, not the first control-plane node: the scheduler's manifest held", other)
	}
	if u := (&upRun{deployment: d, o: UpOptions{DryRun: true}}); !pushes(u, cp1) || len(u.heldScheduler) != 0 {
		t.Error("a dry run holds the scheduler's manifest")
	}
	p = p.with(func(p *plan) { p.facts = facts(true) })
	if u := (&upRun{deployment: d}); !pushes(u, cp1) || len(u.heldScheduler) != 0 {
		t.Errorf("%s with its API server running: the scheduler's manifest held", cp1)
	}
}
