package playbooks

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/artifacts"
)

// Which host receives which file of an artifacts directory, and what the directory must hold, from the one
// table (artifactNeeds): control-plane nodes their images and tools, workers the kubelet and the node
// images, external etcd hosts etcd's binaries only; no image when hosts pull, no runtime when it is theirs.
func TestArtifactNeeds(t *testing.T) {
	load := func(name string, change func(*inventory.Inventory)) (*deployment, *plan, *artifacts.Manifest) {
		t.Helper()
		inv, diags, err := inventory.Load(filepath.Join("testdata", name+".yaml"))
		if err != nil || diags.HasErrors() {
			t.Fatal(err, diags)
		}
		change(inv)
		m, err := artifacts.Load(fakeArtifacts(t, inv.Cluster.KubernetesVersion))
		if err != nil {
			t.Fatal(err)
		}
		e := NewEnv(EnvConfig{Inv: inv, Hosts: allHosts(inv), StateDir: t.TempDir()})
		d, p, err := newDeployment(e, e.Hosts, deployOptions{Now: time.Now})
		if err != nil {
			t.Fatal(err)
		}
		return d, p, m
	}
	// gets lists what host receives, as kind/name.
	gets := func(d *deployment, p *plan, m *artifacts.Manifest, host string) []string {
		var out []string
		for _, f := range m.Files {
			if d.needed(p, f, d.e.Inv.Host(host)) {
				out = append(out, f.Kind+"/"+f.Name)
			}
		}
		return out
	}
	has := func(list []string, want ...string) bool {
		for _, w := range want {
			if !slices.Contains(list, w) {
				return false
			}
		}
		return true
	}
	d, p, m := load("three-local-proxy", func(*inventory.Inventory) {})
	cp, w := p.cp1.Name, p.workers()[0].Name
	if g := gets(d, p, m, cp); !has(g, "binary/kubelet", "binary/kubectl", "binary/etcdutl", "image/kube-apiserver", "image/etcd", "image/apiserver-proxy", "runtime/crictl", "cni/bridge") || slices.Contains(g, "binary/etcd") {
		t.Errorf("control-plane node %s gets %v", cp, g)
	}
	if g := gets(d, p, m, w); !has(g, "binary/kubelet", "image/kube-proxy", "image/pause", "image/apiserver-proxy", "runtime/containerd") || slices.ContainsFunc(g, func(s string) bool {
		return s == "binary/kubectl" || s == "image/kube-apiserver" || s == "binary/etcdutl"
	}) {
		t.Errorf("worker %s gets %v", w, g)
	}
	if why := d.lacks(p, m, []string{"amd64"}); why != "" {
		t.Errorf("a full directory lacks %s", why)
	}
	if why := d.lacks(p, m, []string{"arm64"}); why != "has no binary kubelet for arm64" {
		t.Errorf("another architecture: %q", why)
	}

	d, p, m = load("three-local-proxy", func(i *inventory.Inventory) {
		i.Cluster.Registry.Pull, i.Cluster.ContainerRuntime = true, inventory.RuntimeHost
	})
	if g := gets(d, p, m, p.cp1.Name); slices.ContainsFunc(g, func(s string) bool { return s[:5] == "image" || s[:7] == "runtime" || s[:3] == "cni" }) {
		t.Errorf("pulling hosts with their own runtime get %v", g)
	}

	d, p, m = load("external-etcd", func(*inventory.Inventory) {})
	for _, h := range p.hosts {
		if h.Has(inventory.RoleEtcd) && !h.IsNode() {
			if g := gets(d, p, m, h.Name); !slices.Equal(g, []string{"binary/etcd", "binary/etcdctl", "binary/etcdutl"}) {
				t.Errorf("etcd host %s gets %v", h.Name, g)
			}
		}
	}
	m.Files = slices.DeleteFunc(m.Files, func(f artifacts.File) bool { return f.Name == "etcd" && f.Kind == artifacts.KindBinary })
	if why := d.lacks(p, m, []string{"amd64"}); why != "has no binary etcd for amd64" {
		t.Errorf("external etcd without etcd: %q", why)
	}
}
