// Package artifacts reads and checks an artifacts directory: the Kubernetes binaries and image archives for
// one version, for installs on hosts that cannot reach a registry (air-gapped). Its manifest.json lists
// every file with its SHA-256, so that nothing corrupt or foreign is pushed and unchanged files are skipped.
//
// Layout:
//
//	manifest.json
//	bin/linux-<arch>/<name>              kubelet, kubectl, kube-proxy, ... (static binaries)
//	bin/linux-<arch>/<name>              also etcdctl, etcdutl (from etcd's release archive)
//	runtime/linux-<arch>/<name>          containerd, containerd-shim-runc-v2, ctr, runc, crictl
//	cni/linux-<arch>/<name>              the CNI plugins (bridge, host-local, loopback, portmap)
//	images/linux-<arch>/<name>.tar       image archives (OCI image layouts), as `ctr images import` takes them
//	charts/<chart>-<version>.tgz         the add-ons' Helm charts (cluster.addons), as their repository serves them
//	downloads/                           the release archives the files above were taken from (pull's cache)
package artifacts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
)

// ManifestFile is the manifest's name in an artifacts directory.
const ManifestFile = "manifest.json"

// Kinds of file in an artifacts directory.
const (
	KindBinary = "binary"
	KindImage  = "image"
	// KindRuntime is the container runtime: containerd and its shim, ctr, runc, crictl.
	KindRuntime = "runtime"
	// KindCNI is a CNI plugin.
	KindCNI = "cni"
	// KindChart is an add-on's packaged Helm chart (no architecture).
	KindChart = "chart"
)

// Manifest describes an artifacts directory.
type Manifest struct {
	KubernetesVersion string `json:"kubernetesVersion"`
	EtcdVersion       string `json:"etcdVersion"`
	CoreDNSVersion    string `json:"corednsVersion"`
	PauseVersion      string `json:"pauseVersion"`
	ContainerdVersion string `json:"containerdVersion,omitempty"`
	RuncVersion       string `json:"runcVersion,omitempty"`
	CNIPluginsVersion string `json:"cniPluginsVersion,omitempty"`
	CrictlVersion     string `json:"crictlVersion,omitempty"`
	Files             []File `json:"files"`
}

// File is one binary or image archive.
type File struct {
	// Path is relative to the directory, with forward slashes.
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Kind   string `json:"kind"`
	// Name is the binary's name or the image's component (kube-apiserver, pause, ...).
	Name string `json:"name"`
	Arch string `json:"arch"`
	// Image is the reference an image archive is tagged with (registry.k8s.io/pause:3.10.1).
	Image string `json:"image,omitempty"`
	// Digest is an image's manifest digest in its registry, as pulled.
	Digest string `json:"digest,omitempty"`
	// Format is an image archive's: "oci" (tasks/artifacts/archive: the manifest kept as pulled, so the
	// image is Digest on the nodes too, and named by it), or "" for a docker save archive of an earlier
	// clusterctl (containerd writes a manifest of its own on import: the image runs by tag).
	Format string `json:"format,omitempty"`
	// Source is the URL (or image reference) the file was taken from.
	Source string `json:"source,omitempty"`
	// Version is a chart's version; Repository the https:// repository or oci:// path it was pulled from,
	// as the inventory names it.
	Version    string `json:"version,omitempty"`
	Repository string `json:"repository,omitempty"`
	// Addons are the add-ons whose manifests name an image (it goes to every node).
	Addons []string `json:"addons,omitempty"`
}

// maxManifest bounds the manifest read: a few hundred files' entries are tens of kilobytes.
const maxManifest = 16 << 20

// Load reads the manifest of dir.
func Load(dir string) (*Manifest, error) {
	f, err := os.Open(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("artifacts directory %s: %w", dir, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("artifacts directory %s: %w", dir, err)
	}
	m, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("artifacts directory %s: %s: %w", dir, ManifestFile, err)
	}
	return m, nil
}

// Parse reads a manifest: JSON with no unknown field, at most 16 MiB.
func Parse(data []byte) (*Manifest, error) {
	if len(data) > maxManifest {
		return nil, fmt.Errorf("larger than %d bytes", maxManifest)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	// Names become paths on hosts (/usr/local/bin/NAME, the images' directory), paths are read here:
	// each is checked for what it is.
	var errs []error
	for i, f := range m.Files {
		switch {
		case !filepath.IsLocal(filepath.FromSlash(f.Path)):
			errs = append(errs, fmt.Errorf("files[%d].path %q leaves the artifacts directory", i, f.Path))
		case f.Kind != KindBinary && f.Kind != KindImage && f.Kind != KindRuntime && f.Kind != KindCNI && f.Kind != KindChart:
			errs = append(errs, fmt.Errorf("files[%d].kind %q is not binary, image, runtime, cni or chart", i, f.Kind))
		case len(f.Name) > 255 || !nameRE.MatchString(f.Name):
			errs = append(errs, fmt.Errorf("files[%d].name %q is not a file name (lower-case letters, digits, '.', '_', '-')", i, f.Name))
		case f.Arch != "" && !archRE.MatchString(f.Arch):
			errs = append(errs, fmt.Errorf("files[%d].arch %q is not an architecture", i, f.Arch))
		case !sha256RE.MatchString(f.SHA256):
			errs = append(errs, fmt.Errorf("files[%d].sha256 %q is not a SHA-256 in hex", i, f.SHA256))
		case f.Size < 0:
			errs = append(errs, fmt.Errorf("files[%d].size %d is negative", i, f.Size))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &m, nil
}

var (
	nameRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`) // and at most 255 bytes: a counted repetition compiles 255 states at start-up
	archRE   = regexp.MustCompile(`^[a-z0-9]{1,16}$`)
	sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Find returns the file of that kind, name and architecture, or nil.
func (m *Manifest) Find(kind, name, arch string) *File {
	for i := range m.Files {
		f := &m.Files[i]
		if f.Kind == kind && f.Name == name && f.Arch == arch {
			return f
		}
	}
	return nil
}

// Verify checks that every file of the manifest is in dir with its size and SHA-256, and reports every
// problem found.
func (m *Manifest) Verify(dir string) error {
	var errs []error
	for _, f := range m.Files {
		if !filepath.IsLocal(filepath.FromSlash(f.Path)) {
			errs = append(errs, fmt.Errorf("%s: path leaves the artifacts directory", f.Path))
			continue
		}
		sum, size, err := HashFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		switch {
		case err != nil:
			errs = append(errs, err)
		case size != f.Size:
			errs = append(errs, fmt.Errorf("%s: %d bytes, manifest says %d", f.Path, size, f.Size))
		case sum != f.SHA256:
			errs = append(errs, fmt.Errorf("%s: sha256 %s, manifest says %s", f.Path, sum, f.SHA256))
		}
	}
	return errors.Join(errs...)
}

// Add hashes the file at dir/path and records it.
func (m *Manifest) Add(dir string, f File) error {
	sum, size, err := HashFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
	if err != nil {
		return err
	}
	f.SHA256, f.Size = sum, size
	for i := range m.Files {
		if m.Files[i].Path == f.Path {
			m.Files[i] = f
			return nil
		}
	}
	m.Files = append(m.Files, f)
	return nil
}

// Write stores the manifest in dir atomically, files in path order.
func (m *Manifest) Write(dir string) error {
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ManifestFile+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, ManifestFile))
}

// HashFile returns the hex SHA-256 and size of a file.
func HashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
