// Package archive writes an image as the archive an artifacts directory holds: an OCI image layout in a
// tar, which `ctr images import` stores as it is. The registry's manifest is kept byte for byte, so the
// image's digest on a node is the digest the pull verified, and the archive names the image twice, as a
// pull by the container runtime does: by its tag (registry.k8s.io/pause:3.10.1) and by its digest
// (registry.k8s.io/pause@sha256:...). A Pod that names the image by tag and digest
// (registry.k8s.io/pause:3.10.1@sha256:...) then runs exactly those bytes, from the import, with nothing to
// pull.
package archive

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Format is the manifest's name for such archives (artifacts.File.Format).
const Format = "oci"

// The annotations containerd's import names images by.
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// epoch makes archives of the same image the same bytes.
var epoch = time.Unix(0, 0).UTC()

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

// Write writes img, named ref (a fully qualified tag: registry.k8s.io/pause:3.10.1), to w as an OCI image layout tar, and
// returns the image's digest (its manifest's). progress, when set, is told the bytes written so far and
// the total after each part. Layers are read through img's own verification (a remote image's are checked
// against their digests as they are read): a layer that does not match fails the write.
func Write(w io.Writer, ref string, img v1.Image, progress func(complete, total int64)) (string, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	if first, _, _ := strings.Cut(ref, "/"); !strings.ContainsAny(first, ".:") && first != "localhost" {
		return "", fmt.Errorf("image reference %q: name its registry (docker.io/library/..., registry.k8s.io/...)", ref)
	}
	p, err := partsOf(img)
	if err != nil {
		return "", err
	}
	desc := descriptor{MediaType: string(p.mediaType), Digest: p.digest.String(), Size: int64(len(p.manifest))}
	if p.cf.Architecture != "" {
		desc.Platform = &platform{Architecture: p.cf.Architecture, OS: p.cf.OS, Variant: p.cf.Variant}
	}
	// The names as the container runtime spells them (docker.io/library/haproxy, not go-containerregistry's
	// index.docker.io): the reference as written, which is fully qualified.
	byTag, byDigest := desc, desc
	byTag.Annotations = map[string]string{annotationImageName: ref, annotationRefName: tag.TagStr()}
	byDigest.Annotations = map[string]string{annotationImageName: DigestName(ref, p.digest.String())}
	idx, err := json.Marshal(index{SchemaVersion: 2, MediaType: "application/vnd.oci.image.index.v1+json", Manifests: []descriptor{byTag, byDigest}})
	if err != nil {
		return "", err
	}
	ociLayout := []byte(`{"imageLayoutVersion":"1.0.0"}`)
	t := &tarOut{tw: tar.NewWriter(w), total: p.total + int64(len(ociLayout)+len(idx)), progress: progress}
	for _, f := range []struct {
		path string
		data []byte
	}{{"oci-layout", ociLayout}, {"index.json", idx}, {"blobs/sha256/" + p.digest.Hex, p.manifest}, {"blobs/sha256/" + p.configName.Hex, p.config}} {
		if err := t.put(f.path, int64(len(f.data)), bytes.NewReader(f.data)); err != nil {
			return "", err
		}
	}
	for _, b := range p.blobs {
		rc, err := b.open()
		if err != nil {
			return "", err
		}
		err = t.put("blobs/sha256/"+b.digest.Hex, b.size, rc)
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", fmt.Errorf("layer %s: %w", b.digest, err)
		}
	}
	return p.digest.String(), t.tw.Close()
}

// parts is what an archive holds of an image: its manifest, its config and its layers, each once.
type parts struct {
	manifest, config []byte
	digest           v1.Hash
	mediaType        types.MediaType
	configName       v1.Hash
	cf               *v1.ConfigFile
	blobs            []blob
	total            int64 // bytes of the manifest, the config and the layers
}

type blob struct {
	digest v1.Hash
	size   int64
	open   func() (io.ReadCloser, error)
}

func partsOf(img v1.Image) (parts, error) {
	var p parts
	var err error
	if p.manifest, err = img.RawManifest(); err != nil {
		return p, err
	}
	if p.digest, err = img.Digest(); err != nil {
		return p, err
	}
	if p.mediaType, err = img.MediaType(); err != nil {
		return p, err
	}
	if p.config, err = img.RawConfigFile(); err != nil {
		return p, err
	}
	if p.configName, err = img.ConfigName(); err != nil {
		return p, err
	}
	if p.cf, err = img.ConfigFile(); err != nil {
		return p, err
	}
	layers, err := img.Layers()
	if err != nil {
		return p, err
	}
	seen := map[v1.Hash]bool{}
	p.total = int64(len(p.manifest) + len(p.config))
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return p, err
		}
		size, err := l.Size()
		if err != nil {
			return p, err
		}
		if !seen[d] {
			seen[d] = true
			p.blobs = append(p.blobs, blob{d, size, l.Compressed})
			p.total += size
		}
	}
	return p, nil
}

// tarOut writes an archive's files and reports the bytes written against the total.
type tarOut struct {
	tw          *tar.Writer
	done, total int64
	progress    func(complete, total int64)
}

func (t *tarOut) put(path string, size int64, r io.Reader) error {
	if err := t.tw.WriteHeader(&tar.Header{Name: path, Mode: 0o644, Size: size, ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	n, err := io.Copy(t.tw, r)
	if err == nil && n != size {
		err = fmt.Errorf("%s: %d bytes, want %d", path, n, size)
	}
	t.done += n
	if t.progress != nil {
		t.progress(t.done, t.total)
	}
	return err
}

// PinnedRef is the reference a Pod names an image of such an archive by: its tag and its digest.
func PinnedRef(ref, digest string) string { return ref + "@" + digest }

// DigestName is the name by digest such an archive gives the image tagged ref
// (registry.k8s.io/pause@sha256:...): what the container runtime resolves PinnedRef to.
func DigestName(ref, digest string) string {
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	return ref + "@" + digest
}
