package image

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Read reads the image named ref from an archive: an OCI image layout (what clusterctl artifacts pull and
// the lab write for an artifacts directory, tasks/artifacts/archive) or a docker save archive (WriteAll's,
// several images).
func Read(path, ref string) (v1.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if hdr.Name == "manifest.json" {
			tag, err := name.NewTag(ref)
			if err != nil {
				return nil, err
			}
			return tarball.ImageFromPath(path, &tag) // a docker archive
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		files[hdr.Name] = data
	}
	if _, ok := files["oci-layout"]; !ok {
		return nil, fmt.Errorf("%s: neither an OCI image layout nor a docker archive", path)
	}
	var idx struct {
		Manifests []struct {
			MediaType   string            `json:"mediaType"`
			Digest      v1.Hash           `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		return nil, fmt.Errorf("%s: index.json: %w", path, err)
	}
	for _, m := range idx.Manifests {
		if m.Annotations["io.containerd.image.name"] != ref {
			continue
		}
		raw, ok := files["blobs/sha256/"+m.Digest.Hex]
		if !ok {
			return nil, fmt.Errorf("%s: no manifest %s", path, m.Digest)
		}
		mf, err := v1.ParseManifest(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%s: manifest %s: %w", path, m.Digest, err)
		}
		return partial.CompressedToImage(&ociImage{files: files, raw: raw, manifest: mf, mediaType: types.MediaType(m.MediaType)})
	}
	return nil, fmt.Errorf("%s: no image named %s", path, ref)
}

// ociImage is an image of an OCI image layout held in memory.
type ociImage struct {
	files     map[string][]byte
	raw       []byte
	manifest  *v1.Manifest
	mediaType types.MediaType
}

func (o *ociImage) RawConfigFile() ([]byte, error)      { return o.blob(o.manifest.Config.Digest) }
func (o *ociImage) MediaType() (types.MediaType, error) { return o.mediaType, nil }
func (o *ociImage) RawManifest() ([]byte, error)        { return o.raw, nil }

func (o *ociImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, d := range append([]v1.Descriptor{o.manifest.Config}, o.manifest.Layers...) {
		if d.Digest == h {
			data, err := o.blob(h)
			if err != nil {
				return nil, err
			}
			return &blobLayer{data: data, desc: d}, nil
		}
	}
	return nil, fmt.Errorf("no blob %s in the image", h)
}

func (o *ociImage) blob(h v1.Hash) ([]byte, error) {
	data, ok := o.files["blobs/sha256/"+h.Hex]
	if !ok {
		return nil, fmt.Errorf("no blob %s in the archive", h)
	}
	return data, nil
}

type blobLayer struct {
	data []byte
	desc v1.Descriptor
}

func (b *blobLayer) Digest() (v1.Hash, error) { return b.desc.Digest, nil }
func (b *blobLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(b.data)), nil
}
func (b *blobLayer) Size() (int64, error)                { return b.desc.Size, nil }
func (b *blobLayer) MediaType() (types.MediaType, error) { return b.desc.MediaType, nil }
