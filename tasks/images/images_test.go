package images

import (
	"fmt"
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/artifacts/archive"
)

func TestFor(t *testing.T) {
	s := For("registry.k8s.io", "v1.34.4")
	for name, want := range map[string]string{
		APIServer: "registry.k8s.io/kube-apiserver:v1.34.4",
		Proxy:     "registry.k8s.io/kube-proxy:v1.34.4",
		Etcd:      "registry.k8s.io/etcd:3.6.5-0",
		CoreDNS:   "registry.k8s.io/coredns/coredns:v1.12.1",
		Pause:     "registry.k8s.io/pause:3.10.1",
	} {
		if got := s.Ref(name); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	if s := For("mirror.example:5000/k8s", "v1.33.2"); s.Ref(Etcd) != "mirror.example:5000/k8s/etcd:3.5.21-0" || s.Pause != "3.10" {
		t.Errorf("1.33: %+v", s)
	}
	for v, want := range map[string][3]string{
		"v1.35.4": {"3.6.6", "3.10.1", "v1.13.1"}, "v1.36.3": {"3.6.8", "3.10.2", "v1.14.2"}, "v1.37.2": {"3.7.0", "3.10.2", "v1.14.6"},
		"v1.38.0": {"3.7.0", "3.10.2", "v1.14.6"},
	} {
		if s := For("r", v); [3]string{s.Etcd, s.Pause, s.CoreDNS} != want {
			t.Errorf("%s: %+v, want etcd, pause, CoreDNS %v", v, s, want)
		}
	}
}

// An artifacts directory's images are imported, never pulled: their exact references win, for its
// architecture only.
func TestWithManifest(t *testing.T) {
	m := &artifacts.Manifest{KubernetesVersion: "v1.34.4", EtcdVersion: "v3.6.4", PauseVersion: "3.10", CoreDNSVersion: "v1.12.0",
		Files: []artifacts.File{
			{Kind: artifacts.KindImage, Name: Proxy, Arch: "amd64", Image: "lab.local/kube-proxy:v1.34.4"},
			{Kind: artifacts.KindImage, Name: Proxy, Arch: "arm64", Image: "lab.local/kube-proxy-arm:v1.34.4"},
		}}
	s := For("registry.k8s.io", "v1.34.4").WithManifest(m, "amd64")
	if got := s.Ref(Proxy); got != "lab.local/kube-proxy:v1.34.4" {
		t.Errorf("kube-proxy: %s", got)
	}
	if got := s.Ref(Etcd); got != "registry.k8s.io/etcd:3.6.4-0" {
		t.Errorf("etcd: %s", got)
	}
	if got := s.Ref(Pause); got != "registry.k8s.io/pause:3.10" {
		t.Errorf("pause: %s", got)
	}
}

// Images whose archives name them by digest (archive.Format) run by tag and digest; the sandbox image of
// containerd's configuration keeps its tag; archives of an earlier clusterctl run by tag.
func TestPinned(t *testing.T) {
	const d = "sha256:4b2f0c0e5b0d0f6c3f8a2e1d9c7b6a5f4e3d2c1b0a99887766554433221100ff"
	m := &artifacts.Manifest{KubernetesVersion: "v1.37.2", EtcdVersion: "v3.7.0", PauseVersion: "3.10.2", CoreDNSVersion: "v1.14.6",
		Files: []artifacts.File{
			{Kind: artifacts.KindImage, Name: APIServer, Arch: "amd64", Image: "registry.k8s.io/kube-apiserver:v1.37.2", Digest: d, Format: archive.Format},
			{Kind: artifacts.KindImage, Name: Pause, Arch: "amd64", Image: "registry.k8s.io/pause:3.10.2", Digest: d, Format: archive.Format},
			{Kind: artifacts.KindImage, Name: "flannel", Arch: "amd64", Image: "ghcr.io/flannel-io/flannel:v0.28.10", Digest: d, Format: archive.Format},
			{Kind: artifacts.KindImage, Name: Proxy, Arch: "amd64", Image: "registry.k8s.io/kube-proxy:v1.37.2", Digest: d}, // an earlier docker archive
		}}
	s := For("registry.k8s.io", "v1.37.2").WithManifest(m, "amd64")
	for name, want := range map[string]string{
		APIServer: "registry.k8s.io/kube-apiserver:v1.37.2@" + d,
		"flannel": "ghcr.io/flannel-io/flannel:v0.28.10@" + d,
		Proxy:     "registry.k8s.io/kube-proxy:v1.37.2",
		Etcd:      "registry.k8s.io/etcd:3.7.0-0",
	} {
		if got := s.Ref(name); got != want {
			t.Errorf("Ref(%s) = %s, want %s", name, got, want)
		}
	}
	if got := s.TagRef(Pause); got != "registry.k8s.io/pause:3.10.2" {
		t.Errorf("TagRef(pause) = %s", got)
	}
	if got := s.FromRegistry().Ref(APIServer); got != "registry.k8s.io/kube-apiserver:v1.37.2" {
		t.Errorf("from a registry: %s", got)
	}
	if got := s.Unpinned().Ref(APIServer); got != "registry.k8s.io/kube-apiserver:v1.37.2" {
		t.Errorf("a cluster of several architectures: %s", got)
	}
	for ref, want := range map[string]string{
		"registry.k8s.io/coredns/coredns:v1.14.2":      "v1.14.2",
		"registry.k8s.io/coredns/coredns:v1.14.2@" + d: "v1.14.2",
		"registry.example:5000/coredns":                "",
	} {
		if got := TagOf(ref); got != want {
			t.Errorf("TagOf(%s) = %q, want %q", ref, got, want)
		}
	}
}

// An image is the cluster's, one declared by what runs it (With), or one an artifacts manifest names:
// never a reference guessed from its name.
func TestUnknownImage(t *testing.T) {
	s := For("registry.k8s.io", "v1.37.2").With(Image{Name: "flannel", Ref: "ghcr.io/flannel-io/flannel:v0.28.10"})
	if got := s.Ref("flannel"); got != "ghcr.io/flannel-io/flannel:v0.28.10" {
		t.Errorf("a declared image: %s", got)
	}
	if got := s.FromRegistry().Ref("flannel"); got != "registry.k8s.io/flannel:v0.28.10" {
		t.Errorf("a declared image from the registry: %s", got)
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), `"cilium" is no image of the cluster's`) {
			t.Errorf("an unknown image: %v", p)
		}
	}()
	t.Errorf("an unknown image resolved to %s", s.Ref("cilium"))
}
