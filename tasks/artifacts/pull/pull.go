package pull

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/errgroup"

	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/artifacts/archive"
	"github.com/clusterctl/clusterctl/tasks/images"
)

// Options say what to pull, from where, into which directory.
type Options struct {
	KubernetesVersion string
	// Arches are GOARCH names (amd64, arm64).
	Arches []string
	Dir    string
	// Sources are the download bases (DefaultSources overridden by the user's).
	Sources Sources
	// ImageRepository names the Kubernetes images (registry.k8s.io).
	ImageRepository string
	// ExtraImages are full references pulled beside the cluster's (the user's CNI, ...).
	ExtraImages []string
	// Optional are the images only some clusters run that this one does (its pod network's: flannel),
	// declared by what runs them.
	Optional []images.Image
	// Charts are the add-ons' charts (cluster.addons from a repository or a registry), pulled first;
	// AddonImages then says which images the add-ons run (rendered with the inventory's values), pulled
	// beside the others.
	Charts      []Chart
	AddonImages AddonImages
	// SkipImages leaves the images out (hosts pull them from a registry).
	SkipImages bool
	// Parallel is how many downloads run at once (default 4).
	Parallel int
	// Client makes the HTTP requests (default: one that honours HTTP(S)_PROXY/NO_PROXY).
	Client *http.Client
	// Events receives progress; it may be nil. It is called from many goroutines.
	Events func(Event)
	// Checksums is a file of trusted digests ("<sha256>  <path>", LockFile's form) checked before the
	// lock and the origin's checksum files; "" for none.
	Checksums string
	// AllowHTTP allows plain-HTTP download bases off loopback (every file must then match Checksums, a
	// built-in digest or the lock).
	AllowHTTP bool
	// InsecureRegistries are the registries (host:port) images may be fetched from over plain HTTP,
	// without credentials (each image must then match Checksums, a built-in digest or the lock).
	InsecureRegistries []string
	// Lock is the lock the pull checks and adds to ("" for DefaultLock).
	Lock string
	// RequireLock refuses a file or image that neither Checksums, a built-in digest nor the lock pins.
	RequireLock bool
}

// Event is progress of a pull.
type Event struct {
	Type  string `json:"type"` // progress, file_done, pull_done
	File  string `json:"file,omitempty"`
	URL   string `json:"url,omitempty"`
	Bytes int64  `json:"bytes,omitempty"`
	// Total is the file's size, -1 when the server does not say.
	Total      int64 `json:"total,omitempty"`
	Rate       int64 `json:"bytes_per_second,omitempty"`
	ETAMS      int64 `json:"eta_ms,omitempty"`
	DurationMS int64 `json:"duration_ms,omitempty"`
	// Cached: the file was in place and verified; nothing was downloaded.
	Cached bool `json:"cached,omitempty"`
	// Digest is an unpinned file's or image's digest.
	Digest string `json:"digest,omitempty"`
	// Lock is the lock an unpinned file or image entered.
	Lock string `json:"lock,omitempty"`
}

// Event types.
const (
	EventProgress = "progress"
	EventFileDone = "file_done"
	// EventUnpinned is a file or image nothing pinned (File: its lock key, URL: where it came from,
	// Digest: what it was): its first pull, now in the lock.
	EventUnpinned = "unpinned"
)

var archRE = regexp.MustCompile(`^(amd64|arm64)$`)

type puller struct {
	o      Options
	v      Versions
	client *http.Client
	mu     sync.Mutex
	m      *artifacts.Manifest
	// addons are the add-ons that run each add-on image (by reference).
	addons map[string][]string
	// old is the manifest the directory held before the pull (nil: none), read once.
	old   *artifacts.Manifest
	trust *trust
}

