package image

import (
	"archive/tar"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestWriteReadsBack(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	files := []File{
		{Path: "/usr/local/bin/tool", Source: bin},
		{Path: "/etc/conf", Data: []byte("x=1\n")},
		{Path: "/bin", Link: "usr/bin"},
	}
	digest, err := Write(out, "registry.k8s.io/tool:v1", files, Config{Entrypoint: []string{"/usr/local/bin/tool"}, Arch: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	img, err := Read(out, "registry.k8s.io/tool:v1")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := img.Digest(); err != nil || d.String() != digest {
		t.Errorf("read back: digest %v (%v), written %s", d, err, digest)
	}
	if pinned, err := Read(out, "registry.k8s.io/tool@"+digest); err != nil {
		t.Errorf("the archive does not name the image by its digest: %v", err)
	} else if d, _ := pinned.Digest(); d.String() != digest {
		t.Errorf("by digest: %s", d)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != "amd64" || cf.OS != "linux" || !reflect.DeepEqual(cf.Config.Entrypoint, []string{"/usr/local/bin/tool"}) {
		t.Errorf("config: %+v", cf)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %v, %v", layers, err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			got[h.Name] = "dir"
		case tar.TypeSymlink:
			got[h.Name] = "-> " + h.Linkname
		default:
			body, _ := io.ReadAll(tr)
			got[h.Name] = string(body) + " " + os.FileMode(h.Mode).String()
		}
	}
	want := map[string]string{
		"bin": "-> usr/bin", "etc/": "dir", "etc/conf": "x=1\n -rw-r--r--", "usr/": "dir", "usr/local/": "dir",
		"usr/local/bin/": "dir", "usr/local/bin/tool": "#!/bin/sh\necho hi\n -rwxr-xr-x",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layer:\n got %v\nwant %v", got, want)
	}

	// The same files give the same bytes: images are reproducible.
	again := filepath.Join(dir, "again.tar")
	if _, err := Write(again, "registry.k8s.io/tool:v1", files, Config{Entrypoint: []string{"/usr/local/bin/tool"}, Arch: "amd64"}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if string(a) != string(b) {
		t.Error("writing the same image twice gave different archives")
	}
}

func TestWriteRejectsRelativePaths(t *testing.T) {
	_, err := Write(filepath.Join(t.TempDir(), "x.tar"), "example.com/x:1", []File{{Path: "etc/x"}}, Config{})
	if err == nil {
		t.Error("relative path accepted")
	}
}

// Images that share their lower layers store them once in one archive; a path given twice in a layer keeps
// the later entry.
func TestWriteAllSharesLayers(t *testing.T) {
	noise := make([]byte, 1<<20) // incompressible: a layer stored twice would show in the archive's size
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	base := []File{{Path: "/bin/sh", Link: "busybox"}, {Path: "/bin/busybox", Data: noise}}
	shell := []File{{Path: "/bin/sh", Link: "busybox"}, {Path: "/bin/sh", Link: "/usr/bin/bash"}}
	out := filepath.Join(t.TempDir(), "all.tar")
	err := WriteAll(out, []Image{
		{Ref: "example.com/a:1", Layers: [][]File{base}},
		{Ref: "example.com/b:1", Layers: [][]File{base, shell}},
		{Ref: "example.com/c:2", Layers: [][]File{base, {{Path: "/c", Data: []byte("c")}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 1<<20+64<<10 {
		t.Errorf("archive of three images sharing a 1 MiB layer: %d bytes", st.Size())
	}
	tag, _ := name.NewTag("example.com/b:1")
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 2 {
		t.Fatalf("b's layers: %d, %v", len(layers), err)
	}
	rc, err := layers[1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var links []string
	for h, err := tr.Next(); err == nil; h, err = tr.Next() {
		if h.Typeflag == tar.TypeSymlink {
			links = append(links, h.Name+" -> "+h.Linkname)
		}
	}
	if !reflect.DeepEqual(links, []string{"bin/sh -> /usr/bin/bash"}) {
		t.Errorf("b's upper layer: %v, want only the later /bin/sh", links)
	}
}
