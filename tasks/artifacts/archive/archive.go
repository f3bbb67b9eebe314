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
	manifest, err := img.RawManifest()
	if err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	mediaType, err := img.MediaType()
	if err != nil {
		return "", err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return "", err
	}
	configName, err := img.ConfigName()
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	layers, err := img.Layers()
	if err != nil {
		return "", err
	}
	type blob struct {
		digest v1.Hash
		size   int64
		open   func() (io.ReadCloser, error)
	}
	var blobs []blob
	seen := map[v1.Hash]bool{}
	total := int64(len(manifest) + len(config))
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return "", err
		}
		size, err := l.Size()
		if err != nil {
			return "", err
		}
		if !seen[d] {
			seen[d] = true
			blobs = append(blobs, blob{d, size, l.Compressed})
			total += size
		}
	}
	desc := descriptor{MediaType: string(mediaType), Digest: digest.String(), Size: int64(len(manifest))}
	if cf.Architecture != "" {
		desc.Platform = &platform{Architecture: cf.Architecture, OS: cf.OS, Variant: cf.Variant}
	}
	// The names as the container runtime spells them (docker.io/library/haproxy, not go-containerregistry's
	// index.docker.io): the reference as written, which is fully qualified.
	byTag, byDigest := desc, desc
	byTag.Annotations = map[string]string{annotationImageName: ref, annotationRefName: tag.TagStr()}
	byDigest.Annotations = map[string]string{annotationImageName: DigestName(ref, digest.String())}
	idx, err := json.Marshal(index{SchemaVersion: 2, MediaType: "application/vnd.oci.image.index.v1+json", Manifests: []descriptor{byTag, byDigest}})
	if err != nil {
		return "", err
	}
	ociLayout := []byte(`{"imageLayoutVersion":"1.0.0"}`)
	total += int64(len(ociLayout) + len(idx))
	tw := tar.NewWriter(w)
	var done int64
	put := func(path string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: path, Mode: 0o644, Size: size, ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		n, err := io.Copy(tw, r)
		if err == nil && n != size {
			err = fmt.Errorf("%s: %d bytes, want %d", path, n, size)
		}
		done += n
		if progress != nil {
			progress(done, total)
		}
		return err
	}
	putBytes := func(path string, data []byte) error { return put(path, int64(len(data)), bytes.NewReader(data)) }
	if err := putBytes("oci-layout", ociLayout); err != nil {
		return "", err
	}
	if err := putBytes("index.json", idx); err != nil {
		return "", err
	}
	if err := putBytes("blobs/sha256/"+digest.Hex, manifest); err != nil {
		return "", err
	}
	if err := putBytes("blobs/sha256/"+configName.Hex, config); err != nil {
		return "", err
	}
	for _, b := range blobs {
		rc, err := b.open()
		if err != nil {
			return "", err
		}
		err = put("blobs/sha256/"+b.digest.Hex, b.size, rc)
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", fmt.Errorf("layer %s: %w", b.digest, err)
		}
	}
	return digest.String(), tw.Close()
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