// Pull downloads, verifies and lays out everything nodes of the given architectures need, and writes the
// manifest last: a directory with a manifest is complete. Files already in place and verified are kept.
func Pull(ctx context.Context, o Options) (*artifacts.Manifest, error) {
	v, err := VersionsFor(o.KubernetesVersion)
	if err != nil {
		return nil, err
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	p := &puller{o: o, v: v, client: o.Client,
		m: &artifacts.Manifest{KubernetesVersion: v.Kubernetes, EtcdVersion: v.Etcd, CoreDNSVersion: v.CoreDNS, PauseVersion: v.Pause,
			ContainerdVersion: v.Containerd, RuncVersion: v.Runc, CNIPluginsVersion: v.CNIPlugins, CrictlVersion: v.Crictl}}
	if p.client == nil {
		p.client = &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: time.Minute, TLSHandshakeTimeout: 30 * time.Second}}
	}
	if p.client.CheckRedirect == nil {
		c := *p.client
		c.CheckRedirect = noDowngrade
		p.client = &c
	}
	if err := CheckDir(o.Dir); err != nil {
		return nil, err
	}
	p.trust, err = loadTrust(trustOptions{Dir: o.Dir, Checksums: o.Checksums, Lock: o.Lock, Versions: v, Require: o.RequireLock,
		Notice: func(key, u, digest string) {
			p.emit(Event{Type: EventUnpinned, File: key, URL: u, Digest: digest, Lock: p.trust.lockFile})
		}})
	if err != nil {
		return nil, err
	}
	if old, err := artifacts.Load(o.Dir); err == nil {
		p.old = old
	}
	if err := p.charts(ctx); err != nil {
		return nil, err
	}
	if o.AddonImages != nil {
		if p.addons, err = o.AddonImages(ctx, p.m, o.Dir); err != nil {
			return nil, fmt.Errorf("the add-ons' images: %w", err)
		}
	}
	errs := p.pullAll(ctx)
	if o.SkipImages {
		p.keepImages()
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := p.trust.save(); err != nil {
		return nil, err
	}
	if err := p.m.Write(o.Dir); err != nil {
		return nil, err
	}
	return p.m, nil
}

// check validates the options, and sets the defaults of those left empty.
func (o *Options) check() error {
	if err := o.Sources.Validate(); err != nil {
		return err
	}
	if err := o.Sources.CheckSchemes(o.AllowHTTP); err != nil {
		return err
	}
	if len(o.Arches) == 0 {
		return errors.New("no architecture to pull for")
	}
	for _, a := range o.Arches {
		if !archRE.MatchString(a) {
			return fmt.Errorf("architecture %q: want amd64 or arm64", a)
		}
	}
	if o.ImageRepository == "" {
		o.ImageRepository = "registry.k8s.io"
	}
	if _, err := name.NewRepository(o.ImageRepository+"/pause", name.StrictValidation); err != nil {
		return fmt.Errorf("image repository %q: %w", o.ImageRepository, err)
	}
	for _, ref := range o.ExtraImages {
		if _, err := name.NewTag(ref, name.StrictValidation); err != nil {
			return fmt.Errorf("extra image %q: want registry/repository:tag: %w", ref, err)
		}
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	return nil
}

// pullAll downloads everything, o.Parallel at a time, and returns the errors: every checksum mismatch and
// lock error (they do not stop the other downloads), or the first other failure.
func (p *puller) pullAll(ctx context.Context) []error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.o.Parallel)
	var errs []error
	var emu sync.Mutex
	run := func(f func(context.Context) error) {
		g.Go(func() error {
			if gctx.Err() != nil {
				return nil
			}
			err := f(gctx)
			if err == nil {
				return nil
			}
			emu.Lock()
			defer emu.Unlock()
			var ce *ChecksumError
			var le *LockError
			switch {
			case errors.As(err, &ce), errors.As(err, &le):
				// A checksum mismatch does not stop the other downloads: every bad file is named.
				errs = append(errs, err)
				return nil
			case gctx.Err() != nil && ctx.Err() == nil:
				// Stopped because another download failed: that one is the error.
				return nil
			}
			errs = append(errs, err)
			return err
		})
	}
	for _, arch := range p.o.Arches {
		for _, b := range KubernetesBinaries {
			run(func(ctx context.Context) error { return p.kubernetesBinary(ctx, arch, b) })
		}
		run(func(ctx context.Context) error { return p.etcd(ctx, arch) })
		run(func(ctx context.Context) error { return p.containerd(ctx, arch) })
		run(func(ctx context.Context) error { return p.runc(ctx, arch) })
		run(func(ctx context.Context) error { return p.cni(ctx, arch) })
		run(func(ctx context.Context) error { return p.crictl(ctx, arch) })
		for _, img := range p.images() {
			if p.o.SkipImages {
				break
			}
			run(func(ctx context.Context) error { return p.image(ctx, arch, img) })
		}
	}
	_ = g.Wait()
	return errs
}

