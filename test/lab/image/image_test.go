package image

import (
	"archive/tar"
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
	if err := Write(out, "registry.k8s.io/tool:v1", files, Config{Entrypoint: []string{"/usr/local/bin/tool"}, Arch: "amd64"}); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("registry.k8s.io/tool:v1")
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
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
	if err := Write(again, "registry.k8s.io/tool:v1", files, Config{Entrypoint: []string{"/usr/local/bin/tool"}, Arch: "amd64"}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(again)
	if string(a) != string(b) {
		t.Error("writing the same image twice gave different archives")
	}
}

func TestWriteRejectsRelativePaths(t *testing.T) {
	err := Write(filepath.Join(t.TempDir(), "x.tar"), "example.com/x:1", []File{{Path: "etc/x"}}, Config{})
	if err == nil {
		t.Error("relative path accepted")
	}
}
