// Package mirror serves the lab's artifacts directory in the upstream download layouts, so that `clusterctl
// artifacts pull` runs its real code offline: the Kubernetes release bucket (binaries with .sha256 files),
// etcd's, containerd's, runc's, the CNI plugins' and crictl's release archives shaped as theirs are, with
// their checksum files, and an OCI registry (go-containerregistry's) holding the images. It listens on
// loopback only.
package mirror

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/artifacts/pull"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/test/lab/image"
)

// Mirror is a running mirror.
type Mirror struct {
	// Root is the directory served (a copy: tests may corrupt files in it).
	Root string
	// URL is the base URL, http://127.0.0.1:PORT.
	URL string
	// Registry is the registry's host:port (plain HTTP, on loopback).
	Registry string
	// Checksums is a file of the SHA-256 of every file served, as `artifacts pull --checksums` takes it:
	// the mirror's own builds, which no upstream digest covers.
	Checksums string
	// Lock is the lock pulls from the mirror use (`artifacts pull --lock`): the mirror's own, so that no
	// test adds the lab's builds to the workstation's lock.
	Lock string
	srv  *http.Server
}

// Sources are the pull sources that point at the mirror.
func (m *Mirror) Sources() pull.Sources {
	return pull.Sources{Release: m.URL, Etcd: m.URL + "/etcd", Containerd: m.URL + "/containerd", Runc: m.URL + "/runc",
		CNI: m.URL + "/cni", Crictl: m.URL + "/crictl", RegistryMirror: m.Registry}
}

// Flags are the `clusterctl artifacts pull` (and `up`) flags that point at the mirror.
func (m *Mirror) Flags() []string {
	s := m.Sources()
	return []string{"--release-url", s.Release, "--etcd-url", s.Etcd, "--containerd-url", s.Containerd, "--runc-url", s.Runc,
		"--cni-url", s.CNI, "--crictl-url", s.Crictl, "--registry-mirror", s.RegistryMirror,
		"--checksums", m.Checksums, "--insecure-registry", m.Registry, "--lock", m.Lock}
}

// Close stops the mirror and removes its directory.
func (m *Mirror) Close() error {
	err := m.srv.Close()
	_ = os.RemoveAll(m.Root)
	_ = os.Remove(m.Checksums)
	_ = os.Remove(m.Lock)
	_ = os.Remove(m.Lock + ".guard")
	return err
}

// Start lays out the artifacts directory dir (its manifest's files) in the upstream layouts under a new
// directory in tmp, and serves it with the images in a registry, on 127.0.0.1.
func Start(ctx context.Context, dir, tmp string) (*Mirror, error) {
	man, err := artifacts.Load(dir)
	if err != nil {
		return nil, err
	}
	if err := man.Verify(dir); err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp(tmp, "clusterctl-mirror-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(root)
		}
	}()
	sums, err := layout(man, dir, root)
	if err != nil {
		return nil, err
	}
	checksums := root + ".sums"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	files := http.FileServer(http.Dir(root))
	mux := http.NewServeMux()
	mux.Handle("/v2/", reg)
	mux.Handle("/", files)
	m := &Mirror{Root: root, URL: "http://" + ln.Addr().String(), Registry: ln.Addr().String(), Checksums: checksums, Lock: root + ".lock", srv: &http.Server{Handler: mux}}
	go func() { _ = m.srv.Serve(ln) }()
	if err := m.pushImages(ctx, man, dir, sums); err != nil {
		_ = m.srv.Close()
		return nil, err
	}
	var list strings.Builder
	for _, k := range slices.Sorted(maps.Keys(sums)) {
		fmt.Fprintf(&list, "%s  %s\n", sums[k], k)
	}
	if err := os.WriteFile(checksums, []byte(list.String()), 0o644); err != nil {
		_ = m.srv.Close()
		return nil, err
	}
	ok = true
	return m, nil
}

