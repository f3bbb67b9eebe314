// Package images resolves a Kubernetes version to every image reference a cluster runs, with the etcd,
// CoreDNS and pause versions kubeadm pairs with it (cmd/kubeadm/app/constants: DefaultEtcdVersion,
// PauseVersion, CoreDNSVersion). An artifacts directory overrides both: its manifest names the exact
// images it holds.
package images

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/artifacts/archive"
)

// The images of a cluster, by the name artifacts manifests use.
const (
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	Proxy             = "kube-proxy"
	Etcd              = "etcd"
	CoreDNS           = "coredns"
	Pause             = "pause"
	// APIServerProxy is the node-local API proxy (haproxy) of clusters with several control-plane nodes and
	// no controlPlaneEndpoint.
	APIServerProxy = "apiserver-proxy"
)

// ProxyImage is the node-local API proxy's image.
const ProxyImage = "docker.io/library/haproxy:3.2"

// Names are every image a cluster runs.
var Names = []string{APIServer, ControllerManager, Scheduler, Proxy, Etcd, CoreDNS, Pause, APIServerProxy}

// Image is an image only some clusters run, declared by what runs it (a pod network: network.Plugin's
// Images; the NetworkPolicy controller): its name in an artifacts manifest and its upstream reference.
type Image struct {
	Name, Ref string
}

// Set is the images of one cluster.
type Set struct {
	Repository string // registry.k8s.io or a mirror
	Kubernetes string // v1.37.2
	Etcd       string // 3.6.5: the image is tagged 3.6.5-0
	Pause      string // 3.10.1
	CoreDNS    string // v1.12.1
	// exact references, by name, from an artifacts manifest; pinned: with their digests, where its archives
	// name the images by them
	exact, pinned map[string]string
	// declared are the images of With: by name, their upstream references
	declared map[string]string
	// fromRegistry: hosts pull every image from Repository, the node-local proxy's too.
	fromRegistry bool
}

// FromRegistry is the set hosts pull from Repository (a private registry holding every image, the proxy's
// as <repository>/haproxy).
func (s Set) FromRegistry() Set {
	s.fromRegistry, s.exact, s.pinned = true, nil, nil
	return s
}

// Paired are the etcd, pause and CoreDNS versions kubeadm deploys with each Kubernetes minor release
// (cmd/kubeadm/app/constants of v1.37.2, v1.35.4, v1.36.3, v1.37.2: DefaultEtcdVersion, PauseVersion,
// CoreDNSVersion).
var Paired = map[int]struct{ Etcd, Pause, CoreDNS string }{
	33: {"3.5.21", "3.10", "v1.12.0"},
	34: {"3.6.5", "3.10.1", "v1.12.1"},
	35: {"3.6.6", "3.10.1", "v1.13.1"},
	36: {"3.6.8", "3.10.2", "v1.14.2"},
	37: {"3.7.0", "3.10.2", "v1.14.6"},
}

// For is the set kubeadm runs for a Kubernetes version from a repository (for a minor release outside
// Paired, the nearest one's).
func For(repository, kubernetesVersion string) Set {
	s := Set{Repository: repository, Kubernetes: kubernetesVersion}
	minor := min(max(MinorOf(kubernetesVersion), 33), 37)
	p := Paired[minor]
	s.Etcd, s.Pause, s.CoreDNS = p.Etcd, p.Pause, p.CoreDNS
	return s
}

// With is the set with images some clusters run (Image), declared by what runs them.
func (s Set) With(imgs ...Image) Set {
	d := maps.Clone(s.declared)
	if d == nil {
		d = map[string]string{}
	}
	for _, im := range imgs {
		d[im.Name] = im.Ref
	}
	s.declared = d
	return s
}