// keepImages carries over the image archives an earlier pull left in the directory, still intact, for
// the architectures of this one: a pull without images does not forget them.
func (p *puller) keepImages() {
	if p.old == nil {
		return
	}
	for _, f := range p.old.Files {
		if f.Kind != artifacts.KindImage || !slices.Contains(p.o.Arches, f.Arch) {
			continue
		}
		if st, err := os.Stat(filepath.Join(p.o.Dir, filepath.FromSlash(f.Path))); err == nil && st.Size() == f.Size {
			p.m.Files = append(p.m.Files, f)
		}
	}
}

// downloadsDir keeps the release archives (verified), so that a second pull downloads nothing.
const downloadsDir = "downloads"

func (p *puller) emit(e Event) {
	if p.o.Events != nil {
		p.o.Events(e)
	}
}

func (p *puller) rel(file string) string {
	r, err := filepath.Rel(p.o.Dir, file)
	if err != nil {
		return file
	}
	return filepath.ToSlash(r)
}

func (p *puller) add(f artifacts.File) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m.Add(p.o.Dir, f)
}

func (p *puller) kubernetesBinary(ctx context.Context, arch, bin string) error {
	u := p.o.Sources.kubernetesURL(p.v.Kubernetes, arch, bin)
	sum, err := p.fetchSum(ctx, u+".sha256", bin)
	if err != nil {
		return err
	}
	rel := path.Join("bin", "linux-"+arch, bin)
	if err := p.trusted(rel, u, sum); err != nil {
		return err
	}
	if err := p.download(ctx, u, filepath.Join(p.o.Dir, filepath.FromSlash(rel)), sum, 0o755); err != nil {
		return err
	}
	return p.add(artifacts.File{Path: rel, Kind: artifacts.KindBinary, Name: bin, Arch: arch, Source: u})
}

// archive downloads a release archive checked against its published sum, and unpacks the named members
// (matched by base name) into dir/<layout>/linux-<arch>/.
func (p *puller) archive(ctx context.Context, archiveURL, sumURL, arch, kind, layout string, members []string) error {
	base := path.Base(archiveURL)
	sum, err := p.fetchSum(ctx, sumURL, base)
	if err != nil {
		return err
	}
	file := filepath.Join(p.o.Dir, downloadsDir, base)
	if err := p.trusted(path.Join(downloadsDir, base), archiveURL, sum); err != nil {
		return err
	}
	if err := p.download(ctx, archiveURL, file, sum, 0o644); err != nil {
		return err
	}
	outDir := path.Join(layout, "linux-"+arch)
	found, err := unpack(file, filepath.Join(p.o.Dir, filepath.FromSlash(outDir)), members)
	if err != nil {
		return fmt.Errorf("%s (%s): %w", p.rel(file), archiveURL, err)
	}
	for _, m := range members {
		if !found[m] {
			return fmt.Errorf("%s (%s): has no %s", p.rel(file), archiveURL, m)
		}
		if err := p.add(artifacts.File{Path: path.Join(outDir, m), Kind: kind, Name: m, Arch: arch, Source: archiveURL}); err != nil {
			return err
		}
	}
	return nil
}

// trusted checks the SHA-256 an origin publishes for the file at rel (fetched from u) against the trusted
// digests (see trust).
func (p *puller) trusted(rel, u, sum string) error { return p.trust.check(rel, u, sum, plainHTTP(u)) }

func (p *puller) etcd(ctx context.Context, arch string) error {
	a, sums := p.o.Sources.etcdURL(p.v.Etcd, arch)
	return p.archive(ctx, a, sums, arch, artifacts.KindBinary, "bin", EtcdBinaries)
}

