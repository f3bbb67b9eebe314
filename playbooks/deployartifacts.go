package playbooks

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/artifacts/pull"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/render"
	"github.com/clusterctl/clusterctl/transport"
)

// artifacts reads the artifacts directory's manifest: the inventory's (cluster.artifacts), or the
// per-version cache on this workstation, pulled there first when it lacks what the hosts need. Its images
// and binaries are pushed, and it says which images the cluster runs.
func (d *deployment) artifacts(ctx context.Context) (artifactSet, error) {
	c := d.e.Inv.Cluster
	a := artifactSet{images: images.For(c.ImageRepository, c.KubernetesVersion), kubeletPath: kubeadm.Binary("kubelet")}
	arches := d.arches()
	if c.Artifacts != "" {
		a.artDir = d.e.Inv.Resolve(c.Artifacts)
	} else {
		dir, err := pull.CacheDir(c.KubernetesVersion)
		if err != nil {
			return a, err
		}
		a.artDir = dir
	}
	if _, err := os.Stat(a.artDir); err == nil {
		// What the hosts run as root comes from it: trusted like the state directory.
		if err := pull.CheckDir(a.artDir); err != nil {
			return a, err
		}
	}
	m, err := artifacts.Load(a.artDir)
	if c.Artifacts == "" && (err != nil || d.lacks(m, arches) != "") {
		if m != nil {
			arches = unionArches(arches, m)
		}
		d.e.say("artifacts", "", "pulling Kubernetes %s for %s into %s", c.KubernetesVersion, strings.Join(arches, ","), a.artDir)
		checksums := ""
		if c.Downloads.Checksums != "" {
			checksums = d.e.Inv.Resolve(c.Downloads.Checksums)
		}
		m, err = pull.Pull(ctx, pull.Options{KubernetesVersion: c.KubernetesVersion, Arches: arches, Dir: a.artDir, SkipImages: c.Registry.Pull,
			Sources: pull.DefaultSources().Override(pull.SourcesOf(c.Downloads)), ImageRepository: c.ImageRepository,
			Checksums: checksums, AllowHTTP: c.Downloads.AllowHTTP, InsecureRegistries: c.Downloads.InsecureRegistries,
			ExtraImages: c.ExtraImages, Events: func(ev pull.Event) {
				if ev.Type == pull.EventFileDone && !ev.Cached {
					d.e.say("artifacts", "", "%s: %d bytes in %dms, verified", ev.File, ev.Bytes, ev.DurationMS)
				}
			}})
		if err != nil {
			return a, fmt.Errorf("pulling the artifacts (clusterctl artifacts pull does the same, with progress): %w", err)
		}
	}
	if err != nil {
		return a, fmt.Errorf("artifacts directory (cluster.artifacts): %w", err)
	}
	if m.KubernetesVersion != c.KubernetesVersion {
		return a, fmt.Errorf("artifacts directory %s holds Kubernetes %s, the inventory asks for %s", a.artDir, m.KubernetesVersion, c.KubernetesVersion)
	}
	if why := d.lacks(m, arches); why != "" {
		return a, fmt.Errorf("artifacts directory %s %s: clusterctl artifacts pull --out %s fills it", a.artDir, why, a.artDir)
	}
	a.manifest = m
	if c.Registry.Pull {
		a.images = a.images.FromRegistry()
	} else {
		a.images = a.images.WithManifest(m, d.facts[d.cp1.Name].Arch)
	}
	return a, nil
}

// registry is the private registry hosts pull from (cluster.registry), with its CA read from the file the
// inventory names and credentials from the environment; nil when hosts import images.
func (d *deployment) registry() (*render.Registry, error) {
	c := d.e.Inv.Cluster
	if !c.Registry.Pull {
		return nil, nil
	}
	host, _, _ := strings.Cut(c.ImageRepository, "/")
	rg := &render.Registry{Host: host, Username: os.Getenv(RegistryUsernameEnv), Password: os.Getenv(RegistryPasswordEnv)}
	if c.Registry.CA != "" {
		data, err := readBounded(d.e.Inv.Resolve(c.Registry.CA), 1<<20)
		if err != nil {
			return nil, fmt.Errorf("cluster.registry.ca: %w", err)
		}
		rg.CA = data
	}
	return rg, nil
}

// The environment variables that hold the private registry's credentials (never the inventory).
const (
	RegistryUsernameEnv = "CLUSTERCTL_REGISTRY_USERNAME"
	RegistryPasswordEnv = "CLUSTERCTL_REGISTRY_PASSWORD"
)

// readBounded reads a file of at most limit bytes.
func readBounded(file string, limit int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", file, limit)
	}
	return data, nil
}

// arches are the architectures of the run's hosts (amd64 when none is known yet).
func (d *deployment) arches() []string {
	var out []string
	for _, f := range d.facts {
		if f.Arch != "" && !slices.Contains(out, f.Arch) {
			out = append(out, f.Arch)
		}
	}
	if len(out) == 0 {
		out = []string{"amd64"}
	}
	slices.Sort(out)
	return out
}