// WithManifest is the set an artifacts directory holds for an architecture: its versions, and the exact
// references of its images (they are imported on the hosts, never pulled).
func (s Set) WithManifest(m *artifacts.Manifest, arch string) Set {
	s.Etcd = strings.TrimPrefix(m.EtcdVersion, "v")
	if m.PauseVersion != "" {
		s.Pause = m.PauseVersion
	}
	if m.CoreDNSVersion != "" {
		s.CoreDNS = m.CoreDNSVersion
	}
	s.exact, s.pinned = map[string]string{}, map[string]string{}
	names := slices.Clone(Names)
	for _, f := range m.Files {
		if f.Kind == artifacts.KindImage && !slices.Contains(names, f.Name) {
			names = append(names, f.Name) // a pod network's, an extra image: the manifest names them
		}
	}
	for _, name := range names {
		if f := m.Find(artifacts.KindImage, name, arch); f != nil {
			s.exact[name] = f.Image
			if f.Format == archive.Format && f.Digest != "" {
				s.pinned[name] = archive.PinnedRef(f.Image, f.Digest)
			}
		}
	}
	return s
}

// Unpinned is the set naming every image by tag (a cluster of several architectures: a digest is one's).
func (s Set) Unpinned() Set {
	s.pinned = nil
	return s
}

// Ref is the reference a Pod names an image of the set by: with its digest too (name:tag@sha256:...) when
// the artifacts directory's archive names it so, so that the node runs exactly the bytes the pull
// verified; else by tag.
func (s Set) Ref(name string) string {
	if ref := s.pinned[name]; ref != "" {
		return ref
	}
	return s.TagRef(name)
}

// TagRef is the reference of an image of the set by its tag (what containerd's own configuration names
// the sandbox image by).
func (s Set) TagRef(name string) string {
	if ref := s.exact[name]; ref != "" {
		return ref
	}
	switch name {
	case Etcd:
		return s.Repository + "/etcd:" + s.Etcd + "-0"
	case Pause:
		return s.Repository + "/pause:" + s.Pause
	case CoreDNS:
		return s.Repository + "/coredns/coredns:" + s.CoreDNS
	case APIServerProxy:
		if s.fromRegistry {
			return s.Repository + "/haproxy:" + ProxyImage[strings.LastIndexByte(ProxyImage, ':')+1:]
		}
		return ProxyImage
	case APIServer, ControllerManager, Scheduler, Proxy:
		return s.Repository + "/" + name + ":" + s.Kubernetes
	}
	if ref, ok := s.declared[name]; ok {
		if s.fromRegistry { // <repository>/<last path element>:<tag>, as the proxy's
			return s.Repository + ref[strings.LastIndexByte(ref, '/'):]
		}
		return ref
	}
	// never a guess: a name no one declared is a bug of clusterctl's (main reports it as one)
	panic(fmt.Sprintf("images: %q is no image of the cluster's nor one declared with Set.With (a pod network declares its images in its Plugin's Images)", name))
}

// MinorOf is the minor release of a version (v1.37.2: 37; 0 when it is not one).
func MinorOf(kubernetesVersion string) int {
	minor := 0
	if parts := strings.Split(strings.TrimPrefix(kubernetesVersion, "v"), "."); len(parts) > 1 {
		minor, _ = strconv.Atoi(parts[1])
	}
	return minor
}

// TagOf is the tag of an image reference (v1.14.2 of registry.k8s.io/coredns/coredns:v1.14.2, with or
// without @sha256:...); "" when it has none.
func TagOf(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		return ref[i+1:]
	}
	return ""
}

// Declared are the images of an artifacts manifest that are not the cluster's own (Names): those some
// clusters run (a pod network's), by the names and references the manifest gives them.
func Declared(m *artifacts.Manifest) []Image {
	var out []Image
	seen := map[string]bool{}
	for _, f := range m.Files {
		if f.Kind == artifacts.KindImage && !slices.Contains(Names, f.Name) && !seen[f.Name] {
			seen[f.Name] = true
			out = append(out, Image{Name: f.Name, Ref: f.Image})
		}
	}
	return out
}