func (p *puller) containerd(ctx context.Context, arch string) error {
	a, sum := p.o.Sources.containerdURL(p.v.Containerd, arch)
	return p.archive(ctx, a, sum, arch, artifacts.KindRuntime, "runtime", ContainerdBinaries)
}

func (p *puller) cni(ctx context.Context, arch string) error {
	a, sum := p.o.Sources.cniURL(p.v.CNIPlugins, arch)
	return p.archive(ctx, a, sum, arch, artifacts.KindCNI, "cni", CNIPlugins)
}

func (p *puller) crictl(ctx context.Context, arch string) error {
	a, sum := p.o.Sources.crictlURL(p.v.Crictl, arch)
	return p.archive(ctx, a, sum, arch, artifacts.KindRuntime, "runtime", []string{"crictl"})
}

func (p *puller) runc(ctx context.Context, arch string) error {
	u, sums := p.o.Sources.runcURL(p.v.Runc, arch)
	sum, err := p.fetchSum(ctx, sums, path.Base(u))
	if err != nil {
		return err
	}
	rel := path.Join("runtime", "linux-"+arch, "runc")
	if err := p.trusted(rel, u, sum); err != nil {
		return err
	}
	if err := p.download(ctx, u, filepath.Join(p.o.Dir, filepath.FromSlash(rel)), sum, 0o755); err != nil {
		return err
	}
	return p.add(artifacts.File{Path: rel, Kind: artifacts.KindRuntime, Name: "runc", Arch: arch, Source: u})
}

// unpack writes the regular-file members of a .tar.gz whose base names are wanted into dir (mode 0755),
// each through a temporary file renamed into place; nothing else of the archive is written.
func unpack(archive, dir string, wanted []string) (map[string]bool, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	found := map[string]bool{}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return found, nil
		}
		if err != nil {
			return nil, err
		}
		base := path.Base(hdr.Name)
		if hdr.Typeflag != tar.TypeReg || !slices.Contains(wanted, base) {
			continue
		}
		if found[base] {
			return nil, fmt.Errorf("%w: %s twice", errBadArchive, base)
		}
		if hdr.Size > maxDownload {
			return nil, fmt.Errorf("%w: %s is %d bytes", errBadArchive, hdr.Name, hdr.Size)
		}
		tmp := filepath.Join(dir, "."+base+".tmp")
		out, err := createExclusive(tmp, 0o755)
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(out, io.LimitReader(tr, hdr.Size))
		if err == nil {
			err = out.Sync()
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, filepath.Join(dir, base))
		}
		if err != nil {
			_ = os.Remove(tmp)
			return nil, err
		}
		found[base] = true
	}
}

// image is one image to pull: its name in the manifest and its reference.
type image struct{ name, ref string }

// images are the cluster's images, the node-local proxy's, the optional ones asked for, and the extra ones.
func (p *puller) images() []image {
	set := images.For(p.o.ImageRepository, p.v.Kubernetes).With(p.o.Optional...)
	var out []image
	for _, n := range images.Names {
		out = append(out, image{n, set.Ref(n)})
	}
	for _, im := range p.o.Optional {
		out = append(out, image{im.Name, set.Ref(im.Name)})
	}
	for _, ref := range p.o.ExtraImages {
		out = append(out, image{ExtraImageName(ref), ref})
	}
	refs := slices.Sorted(maps.Keys(p.addons))
	for _, ref := range refs {
		if !slices.Contains(p.o.ExtraImages, ref) {
			out = append(out, image{ExtraImageName(ref), ref})
		}
	}
	return out
}

var unsafeNameRE = regexp.MustCompile(`[^a-z0-9._-]+`)

// ExtraImageName is the manifest name of an extra image: its reference made a file name.
func ExtraImageName(ref string) string {
	return "extra-" + strings.Trim(unsafeNameRE.ReplaceAllString(strings.ToLower(ref), "_"), "_")
}

