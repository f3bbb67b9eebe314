package playbooks

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/artifacts/pull"
	"github.com/clusterctl/clusterctl/tasks/charts"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/render"
	"github.com/clusterctl/clusterctl/tasks/statedir"
	"github.com/clusterctl/clusterctl/transport"
)

// artifacts reads the artifacts directory's manifest: the inventory's (cluster.artifacts), or the
// per-version cache on this workstation, pulled there first when it lacks what the hosts need. Its images
// and binaries are pushed, and it says which images the cluster runs.
func (d *deployment) artifacts(ctx context.Context, p *plan) (artifactSet, error) {
	c := d.e.Inv.Cluster
	a := artifactSet{images: images.For(c.ImageRepository, c.KubernetesVersion).With(p.net.Images()...), kubeletPath: kubeadm.Binary("kubelet")}
	arches := d.arches(p)
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
	why := ""
	if err == nil {
		why = d.lacksWith(ctx, p, m, arches, a.artDir, &a.addonImages)
	}
	if c.Artifacts == "" && (err != nil || why != "") {
		if m != nil {
			arches = unionArches(arches, m)
		}
		d.e.say("artifacts", "", "pulling Kubernetes %s for %s into %s", c.KubernetesVersion, strings.Join(arches, ","), a.artDir)
		checksums := ""
		if c.Downloads.Checksums != "" {
			checksums = d.e.Inv.Resolve(c.Downloads.Checksums)
		}
		lock := ""
		if c.Downloads.Lock != "" {
			lock = d.e.Inv.Resolve(c.Downloads.Lock)
		}
		m, err = pull.Pull(ctx, pull.Options{KubernetesVersion: c.KubernetesVersion, Arches: arches, Dir: a.artDir, SkipImages: c.Registry.Pull,
			Sources: pull.DefaultSources().Override(pull.SourcesOf(c.Downloads)), ImageRepository: c.ImageRepository,
			Checksums: checksums, AllowHTTP: c.Downloads.AllowHTTP, InsecureRegistries: c.Downloads.InsecureRegistries,
			Lock: lock, RequireLock: c.Downloads.RequireLock,
			ExtraImages: c.ExtraImages, Optional: p.net.Images(), Charts: charts.PullCharts(d.e.Inv), AddonImages: charts.PullImages(d.e.Inv),
			Events: func(ev pull.Event) {
				switch {
				case ev.Type == pull.EventFileDone && !ev.Cached:
					d.e.say("artifacts", "", "%s: %d bytes in %dms, verified", ev.File, ev.Bytes, ev.DurationMS)
				case ev.Type == pull.EventUnpinned:
					d.e.say("artifacts", "", "first pull of %s: nothing pinned its digest %s (from %s); it is now in %s", ev.File, ev.Digest, ev.URL, ev.Lock)
				}
			}})
		if err != nil {
			return a, fmt.Errorf("pulling the artifacts (clusterctl artifacts pull does the same, with progress): %w", err)
		}
		why = d.lacksWith(ctx, p, m, arches, a.artDir, &a.addonImages)
	}
	if err != nil {
		return a, fmt.Errorf("artifacts directory (cluster.artifacts): %w", err)
	}
	if m.KubernetesVersion != c.KubernetesVersion {
		return a, fmt.Errorf("artifacts directory %s holds Kubernetes %s, the inventory asks for %s", a.artDir, m.KubernetesVersion, c.KubernetesVersion)
	}
	if why != "" {
		return a, fmt.Errorf("artifacts directory %s %s: clusterctl artifacts pull --out %s fills it", a.artDir, why, a.artDir)
	}
	a.manifest = m
	if c.Registry.Pull {
		a.images = a.images.FromRegistry()
	} else {
		a.images = a.images.WithManifest(m, p.facts[p.cp1.Name].Arch)
		// A digest is one architecture's image: Pods that may run on nodes of several (the add-ons'
		// DaemonSets) name it by tag, and so does every Pod of such a cluster.
		if arches, known := d.clusterArches(ctx, p); !known || len(arches) > 1 {
			a.images = a.images.Unpinned()
			d.e.say("artifacts", "", "images run by tag, not digest: %s", archesWhy(arches, known))
		}
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
		data, err := statedir.ReadFile(d.e.Inv.Resolve(c.Registry.CA), 1<<20)
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

// arches are the architectures of the run's hosts (amd64 when none is known yet).
func (d *deployment) arches(p *plan) []string {
	var out []string
	for _, f := range p.facts {
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

// clusterArches are the architectures of the cluster's nodes: the run's hosts' (their facts), and, for a
// run on some of the hosts, the registered Nodes' (kubernetes.io/arch). known is false when the API does
// not say.
func (d *deployment) clusterArches(ctx context.Context, p *plan) (arches []string, known bool) {
	arches = d.arches(p)
	if len(p.hosts) == len(d.e.Inv.Hosts) {
		return arches, true
	}
	c, err := d.e.Admin(ctx)
	if err != nil {
		return arches, false
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := c.Kube.CoreV1().Nodes().List(lctx, metav1.ListOptions{})
	if err != nil {
		return arches, false
	}
	for _, n := range list.Items {
		if a := n.Labels[corev1.LabelArchStable]; a != "" && !slices.Contains(arches, a) {
			arches = append(arches, a)
		}
	}
	slices.Sort(arches)
	return arches, true
}

func archesWhy(arches []string, known bool) string {
	if !known {
		return "the API does not say which architectures the cluster's nodes have"
	}
	return "the cluster's nodes are " + strings.Join(arches, " and ") + ", and a digest names one architecture's image"
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

// hostsHaveWhatTheyNeed checks that hosts have what clusterctl does not install: with the host's own
// runtime, the CNI plugins the pod network needs.
func (d *deployment) hostsHaveWhatTheyNeed(p *plan) error {
	need := p.net.Binaries()
	if d.e.Inv.Cluster.InstallsRuntime() || len(need) == 0 {
		return nil
	}
	for name, f := range p.facts {
		if f.CNIBinDir == "" {
			return fmt.Errorf("%s has no CNI plugins (%s in /opt/cni/bin or /usr/lib/cni): install your distribution's CNI plugins package (containernetworking-plugins), or let clusterctl install them (cluster.containerRuntime: artifacts)", name, strings.Join(need, ", "))
		}
	}
	return nil
}

// artifact is where an artifact is on the workstation.
func (d *deployment) artifact(p *plan, f artifacts.File) string {
	return filepath.Join(p.artDir, filepath.FromSlash(f.Path))
}

// artifactFile is an artifact put at at on a host, streamed from the workstation's file.
func (d *deployment) artifactFile(p *plan, f artifacts.File, at string, mode fs.FileMode) transport.File {
	return transport.File{Path: at, Source: d.artifact(p, f), Size: f.Size, SHA256: f.SHA256, Mode: mode}
}

// neededByAny: some host of the run receives the file.
func (d *deployment) neededByAny(p *plan, f artifacts.File) bool {
	return slices.ContainsFunc(p.hosts, func(h *inventory.Host) bool { return d.needed(p, f, h) })
}

func (d *deployment) archNeeded(p *plan, arch string) bool {
	for _, f := range p.facts {
		if f.Arch == arch {
			return true
		}
	}
	return false
}

// artifactNeed is a file of an artifacts directory the run's hosts may receive: its kind and name ("": any
// file of the kind), whether the directory must hold it for each architecture of the run, and which hosts
// receive it.
type artifactNeed struct {
	kind, name string
	required   bool
	to         func(h *inventory.Host) bool
}

// artifactNeeds is the one table of what the run takes from an artifacts directory: what the directory
// must hold (lacks) and which host receives what (needed).
func (d *deployment) artifactNeeds(p *plan) []artifactNeed {
	c := d.e.Inv.Cluster
	ext := d.e.Inv.ExternalEtcd()
	node := (*inventory.Host).IsNode
	cp := func(h *inventory.Host) bool { return h.Has(inventory.RoleControlPlane) }
	etcdHost := func(h *inventory.Host) bool { return ext && h.Has(inventory.RoleEtcd) }
	cpOrEtcd := func(h *inventory.Host) bool { return cp(h) || etcdHost(h) }
	needs := []artifactNeed{
		{artifacts.KindBinary, "kubelet", true, node},
		{artifacts.KindBinary, "kubectl", true, cp},
		// an external member runs etcd as a unit; everyone with a member, or a client of it, has the tools
		{artifacts.KindBinary, "etcd", ext, etcdHost},
		{artifacts.KindBinary, "etcdctl", false, cpOrEtcd},
		{artifacts.KindBinary, "etcdutl", false, cpOrEtcd},
	}
	if !c.Registry.Pull { // else the hosts pull every image
		for _, n := range images.Names {
			to := node
			switch n {
			case images.APIServer, images.ControllerManager, images.Scheduler, images.Etcd:
				to = cp
			case images.APIServerProxy:
				to = func(h *inventory.Host) bool { return h.IsNode() && d.localProxy(p) }
			}
			needs = append(needs, artifactNeed{artifacts.KindImage, n, true, to})
		}
		for _, ref := range c.ExtraImages {
			needs = append(needs, artifactNeed{artifacts.KindImage, pull.ExtraImageName(ref), true, node})
		}
		for _, im := range p.net.Images() {
			needs = append(needs, artifactNeed{artifacts.KindImage, im.Name, true, node})
		}
		for _, ref := range slices.Sorted(maps.Keys(p.addonImages)) {
			if !slices.Contains(c.ExtraImages, ref) {
				needs = append(needs, artifactNeed{artifacts.KindImage, pull.ExtraImageName(ref), true, node})
			}
		}
	}
	if c.InstallsRuntime() {
		for _, n := range append(slices.Clone(pull.ContainerdBinaries), "runc") {
			needs = append(needs, artifactNeed{artifacts.KindRuntime, n, true, node})
		}
		for _, n := range pull.CNIPlugins {
			needs = append(needs, artifactNeed{artifacts.KindCNI, n, true, node})
		}
		// and whatever else of the runtime the directory has (crictl)
		needs = append(needs, artifactNeed{artifacts.KindRuntime, "", false, node}, artifactNeed{artifacts.KindCNI, "", false, node})
	}
	return needs
}

// lacksWith is lacks with the add-ons: their charts, and the images they run (rendered from the charts
// in the directory with the inventory's values), which it sets in addonImages.
func (d *deployment) lacksWith(ctx context.Context, p *plan, m *artifacts.Manifest, arches []string, dir string, addonImages *map[string][]string) string {
	if len(d.e.Inv.Cluster.Addons) == 0 {
		return d.lacks(p, m, arches)
	}
	for i := range d.e.Inv.Cluster.Addons {
		a := &d.e.Inv.Cluster.Addons[i]
		if s := a.Source(); (s == inventory.AddonRepository || s == inventory.AddonOCI) && charts.FindChart(m, a) == nil {
			return fmt.Sprintf("has no chart %s %s from %s", a.Chart, a.Version, a.Repository)
		}
	}
	desired, err := charts.Desire(d.e.Inv, dir, m, nil)
	if err == nil {
		*addonImages, err = charts.ImagesOf(ctx, desired, d.e.Inv.Cluster.KubernetesVersion)
	}
	if err != nil {
		return "cannot give the add-ons' images: " + err.Error()
	}
	return d.lacks(p.with(func(p *plan) { p.addonImages = *addonImages }), m, arches)
}

// lacks says what the manifest misses for these architectures ("" when nothing).
func (d *deployment) lacks(p *plan, m *artifacts.Manifest, arches []string) string {
	if m.KubernetesVersion != d.e.Inv.Cluster.KubernetesVersion {
		return "holds Kubernetes " + m.KubernetesVersion
	}
	needs := d.artifactNeeds(p)
	for _, arch := range arches {
		for _, n := range needs {
			if n.required && m.Find(n.kind, n.name, arch) == nil {
				return fmt.Sprintf("has no %s %s for %s", n.kind, n.name, arch)
			}
		}
	}
	return ""
}

// needed says whether a file of the artifacts goes to a host.
func (d *deployment) needed(p *plan, f artifacts.File, h *inventory.Host) bool {
	for _, n := range d.artifactNeeds(p) {
		if n.kind == f.Kind && (n.name == f.Name || n.name == "") {
			return n.to(h)
		}
	}
	return false
}
