// Package pull fills an artifacts directory from the upstream download layouts (or mirrors of them): the
// Kubernetes binaries from the release bucket, etcdctl/etcdutl, containerd, runc, the CNI plugins and crictl
// from their projects' release archives, and the images from a registry. Every file is checked against the
// checksum its project publishes before it is renamed into place; partial downloads are continued.
package pull

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/images"
)

// Sources are the base URLs of the download layouts; each can point at a mirror.
type Sources struct {
	// Release serves <Release>/release/<version>/bin/linux/<arch>/<name> and <name>.sha256 (dl.k8s.io).
	Release string `json:"release"`
	// Etcd serves <Etcd>/<version>/etcd-<version>-linux-<arch>.tar.gz and <Etcd>/<version>/SHA256SUMS.
	Etcd string `json:"etcd"`
	// Containerd serves <Containerd>/v<V>/containerd-static-<V>-linux-<arch>.tar.gz and .sha256sum.
	Containerd string `json:"containerd"`
	// Runc serves <Runc>/v<V>/runc.<arch> and <Runc>/v<V>/runc.sha256sum.
	Runc string `json:"runc"`
	// CNI serves <CNI>/v<V>/cni-plugins-linux-<arch>-v<V>.tgz and .sha256.
	CNI string `json:"cni"`
	// Crictl serves <Crictl>/v<V>/crictl-v<V>-linux-<arch>.tar.gz and .sha256.
	Crictl string `json:"crictl"`
	// RegistryMirror, when set, is the registry (host[:port][/path]) images are fetched from instead of the
	// registry their reference names; the archives keep the reference's name.
	RegistryMirror string `json:"registryMirror,omitempty"`
}

// DefaultSources are the upstream download locations.
func DefaultSources() Sources {
	return Sources{
		Release:    "https://dl.k8s.io",
		Etcd:       "https://github.com/etcd-io/etcd/releases/download",
		Containerd: "https://github.com/containerd/containerd/releases/download",
		Runc:       "https://github.com/opencontainers/runc/releases/download",
		CNI:        "https://github.com/containernetworking/plugins/releases/download",
		Crictl:     "https://github.com/kubernetes-sigs/cri-tools/releases/download",
	}
}

// SourcesOf are an inventory's download bases (cluster.downloads) as sources.
func SourcesOf(d inventory.Downloads) Sources {
	return Sources{Release: d.Release, Etcd: d.Etcd, Containerd: d.Containerd, Runc: d.Runc, CNI: d.CNI, Crictl: d.Crictl, RegistryMirror: d.RegistryMirror}
}

// CacheDir is the per-version artifacts cache on this workstation: <user cache dir>/clusterctl/artifacts/<version>
// ($XDG_CACHE_HOME or ~/.cache on Linux, ~/Library/Caches on macOS).
func CacheDir(kubernetesVersion string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for artifacts (give one with --dir, or cluster.artifacts): %w", err)
	}
	return filepath.Join(base, "clusterctl", "artifacts", kubernetesVersion), nil
}

// Override returns s with every non-empty field of o in place of its own.
func (s Sources) Override(o Sources) Sources {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&s.Release, o.Release)
	set(&s.Etcd, o.Etcd)
	set(&s.Containerd, o.Containerd)
	set(&s.Runc, o.Runc)
	set(&s.CNI, o.CNI)
	set(&s.Crictl, o.Crictl)
	set(&s.RegistryMirror, o.RegistryMirror)
	return s
}

// Validate checks that every base is an absolute http(s) URL without query or fragment, and the mirror a
// registry name.
func (s Sources) Validate() error {
	for _, b := range []struct{ name, v string }{{"release", s.Release}, {"etcd", s.Etcd}, {"containerd", s.Containerd},
		{"runc", s.Runc}, {"cni", s.CNI}, {"crictl", s.Crictl}} {
		u, err := url.Parse(b.v)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("%s download URL %q: want http(s)://host[/path], without credentials, query or fragment", b.name, b.v)
		}
	}
	if s.RegistryMirror != "" && !registryRE.MatchString(s.RegistryMirror) {
		return fmt.Errorf("registry mirror %q: want host[:port][/path]", s.RegistryMirror)
	}
	return nil
}

