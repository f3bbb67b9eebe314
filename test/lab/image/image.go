// Package image writes container images from files on disk, with no registry involved, as archives `ctr
// images import` takes: one image as an artifacts directory holds it (Write), several as a docker save
// archive (WriteAll). The lab packs Kubernetes' own images this way from binaries it built.
package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/clusterctl/clusterctl/tasks/artifacts/archive"
)

// File is one entry of the image's layer: a regular file (from Source on disk, or Data), a directory
// (Dir), or a symbolic link (Link).
type File struct {
	Path   string // absolute path inside the image
	Source string // file on disk to copy
	Data   []byte // contents, when Source is empty
	Mode   int64  // permission bits; 0755 for files from Source that are executable (and directories), else 0644
	Link   string // target of a symbolic link
	Dir    bool
}

// Config is the part of the image configuration that matters to run it.
type Config struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string // the user the image runs as (e.g. "1234"); empty for root
	Arch       string // GOARCH, e.g. amd64
}

// epoch makes layers reproducible: the same files give the same digest.
var epoch = time.Unix(0, 0).UTC()

// Write builds the image and writes it to path as an artifacts directory holds one (an OCI image layout,
// named ref, e.g. registry.k8s.io/pause:3.10, and by its digest: tasks/artifacts/archive), and returns
// its digest.
func Write(path, ref string, files []File, cfg Config) (string, error) {
	img, err := build(Image{Ref: ref, Layers: [][]File{files}, Config: cfg}, map[[sha256.Size]byte]v1.Layer{})
	if err != nil {
		return "", fmt.Errorf("%s: %w", ref, err)
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", err
	}
	digest, err := archive.Write(f, ref, img, nil)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return digest, os.Rename(tmp, path)
}

// Image is one image of an archive: its reference, its layers (bottom first) and its configuration.
type Image struct {
	Ref    string
	Layers [][]File
	Config Config
}

// WriteAll writes the images into one archive at path (ctr and docker load it). Layers of the same files
// are the same layer (the same digest), stored once however many images share them.
func WriteAll(path string, images []Image) error {
	refs := map[name.Reference]v1.Image{}
	layers := map[[sha256.Size]byte]v1.Layer{} // compressed (and digested) once however many images share it
	for _, im := range images {
		tag, err := name.NewTag(im.Ref)
		if err != nil {
			return fmt.Errorf("image reference %q: %w", im.Ref, err)
		}
		img, err := build(im, layers)
		if err != nil {
			return fmt.Errorf("%s: %w", im.Ref, err)
		}
		refs[tag] = img
	}
	tmp := path + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, refs); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

func build(im Image, layers map[[sha256.Size]byte]v1.Layer) (v1.Image, error) {
	img := empty.Image
	for _, files := range im.Layers {
		var buf bytes.Buffer
		if err := writeLayer(&buf, files); err != nil {
			return nil, err
		}
		data := buf.Bytes()
		sum := sha256.Sum256(data)
		layer := layers[sum]
		if layer == nil {
			var err error
			if layer, err = tarball.LayerFromOpener(func() (io.ReadCloser, error) {
				return io.NopCloser(bytes.NewReader(data)), nil
			}); err != nil {
				return nil, err
			}
			layers[sum] = layer
		}
		var err error
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg := im.Config
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = cfg.Arch, "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.User = cfg.Entrypoint, cfg.Cmd, cfg.User
	cf.Config.Env = append([]string{"PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"}, cfg.Env...)
	return mutate.ConfigFile(img, cf)
}

// writeLayer writes the files as a tar stream, parents first, in a stable order; of a path given twice, the
// later entry.
func writeLayer(w io.Writer, files []File) error {
	dirs := map[string]bool{}
	var all []File
	last := map[string]int{} // a path given twice: the later entry wins
	for i, f := range files {
		last[f.Path] = i
	}
	for i, f := range files {
		if last[f.Path] != i {
			continue
		}
		if !strings.HasPrefix(f.Path, "/") {
			return fmt.Errorf("image file %q: path must be absolute", f.Path)
		}
		for d := path.Dir(f.Path); d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			all = append(all, File{Path: d, Dir: true})
		}
		if f.Dir {
			if dirs[f.Path] {
				continue
			}
			dirs[f.Path] = true
		}
		all = append(all, f)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Path < all[j].Path })
	tw := tar.NewWriter(w)
	for _, f := range all {
		h := &tar.Header{Name: strings.TrimPrefix(f.Path, "/"), ModTime: epoch, Uname: "root", Gname: "root", Format: tar.FormatPAX}
		var body []byte
		switch {
		case f.Dir:
			h.Typeflag, h.Mode, h.Name = tar.TypeDir, 0o755, h.Name+"/"
			if f.Mode != 0 {
				h.Mode = f.Mode // e.g. 01777 for /tmp
			}
		case f.Link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.Link, 0o777
		default:
			h.Typeflag, h.Mode = tar.TypeReg, f.Mode
			body = f.Data
			if f.Source != "" {
				st, err := os.Stat(f.Source)
				if err != nil {
					return err
				}
				if body, err = os.ReadFile(f.Source); err != nil {
					return err
				}
				if h.Mode == 0 {
					h.Mode = 0o644
					if st.Mode()&0o111 != 0 {
						h.Mode = 0o755
					}
				}
			}
			if h.Mode == 0 {
				h.Mode = 0o644
			}
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
	return tw.Close()
}
