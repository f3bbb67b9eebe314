package playbooks

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apply"
	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/artifacts/pull"
	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/preflight"
	"github.com/clusterctl/clusterctl/tasks/scripts"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fakeArtifacts is an artifacts directory of every kind of file up pushes, each a few bytes.
func fakeArtifacts(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	v, err := pull.VersionsFor(version)
	if err != nil {
		t.Fatal(err)
	}
	m := &artifacts.Manifest{KubernetesVersion: version, EtcdVersion: v.Etcd, CoreDNSVersion: v.CoreDNS, PauseVersion: v.Pause, ContainerdVersion: v.Containerd}
	add := func(layout, kind, name, image string) {
		rel := layout + "/linux-amd64/" + name
		if kind == artifacts.KindImage {
			rel += ".tar"
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := m.Add(dir, artifacts.File{Path: rel, Kind: kind, Name: name, Arch: "amd64", Image: image}); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range append(slices.Clone(pull.KubernetesBinaries), pull.EtcdBinaries...) {
		add("bin", artifacts.KindBinary, b, "")
	}
	for _, b := range append(slices.Clone(pull.ContainerdBinaries), "runc", "crictl") {
		add("runtime", artifacts.KindRuntime, b, "")
	}
	for _, b := range pull.CNIPlugins {
		add("cni", artifacts.KindCNI, b, "")
	}
	set := images.For("registry.k8s.io", version)
	for _, n := range images.Names {
		add("images", artifacts.KindImage, n, set.Ref(n))
	}
	if err := m.Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The exact commands up runs on each host of representative inventories (IPv6 addresses, dotted names, an
// endpoint with a port, a registry with a port; the node-local proxy of three control-plane nodes): the
// preflight probes, the setup after the first push (every file new), the kubelet's start. Each is checked by
// sh -n too. go test ./playbooks -update rewrites testdata/commands; review the diff.
func TestCommandsGolden(t *testing.T) {
	for _, name := range []string{"ipv6-endpoint", "three-local-proxy", "external-etcd"} {
		t.Run(name, func(t *testing.T) {
			inv, diags, err := inventory.Load(filepath.Join("testdata", name+".yaml"))
			if err != nil || diags.HasErrors() {
				t.Fatalf("%v %v", err, diags)
			}
			inv.Cluster.Artifacts = fakeArtifacts(t, inv.Cluster.KubernetesVersion)
			e := NewEnv(EnvConfig{Inv: inv, Hosts: allHosts(inv), StateDir: t.TempDir()})
			d, p, err := newDeployment(e, e.Hosts, deployOptions{Now: func() time.Time { return time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC) }, TokenTTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range p.hosts {
				p.facts[h.Name] = &facts.Facts{Arch: "amd64", CNIBinDir: "/opt/cni/bin", Files: map[string]bool{}, DefaultIface: "eth0",
					Commands: map[string]bool{"kubelet": true, "haproxy": true}, Addresses: []facts.Address{{Iface: "eth0", CIDR: h.Address + "/64"}}}
				p.nodeIPs[h.Name] = h.NodeIPs(p.facts[h.Name].NodeIPs())
			}
			if p, err = d.render(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			if err := d.prepare(p); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			cp1IP := p.nodeIPs[p.cp1.Name].String()
			for _, h := range p.hosts {
				n, err := d.node(p, h.Name)
				if err != nil {
					t.Fatal(err)
				}
				var paths []string
				for _, f := range append(n.Files, n.Mark) {
					paths = append(paths, f.Path)
				}
				cp := h.Has(inventory.RoleControlPlane)
				cmds := []struct{ what, cmd string }{
					{"preflight: the API server's port, from this host", preflight.ProbeCommand(cp1IP, inv.Cluster.APIServer.BindPort)},
					{"preflight: a listener on this host's etcd peer port", scripts.Listen(p.nodeIPs[h.Name].String(), kubeadm.PortEtcdPeer)},
					{"push: setup after the first push", apply.SetupScript(n, paths)},
				}
				if n.EtcdUnit {
					cmds = append(cmds, struct{ what, cmd string }{"start etcd", scripts.Etcd(scripts.EtcdParams{RestartTimeout: 300})})
				}
				if h.IsNode() {
					cmds = append(cmds, struct{ what, cmd string }{"start the kubelet", scripts.Kubelet(scripts.KubeletParams{Inputs: apply.KubeletInputs(cp, p.kubeletPath)})})
				}
				for _, c := range cmds {
					if out, err := exec.Command("sh", "-n", "-c", c.cmd).CombinedOutput(); err != nil {
						t.Errorf("%s: %s: sh -n: %v: %s", h.Name, c.what, err, out)
					}
					fmt.Fprintf(&b, "######## %s: %s\n%s\n", h.Name, c.what, strings.TrimRight(c.cmd, "\n"))
				}
			}
			file := filepath.Join("testdata", "commands", name+".sh")
			if *update {
				if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (go test ./playbooks -update writes it)", err)
			}
			if string(want) != b.String() {
				t.Errorf("the commands for %s differ from %s (go test ./playbooks -update rewrites it; review the diff)", name, file)
			}
		})
	}
}