func unionArches(arches []string, m *artifacts.Manifest) []string {
	for _, f := range m.Files {
		if f.Arch != "" && !slices.Contains(arches, f.Arch) {
			arches = append(arches, f.Arch)
		}
	}
	slices.Sort(arches)
	return arches
}

// lacks says what the manifest misses for these architectures ("" when nothing): the kubelet, the images,
// the runtime when clusterctl installs it, the inventory's extra images.
func (d *deployment) lacks(m *artifacts.Manifest, arches []string) string {
	if m.KubernetesVersion != d.e.Inv.Cluster.KubernetesVersion {
		return "holds Kubernetes " + m.KubernetesVersion
	}
	for _, arch := range arches {
		need := []struct{ kind, name string }{{artifacts.KindBinary, "kubelet"}, {artifacts.KindBinary, "kubectl"}}
		if d.e.Inv.ExternalEtcd() {
			need = append(need, struct{ kind, name string }{artifacts.KindBinary, "etcd"})
		}
		images := slices.Clone(images.Names)
		for _, ref := range d.e.Inv.Cluster.ExtraImages {
			images = append(images, pull.ExtraImageName(ref))
		}
		if d.e.Inv.Cluster.Registry.Pull {
			images = nil // the hosts pull them
		}
		for _, n := range images {
			need = append(need, struct{ kind, name string }{artifacts.KindImage, n})
		}
		if d.e.Inv.Cluster.InstallsRuntime() {
			for _, n := range append(slices.Clone(pull.ContainerdBinaries), "runc") {
				need = append(need, struct{ kind, name string }{artifacts.KindRuntime, n})
			}
			for _, n := range pull.CNIPlugins {
				need = append(need, struct{ kind, name string }{artifacts.KindCNI, n})
			}
		}
		for _, n := range need {
			if m.Find(n.kind, n.name, arch) == nil {
				return fmt.Sprintf("has no %s %s for %s", n.kind, n.name, arch)
			}
		}
	}
	return ""
}

// hostsHaveWhatTheyNeed checks that hosts have what clusterctl does not install: with the host's own
// runtime, the CNI plugins (for the bridge network).
func (d *deployment) hostsHaveWhatTheyNeed() error {
	if d.e.Inv.Cluster.InstallsRuntime() {
		return nil
	}
	for name, f := range d.facts {
		if d.e.Inv.Cluster.CNI.Plugin == inventory.CNIBridge && f.CNIBinDir == "" {
			return fmt.Errorf("%s has no CNI plugins (bridge, host-local, portmap in /opt/cni/bin or /usr/lib/cni): install your distribution's CNI plugins package (containernetworking-plugins), or let clusterctl install them (cluster.containerRuntime: artifacts)", name)
		}
	}
	return nil
}

// artifact is where an artifact is on the workstation.
func (d *deployment) artifact(f artifacts.File) string {
	return filepath.Join(d.artDir, filepath.FromSlash(f.Path))
}

// artifactFile is an artifact put at p on a host, streamed from the workstation's file.
func (d *deployment) artifactFile(f artifacts.File, p string, mode fs.FileMode) transport.File {
	return transport.File{Path: p, Source: d.artifact(f), Size: f.Size, SHA256: f.SHA256, Mode: mode}
}

// needed says whether a file of the artifacts goes to a host: what File.NeededBy says for a node, the
// runtime when clusterctl installs it, the node-local proxy's image when nodes run it, and the inventory's
// extra images; what File.NeededByEtcdHost says for a host of an external etcd cluster.
func (d *deployment) needed(f artifacts.File, h *inventory.Host) bool {
	if d.e.Inv.ExternalEtcd() && h.Has(inventory.RoleEtcd) && f.NeededByEtcdHost() {
		return true
	}
	if !h.IsNode() || (f.Kind == artifacts.KindBinary && f.Name == "etcd") {
		return false
	}
	controlPlane := h.Has(inventory.RoleControlPlane)
	switch {
	case f.Kind == artifacts.KindImage && d.e.Inv.Cluster.Registry.Pull:
		return false // the hosts pull them
	case f.Kind == artifacts.KindRuntime || f.Kind == artifacts.KindCNI:
		return d.e.Inv.Cluster.InstallsRuntime()
	case f.Kind == artifacts.KindImage && f.Name == images.APIServerProxy:
		return d.localProxy()
	case f.Kind == artifacts.KindImage && slices.ContainsFunc(d.e.Inv.Cluster.ExtraImages, func(ref string) bool { return pull.ExtraImageName(ref) == f.Name }):
		return true
	}
	return f.NeededBy(controlPlane)
}

// neededByAny: some host of the run receives the file.
func (d *deployment) neededByAny(f artifacts.File) bool {
	return slices.ContainsFunc(d.hosts, func(h *inventory.Host) bool { return d.needed(f, h) })
}

func (d *deployment) archNeeded(arch string) bool {
	for _, f := range d.facts {
		if f.Arch == arch {
			return true
		}
	}
	return false
}
