package pull

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/clusterctl/clusterctl/tasks/artifacts"
)

// Chart is an add-on's chart to pull: from an https:// Helm repository (its index.yaml gives the
// package's address and SHA-256) or from an oci:// registry path (<repository>/<name>:<version>, the
// chart layer's digest its SHA-256).
type Chart struct {
	Name, Version, Repository string
}

// AddonImages say which images the add-ons run, given the manifest with their charts pulled (and the
// directory it describes): image reference → the add-ons that run it.
type AddonImages func(ctx context.Context, m *artifacts.Manifest, dir string) (map[string][]string, error)

// Helm's media types for a chart in an OCI registry.
const (
	helmConfigMediaType = "application/vnd.cncf.helm.config.v1+json"
	helmChartMediaType  = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
	// maxIndex bounds a repository's index.yaml (large public repositories' are tens of MiB).
	maxIndex = 64 << 20
	maxChart = 64 << 20
)

// ChartPath is where a chart lies in an artifacts directory.
func ChartPath(c Chart) string {
	return path.Join("charts", c.Name+"-"+strings.TrimPrefix(c.Version, "v")+".tgz")
}

// charts pulls every add-on chart (before the images: the add-ons' images are read from them).
func (p *puller) charts(ctx context.Context) error {
	seen := map[string]Chart{}
	for _, c := range p.o.Charts {
		rel := ChartPath(c)
		if prev, ok := seen[rel]; ok {
			if prev.Repository != c.Repository {
				return fmt.Errorf("chart %s %s is asked for from %s and from %s: one artifacts directory holds one", c.Name, c.Version, prev.Repository, c.Repository)
			}
			continue
		}
		seen[rel] = c
		var err error
		if strings.HasPrefix(c.Repository, "oci://") {
			err = p.ociChart(ctx, c, rel)
		} else {
			err = p.repoChart(ctx, c, rel)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// index is the part of a Helm repository's index.yaml a pull reads.
type index struct {
	Entries map[string][]struct {
		Version string   `json:"version"`
		URLs    []string `json:"urls"`
		Digest  string   `json:"digest"`
	} `json:"entries"`
}

func (p *puller) repoChart(ctx context.Context, c Chart, rel string) error {
	base := strings.TrimSuffix(c.Repository, "/") + "/"
	data, err := p.get(ctx, base+"index.yaml", maxIndex)
	if err != nil {
		return fmt.Errorf("chart %s %s: %w", c.Name, c.Version, err)
	}
	var idx index
	if err := sigsyaml.Unmarshal(data, &idx); err != nil {
		return fmt.Errorf("chart %s %s: %sindex.yaml: %w", c.Name, c.Version, base, err)
	}
	var versions []string
	for _, e := range idx.Entries[c.Name] {
		versions = append(versions, e.Version)
		if strings.TrimPrefix(e.Version, "v") != strings.TrimPrefix(c.Version, "v") {
			continue
		}
		if len(e.URLs) == 0 || !hexSumRE.MatchString(e.Digest) {
			return fmt.Errorf("chart %s %s: %sindex.yaml gives no address or no SHA-256 digest for it", c.Name, c.Version, base)
		}
		b, _ := url.Parse(base)
		ref, err := url.Parse(e.URLs[0])
		if err != nil {
			return fmt.Errorf("chart %s %s: %sindex.yaml: %w", c.Name, c.Version, base, err)
		}
		u := b.ResolveReference(ref).String()
		if pu, _ := url.Parse(u); strings.HasPrefix(u, "http://") && !p.o.AllowHTTP && (pu == nil || !isLoopback(pu.Hostname())) {
			return fmt.Errorf("chart %s %s: %s is plain HTTP off loopback (cluster.downloads.allowHTTP allows it)", c.Name, c.Version, u)
		}
		if err := p.trust.check(rel, u, e.Digest, plainHTTP(u)); err != nil {
			return err
		}
		if err := p.download(ctx, u, filepath.Join(p.o.Dir, filepath.FromSlash(rel)), e.Digest, 0o644); err != nil {
			return fmt.Errorf("chart %s %s: %w", c.Name, c.Version, err)
		}
		return p.add(artifacts.File{Path: rel, Kind: artifacts.KindChart, Name: c.Name, Version: c.Version, Repository: c.Repository, Source: u})
	}
	slices.Reverse(versions)
	return fmt.Errorf("chart %s: %s has no version %s (it has %s)", c.Name, c.Repository, c.Version, strings.Join(versions[:min(len(versions), 8)], ", "))
}

func (p *puller) ociChart(ctx context.Context, c Chart, rel string) error {
	from := strings.TrimSuffix(strings.TrimPrefix(c.Repository, "oci://"), "/") + "/" + c.Name + ":" + strings.TrimPrefix(c.Version, "v")
	ref, err := name.NewTag(from)
	if err != nil {
		return fmt.Errorf("chart %s %s: %w", c.Name, c.Version, err)
	}
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	insecure := slices.Contains(p.o.InsecureRegistries, ref.RegistryStr())
	if insecure {
		auth = remote.WithAuth(authn.Anonymous)
	}
	transport := p.client.Transport
	if transport == nil {
		transport = http.DefaultTransport
	}
	opts := []remote.Option{remote.WithContext(ctx), auth, remote.WithTransport(&registryGuard{next: transport, insecure: p.o.InsecureRegistries})}
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return fmt.Errorf("chart %s %s (oci://%s): %w", c.Name, c.Version, from, err)
	}
	img, err := desc.Image()
	if err != nil {
		return fmt.Errorf("chart %s %s (oci://%s): %w", c.Name, c.Version, from, err)
	}
	mf, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("chart %s %s (oci://%s): %w", c.Name, c.Version, from, err)
	}
	if mf.Config.MediaType != types.MediaType(helmConfigMediaType) {
		return fmt.Errorf("chart %s %s: oci://%s is not a Helm chart (its config is %s)", c.Name, c.Version, from, mf.Config.MediaType)
	}
	for _, l := range mf.Layers {
		if l.MediaType != types.MediaType(helmChartMediaType) {
			continue
		}
		sum := l.Digest.Hex
		if err := p.trust.check(rel, "oci://"+from, sum, insecure); err != nil {
			return err
		}
		dest := filepath.Join(p.o.Dir, filepath.FromSlash(rel))
		if got, _, err := artifacts.HashFile(dest); err == nil && got == sum {
			p.emit(Event{Type: EventFileDone, File: rel, URL: "oci://" + from, Cached: true})
		} else {
			start := time.Now()
			layer, err := img.LayerByDigest(l.Digest)
			if err != nil {
				return fmt.Errorf("chart %s %s (oci://%s): %w", c.Name, c.Version, from, err)
			}
			n, err := p.writeBlob(layer.Compressed, dest, sum)
			if err != nil {
				return fmt.Errorf("chart %s %s (oci://%s): %w", c.Name, c.Version, from, err)
			}
			p.emit(Event{Type: EventFileDone, File: rel, URL: "oci://" + from, Bytes: n, Total: n, DurationMS: time.Since(start).Milliseconds()})
		}
		return p.add(artifacts.File{Path: rel, Kind: artifacts.KindChart, Name: c.Name, Version: c.Version, Repository: c.Repository, Source: "oci://" + from})
	}
	return fmt.Errorf("chart %s %s: oci://%s has no chart layer (%s)", c.Name, c.Version, from, helmChartMediaType)
}

// writeBlob writes a blob to dest (through dest.part, created exclusively, synced, renamed) if its
// SHA-256 is want.
func (p *puller) writeBlob(open func() (io.ReadCloser, error), dest, want string) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return 0, err
	}
	rc, err := open()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	tmp := dest + ".part"
	_ = os.Remove(tmp)
	f, err := createExclusive(tmp, 0o644)
	if err != nil {
		return 0, err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(rc, maxChart+1))
	if err == nil && n > maxChart {
		err = fmt.Errorf("larger than %d MiB", maxChart>>20)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && hex.EncodeToString(h.Sum(nil)) != want {
		err = &ChecksumError{File: p.rel(dest), URL: "its registry", Want: want, Got: hex.EncodeToString(h.Sum(nil))}
	}
	if err != nil {
		_ = os.Remove(tmp)
		return 0, err
	}
	return n, os.Rename(tmp, dest)
}