// image pulls one image for an architecture (from the mirror when one is set) and saves it as an archive
// `ctr images import` takes, named by its reference and its digest; the manifest records its digest.
func (p *puller) image(ctx context.Context, arch string, img image) error {
	rel := path.Join("images", "linux-"+arch, img.name+".tar")
	dest := filepath.Join(p.o.Dir, filepath.FromSlash(rel))
	if _, err := name.NewTag(img.ref, name.StrictValidation); err != nil {
		return fmt.Errorf("image %s: %w", img.ref, err)
	}
	from := p.o.Sources.mirrored(img.ref)
	src, err := name.NewTag(from)
	if err != nil {
		return fmt.Errorf("image %s: %w", from, err)
	}
	start := time.Now()
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	if slices.Contains(p.o.InsecureRegistries, src.RegistryStr()) {
		auth = remote.WithAuth(authn.Anonymous) // never credentials over plain HTTP
	}
	transport := p.client.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	remoteImg, err := remote.Image(src, remote.WithContext(ctx), remote.WithPlatform(v1.Platform{OS: "linux", Architecture: arch}),
		auth, remote.WithTransport(&registryGuard{next: transport, insecure: p.o.InsecureRegistries}))
	if err != nil {
		return fmt.Errorf("image %s (from %s): %w", img.ref, from, err)
	}
	digest, err := remoteImg.Digest()
	if err != nil {
		return fmt.Errorf("image %s (from %s): %w", img.ref, from, err)
	}
	// Over plain HTTP (an insecure registry), the digest must be pinned: anyone on the way could serve
	// another image with its own, matching digest.
	if err := p.trust.check(imageKey(arch, img.ref), from, digest.String(), slices.Contains(p.o.InsecureRegistries, src.RegistryStr())); err != nil {
		return err
	}
	if old := p.cachedImage(rel, img.ref, digest.String()); old {
		p.emit(Event{Type: EventFileDone, File: rel, URL: from, Cached: true})
		return p.add(artifacts.File{Path: rel, Kind: artifacts.KindImage, Name: img.name, Arch: arch, Image: img.ref, Digest: digest.String(), Format: archive.Format, Source: from, Addons: p.addons[img.ref]})
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	tmp := dest + ".part"
	// Layers are verified against their digests as they are read; the archive is renamed into place only
	// when all are.
	pr := &progress{p: p, file: rel, url: from, total: -1, start: start}
	if err := writeImage(tmp, img.ref, remoteImg, func(complete, total int64) {
		pr.done, pr.total = complete, total
		pr.report(false)
	}); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("image %s (from %s): %w", img.ref, from, err)
	}
	if err := syncFile(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dest); err != nil {
		return err
	}
	_, size, _ := artifacts.HashFile(dest)
	p.emit(Event{Type: EventFileDone, File: rel, URL: from, Bytes: size, Total: size, DurationMS: time.Since(start).Milliseconds()})
	return p.add(artifacts.File{Path: rel, Kind: artifacts.KindImage, Name: img.name, Arch: arch, Image: img.ref, Digest: digest.String(), Format: archive.Format, Source: from, Addons: p.addons[img.ref]})
}

// cachedImage: the directory's manifest already records this image at this digest, in an archive of the
// current format, and its archive is intact.
func (p *puller) cachedImage(rel, ref, digest string) bool {
	if p.old == nil {
		return false
	}
	for _, f := range p.old.Files {
		if f.Path == rel && f.Image == ref && f.Digest == digest && f.Format == archive.Format {
			sum, size, err := artifacts.HashFile(filepath.Join(p.o.Dir, filepath.FromSlash(rel)))
			return err == nil && sum == f.SHA256 && size == f.Size
		}
	}
	return false
}

// writeImage saves img as an archive (tasks/artifacts/archive) in tmp, created exclusively (never through a
// symbolic link), reporting progress.
func writeImage(tmp, ref string, img v1.Image, progress func(complete, total int64)) error {
	f, err := createExclusive(tmp, 0o644)
	if err != nil {
		return err
	}
	_, err = archive.Write(f, ref, img, progress)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncFile(file string) error {
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