// pushImages puts every image archive into the registry under its reference's repository path, and adds
// each one's digest to sums (the registry is plain HTTP: a pull trusts no image from it that sums does not
// pin).
func (m *Mirror) pushImages(ctx context.Context, man *artifacts.Manifest, dir string, sums map[string]string) error {
	for _, f := range man.Files {
		if f.Kind != artifacts.KindImage {
			continue
		}
		tag, err := name.NewTag(f.Image)
		if err != nil {
			return err
		}
		img, err := image.Read(filepath.Join(dir, filepath.FromSlash(f.Path)), f.Image)
		if err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		repo := tag.RepositoryStr()
		dst, err := name.NewTag(m.Registry + "/" + repo + ":" + tag.TagStr())
		if err != nil {
			return err
		}
		if err := remote.Write(dst, img, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("push %s: %w", dst, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		sums["image linux/"+f.Arch+" "+f.Image] = digest.String()
	}
	return nil
}

// layout writes the release layouts of the manifest's files under root.
func layout(man *artifacts.Manifest, dir, root string) (map[string]string, error) {
	v, err := pull.VersionsFor(man.KubernetesVersion)
	if err != nil {
		return nil, err
	}
	l := &layouter{man: man, dir: dir, root: root, v: v, sums: map[string]string{}, etcdSums: map[string]string{}}
	arches := map[string]bool{}
	for _, f := range man.Files {
		if f.Arch != "" {
			arches[f.Arch] = true
		}
	}
	for arch := range arches {
		for _, f := range []func(string) error{l.kubernetes, l.etcd, l.runtime} {
			if err := f(arch); err != nil {
				return nil, err
			}
		}
	}
	var list strings.Builder
	for file, sum := range l.etcdSums {
		fmt.Fprintf(&list, "%s  %s\n", sum, file)
	}
	return l.sums, os.WriteFile(filepath.Join(root, "etcd", v.Etcd, "SHA256SUMS"), []byte(list.String()), 0o644)
}

// layouter lays out an artifacts directory's files (dir, its manifest man) as their releases are, under
// root; sums are the files' SHA-256 by path in an artifacts directory (for --checksums), etcdSums etcd's
// archives' by name.
type layouter struct {
	man            *artifacts.Manifest
	dir, root      string
	v              pull.Versions
	sums, etcdSums map[string]string
}

func (l *layouter) src(kind, name, arch string) (string, error) {
	f := l.man.Find(kind, name, arch)
	if f == nil {
		return "", fmt.Errorf("the artifacts have no %s %s for %s", kind, name, arch)
	}
	return filepath.Join(l.dir, filepath.FromSlash(f.Path)), nil
}

// members are the files of an archive: each name in it, from the artifacts' kind and name.
func (l *layouter) members(kind, arch string, names []string, in func(string) string) ([]member, error) {
	var out []member
	for _, b := range names {
		s, err := l.src(kind, b, arch)
		if err != nil {
			return nil, err
		}
		out = append(out, member{in(b), s})
	}
	return out, nil
}

// kubernetes: one file and one .sha256 (the sum alone) per binary.
func (l *layouter) kubernetes(arch string) error {
	for _, b := range pull.KubernetesBinaries {
		s, err := l.src(artifacts.KindBinary, b, arch)
		if err != nil {
			return err
		}
		dst := filepath.Join(l.root, "release", l.man.KubernetesVersion, "bin", "linux", arch, b)
		sum, err := copyFile(s, dst)
		if err != nil {
			return err
		}
		l.sums["bin/linux-"+arch+"/"+b] = sum
		if err := os.WriteFile(dst+".sha256", []byte(sum), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// etcd: etcd-<V>-linux-<arch>/{etcd,etcdctl,etcdutl} in a .tar.gz, SHA256SUMS beside.
func (l *layouter) etcd(arch string) error {
	etcdName := fmt.Sprintf("etcd-%s-linux-%s", l.v.Etcd, arch)
	members, err := l.members(artifacts.KindBinary, arch, []string{"etcd", "etcdctl", "etcdutl"}, func(b string) string { return etcdName + "/" + b })
	if err != nil {
		return err
	}
	sum, err := tarGz(filepath.Join(l.root, "etcd", l.v.Etcd, etcdName+".tar.gz"), members)
	if err != nil {
		return err
	}
	l.etcdSums[etcdName+".tar.gz"] = sum
	l.sums["downloads/"+etcdName+".tar.gz"] = sum
	return nil
}

// runtime: containerd, runc, the CNI plugins and crictl as each is released.
func (l *layouter) runtime(arch string) error {
	v, root := l.v, l.root
	// containerd's static archive: bin/<name>; "<sum>  <file>" in .sha256sum.
	members, err := l.members(artifacts.KindRuntime, arch, pull.ContainerdBinaries, func(b string) string { return "bin/" + b })
	if err != nil {
		return err
	}
	if err := archiveWithSum(l.sums, filepath.Join(root, "containerd", "v"+v.Containerd, fmt.Sprintf("containerd-static-%s-linux-%s.tar.gz", v.Containerd, arch)), members, ".sha256sum", true); err != nil {
		return err
	}
	// runc: runc.<arch>, and runc.sha256sum listing them.
	s, err := l.src(artifacts.KindRuntime, "runc", arch)
	if err != nil {
		return err
	}
	runcSum, err := copyFile(s, filepath.Join(root, "runc", "v"+v.Runc, "runc."+arch))
	if err != nil {
		return err
	}
	l.sums["runtime/linux-"+arch+"/runc"] = runcSum
	if err := os.WriteFile(filepath.Join(root, "runc", "v"+v.Runc, "runc.sha256sum"), []byte(runcSum+"  runc."+arch+"\n"), 0o644); err != nil {
		return err
	}
	// CNI plugins: ./<plugin> in a .tgz; "<sum>  <file>" in .sha256.
	if members, err = l.members(artifacts.KindCNI, arch, pull.CNIPlugins, func(b string) string { return "./" + b }); err != nil {
		return err
	}
	if err := archiveWithSum(l.sums, filepath.Join(root, "cni", "v"+v.CNIPlugins, fmt.Sprintf("cni-plugins-linux-%s-v%s.tgz", arch, v.CNIPlugins)), members, ".sha256", true); err != nil {
		return err
	}
	// crictl: crictl in a .tar.gz; the sum alone in .sha256.
	if s, err = l.src(artifacts.KindRuntime, "crictl", arch); err != nil {
		return err
	}
	return archiveWithSum(l.sums, filepath.Join(root, "crictl", "v"+v.Crictl, fmt.Sprintf("crictl-v%s-linux-%s.tar.gz", v.Crictl, arch)), []member{{"crictl", s}}, ".sha256", false)
}

type member struct{ name, src string }

// archiveWithSum writes the archive dst and its published sum beside it, and records its sum in sums under
// its path in an artifacts directory (downloads/<name>).
func archiveWithSum(sums map[string]string, dst string, members []member, suffix string, withName bool) error {
	sum, err := tarGz(dst, members)
	if err != nil {
		return err
	}
	sums["downloads/"+path.Base(dst)] = sum
	line := sum
	if withName {
		line += "  " + path.Base(dst)
	}
	return os.WriteFile(dst+suffix, []byte(line+"\n"), 0o644)
}

func tarGz(dst string, members []member) (string, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	f, err := os.Create(dst)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	zw := gzip.NewWriter(io.MultiWriter(f, h))
	tw := tar.NewWriter(zw)
	for _, m := range members {
		if err := addMember(tw, m); err != nil {
			f.Close()
			return "", err
		}
	}
	err = errors.Join(tw.Close(), zw.Close(), f.Close())
	return hex.EncodeToString(h.Sum(nil)), err
}

func addMember(tw *tar.Writer, m member) error {
	in, err := os.Open(m.src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o755, Size: st.Size(), Typeflag: tar.TypeReg, ModTime: st.ModTime()}); err != nil {
		return err
	}
	_, err = io.Copy(tw, in)
	return err
}

func copyFile(src, dst string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", err
	}
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return hex.EncodeToString(h.Sum(nil)), err
}

// Registry is a registry holding the lab's images under a private repository, served with TLS on an
// address of the lab's bridge, for hosts to pull from.
type Registry struct {
	// Addr is the registry's host:port.
	Addr string
	// Repository is the image repository StartRegistry puts the images under (host:port/k8s).
	Repository string
	srv        *http.Server
	transport  http.RoundTripper
}

// Close stops the registry.
func (r *Registry) Close() error { return r.srv.Close() }

// StartRegistry serves, on host (an address of this machine the lab's hosts reach) with TLS (cert), a
// registry holding every image of the artifacts directory dir as clusterctl's private-registry mode names
// it: <host:port>/k8s/<name> (images.Set.FromRegistry). roots trusts cert, for pushing.
func StartRegistry(ctx context.Context, dir, host string, cert tls.Certificate, roots *x509.CertPool) (*Registry, error) {
	man, err := artifacts.Load(dir)
	if err != nil {
		return nil, err
	}
	r, err := StartImageRegistry(host, cert, roots)
	if err != nil {
		return nil, err
	}
	r.Repository = r.Addr + "/k8s"
	set := images.For(r.Repository, man.KubernetesVersion).With(images.Declared(man)...).FromRegistry()
	for _, f := range man.Files {
		if f.Kind != artifacts.KindImage {
			continue
		}
		if err := r.Push(ctx, filepath.Join(dir, filepath.FromSlash(f.Path)), f.Image, set.Ref(f.Name)); err != nil {
			_ = r.Close()
			return nil, err
		}
	}
	return r, nil
}

// StartImageRegistry serves, on host with TLS (cert), an empty registry; Push fills it. roots trusts cert.
func StartImageRegistry(host string, cert tls.Certificate, roots *x509.CertPool) (*Registry, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return &Registry{Addr: ln.Addr().String(), srv: srv,
		transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}, nil
}

// Push copies the image tagged src in the archive file (one image or several) into the registry as dst.
func (r *Registry) Push(ctx context.Context, file, src, dst string) error {
	img, err := image.Read(file, src)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	dstTag, err := name.NewTag(dst)
	if err != nil {
		return err
	}
	if err := remote.Write(dstTag, img, remote.WithContext(ctx), remote.WithTransport(r.transport)); err != nil {
		return fmt.Errorf("push %s: %w", dst, err)
	}
	return nil
}
