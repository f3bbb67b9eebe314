package archive

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// The archive is an OCI image layout holding the image's manifest byte for byte (its digest unchanged),
// named by its tag and by its digest, as containerd's import reads them.
func TestWrite(t *testing.T) {
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "arm64", "linux"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	var buf bytes.Buffer
	var last, total int64
	digest, err := Write(&buf, "registry.k8s.io/pause:3.10.2", img, func(c, t int64) { last, total = c, t })
	if err != nil {
		t.Fatal(err)
	}
	if digest != want.String() || last != total || total == 0 {
		t.Errorf("digest %s (want %s), progress %d of %d", digest, want, last, total)
	}
	// Unpacked, it is a layout go-containerregistry reads back to the same image.
	dir := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	files := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		files[hdr.Name] = data
		os.MkdirAll(filepath.Join(dir, filepath.Dir(hdr.Name)), 0o755)
		os.WriteFile(filepath.Join(dir, hdr.Name), data, 0o644)
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := lp.Image(want)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := got.Digest(); d != want {
		t.Errorf("read back: %s", d)
	}
	if ls, _ := got.Layers(); len(ls) != 2 {
		t.Errorf("read back %d layers", len(ls))
	}
	var idx index
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, m := range idx.Manifests {
		names[m.Annotations[annotationImageName]] = m.Digest
		if m.Platform == nil || m.Platform.Architecture != "arm64" || m.Platform.OS != "linux" {
			t.Errorf("%s: platform %+v", m.Annotations[annotationImageName], m.Platform)
		}
	}
	if len(names) != 2 || names["registry.k8s.io/pause:3.10.2"] != digest || names["registry.k8s.io/pause@"+digest] != digest {
		t.Errorf("names %v", names)
	}
	// The same image gives the same bytes.
	var again bytes.Buffer
	if _, err := Write(&again, "registry.k8s.io/pause:3.10.2", img, nil); err != nil || !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Errorf("not reproducible: %v", err)
	}
}

func TestNames(t *testing.T) {
	const d = "sha256:0123"
	for ref, want := range map[string]string{
		"registry.k8s.io/pause:3.10.2":      "registry.k8s.io/pause@sha256:0123",
		"docker.io/library/haproxy:3.2":     "docker.io/library/haproxy@sha256:0123",
		"registry.example:5000/team/app:v1": "registry.example:5000/team/app@sha256:0123",
	} {
		if got := DigestName(ref, d); got != want {
			t.Errorf("DigestName(%s) = %s, want %s", ref, got, want)
		}
	}
	if got := PinnedRef("registry.k8s.io/pause:3.10.2", d); got != "registry.k8s.io/pause:3.10.2@sha256:0123" {
		t.Errorf("PinnedRef %s", got)
	}
	var img v1.Image
	if _, err := Write(io.Discard, "pause:3.10", img, nil); err == nil {
		t.Error("a reference without its registry accepted")
	}
}