var registryRE = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*$`)

// Versions are what an artifacts directory holds for one Kubernetes version.
type Versions struct {
	Kubernetes string `json:"kubernetes"` // v1.37.2
	Etcd       string `json:"etcd"`       // v3.6.5
	Containerd string `json:"containerd"` // 2.2.1
	Runc       string `json:"runc"`       // 1.3.4
	CNIPlugins string `json:"cniPlugins"` // 1.9.0
	Crictl     string `json:"crictl"`     // 1.34.0
	CoreDNS    string `json:"coredns"`    // v1.12.1
	Pause      string `json:"pause"`      // 3.10.1
}

var kubernetesVersionRE = regexp.MustCompile(`^v1\.([0-9]{1,3})\.([0-9]{1,4})$`)

// Minimum and maximum Kubernetes minor versions clusterctl pairs runtime versions for.
const (
	MinMinor = 34
	MaxMinor = 37
)

// VersionsFor pairs a Kubernetes release with the etcd, CoreDNS and pause versions kubeadm deploys with it,
// and the runtime versions clusterctl installs with it: containerd 2.2 (the first line whose CRI answers
// the kubelet's RuntimeConfig call, so the kubelet follows the runtime's cgroup driver), runc 1.3, CNI
// plugins 1.9, and the crictl of the same Kubernetes minor release (cri-tools versions follow Kubernetes').
func VersionsFor(kubernetesVersion string) (Versions, error) {
	m := kubernetesVersionRE.FindStringSubmatch(kubernetesVersion)
	if m == nil {
		return Versions{}, fmt.Errorf("kubernetes version %q: want v1.MINOR.PATCH", kubernetesVersion)
	}
	minor, _ := strconv.Atoi(m[1])
	if minor < MinMinor || minor > MaxMinor {
		return Versions{}, fmt.Errorf("kubernetes version %s: clusterctl pairs runtime versions for v1.%d to v1.%d", kubernetesVersion, MinMinor, MaxMinor)
	}
	set := images.For("", kubernetesVersion)
	return Versions{
		Kubernetes: kubernetesVersion,
		Etcd:       "v" + set.Etcd,
		Containerd: "2.2.1",
		Runc:       "1.3.4",
		CNIPlugins: "1.9.0",
		Crictl:     fmt.Sprintf("1.%d.0", minor),
		CoreDNS:    set.CoreDNS,
		Pause:      set.Pause,
	}, nil
}

// The files a node needs, by source.
var (
	// KubernetesBinaries are the release binaries clusterctl pushes: the kubelet everywhere, kubectl to
	// control-plane nodes. The control plane and kube-proxy run from images.
	KubernetesBinaries = []string{"kubelet", "kubectl"}
	// EtcdBinaries are taken from etcd's release archive: etcdctl and etcdutl for control-plane nodes, and
	// etcd itself for the hosts of an external etcd cluster.
	EtcdBinaries = []string{"etcd", "etcdctl", "etcdutl"}
	// ContainerdBinaries are taken from containerd's static release archive.
	ContainerdBinaries = []string{"containerd", "containerd-shim-runc-v2", "ctr"}
	// CNIPlugins are the plugins taken from the CNI release archive: what the bridge network uses, and the
	// loopback every Pod gets.
	CNIPlugins = []string{"bridge", "host-local", "loopback", "portmap"}
)

func join(base string, parts ...string) string {
	return strings.TrimRight(base, "/") + "/" + strings.Join(parts, "/")
}

func (s Sources) kubernetesURL(v, arch, name string) string {
	return join(s.Release, "release", v, "bin", "linux", arch, name)
}

func (s Sources) etcdURL(v, arch string) (archive, sums string) {
	return join(s.Etcd, v, fmt.Sprintf("etcd-%s-linux-%s.tar.gz", v, arch)), join(s.Etcd, v, "SHA256SUMS")
}

func (s Sources) containerdURL(v, arch string) (archive, sum string) {
	a := join(s.Containerd, "v"+v, fmt.Sprintf("containerd-static-%s-linux-%s.tar.gz", v, arch))
	return a, a + ".sha256sum"
}

func (s Sources) runcURL(v, arch string) (binary, sums string) {
	return join(s.Runc, "v"+v, "runc."+arch), join(s.Runc, "v"+v, "runc.sha256sum")
}

func (s Sources) cniURL(v, arch string) (archive, sum string) {
	a := join(s.CNI, "v"+v, fmt.Sprintf("cni-plugins-linux-%s-v%s.tgz", arch, v))
	return a, a + ".sha256"
}

func (s Sources) crictlURL(v, arch string) (archive, sum string) {
	a := join(s.Crictl, "v"+v, fmt.Sprintf("crictl-v%s-linux-%s.tar.gz", v, arch))
	return a, a + ".sha256"
}

// mirrored is the reference to fetch an image from: the mirror in place of the reference's registry.
func (s Sources) mirrored(ref string) string {
	if s.RegistryMirror == "" {
		return ref
	}
	rest := ref
	if i := strings.IndexByte(ref, '/'); i > 0 && strings.ContainsAny(ref[:i], ".:") || strings.HasPrefix(ref, "localhost/") {
		rest = ref[i+1:]
	} else if !strings.Contains(ref, "/") {
		rest = "library/" + ref
	}
	return strings.TrimRight(s.RegistryMirror, "/") + "/" + rest
}
