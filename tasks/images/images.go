// Package images resolves a Kubernetes version to every image reference a cluster runs, with the etcd,
// CoreDNS and pause versions kubeadm pairs with it (cmd/kubeadm/app/constants: DefaultEtcdVersion,
// PauseVersion, CoreDNSVersion). An artifacts directory overrides both: its manifest names the exact
// images it holds.
package images

import (
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

// Flannel is flanneld's image (cni.plugin flannel), at the release tasks/flannel deploys.
const (
	Flannel        = "flannel"
	FlannelVersion = "v0.28.10"
	FlannelImage   = "ghcr.io/flannel-io/flannel:" + FlannelVersion
)

// NetworkPolicies is the NetworkPolicy controller's image (cni.networkPolicy): SIG Network's
// kube-network-policies, at the release tasks/netpol deploys.
const (
	NetworkPolicies        = "kube-network-policies"
	NetworkPoliciesVersion = "v0.8.0"
	NetworkPoliciesImage   = "registry.k8s.io/networking/kube-network-policies:" + NetworkPoliciesVersion
)

// Names are every image a cluster runs.
var Names = []string{APIServer, ControllerManager, Scheduler, Proxy, Etcd, CoreDNS, Pause, APIServerProxy}

// Optional are the images only some clusters run (a pod network's): an artifacts directory holds them
// when its inventory asks for them.
var Optional = map[string]string{Flannel: FlannelImage, NetworkPolicies: NetworkPoliciesImage}

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
	for _, name := range append(slices.Clone(Names), slices.Sorted(maps.Keys(Optional))...) {
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
	}
	if ref, ok := Optional[name]; ok {
		if s.fromRegistry { // <repository>/<last path element>:<tag>, as the proxy's
			return s.Repository + ref[strings.LastIndexByte(ref, '/'):]
		}
		return ref
	}
	return s.Repository + "/" + name + ":" + s.Kubernetes
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
