package charts

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/inventory"
)

func TestRenderImages(t *testing.T) {
	a := &inventory.Addon{Name: "demo", Path: "testdata/demo", Values: inventory.Values{"image": map[string]any{"tag": "v9"}}}
	ch, err := Load(a, func(p string) string { return p }, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := Values(a, func(p string) string { return p })
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := Render(context.Background(), ch, vals, "demo", "demo-ns", "v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(manifest, "namespace: demo-ns") {
		t.Errorf("the release's namespace is not rendered:\n%s", manifest)
	}
	got, err := Images(manifest)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"docker.io/library/busybox:latest", "docker.io/rancher/hook:1.0", "quay.io/demo/init:v2", "registry.example.com/demo/server:v9"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("images = %v, want %v", got, want)
	}
}

func TestValuesOrder(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("replicas: 1\nkeep: {p: 1, q: 2}\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "b.yaml"), []byte("replicas: 2\nkeep: {q: 3}\n"), 0o600)
	a := &inventory.Addon{Name: "x", ValuesFiles: []string{"a.yaml", "b.yaml"}, Values: inventory.Values{"replicas": 5}}
	got, err := Values(a, func(p string) string { return filepath.Join(dir, p) })
	if err != nil {
		t.Fatal(err)
	}
	// inline over the files, each file over the one before; numbers as JSON's
	want := map[string]any{"replicas": float64(5), "keep": map[string]any{"p": float64(1), "q": float64(3)}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("values = %#v, want %#v", got, want)
	}
}

func TestNormalizeImage(t *testing.T) {
	for in, want := range map[string]string{
		"busybox":                           "docker.io/library/busybox:latest",
		"rancher/local-path-provisioner:v1": "docker.io/rancher/local-path-provisioner:v1",
		"registry.k8s.io/metrics-server/metrics-server:v0.8.0": "registry.k8s.io/metrics-server/metrics-server:v0.8.0",
		"localhost:5000/x:1@sha256:" + strings.Repeat("a", 64): "localhost:5000/x:1",
	} {
		if got, err := NormalizeImage(in); err != nil || got != want {
			t.Errorf("NormalizeImage(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := NormalizeImage("quay.io/x@sha256:" + strings.Repeat("a", 64)); err == nil {
		t.Error("an image by digest alone was accepted")
	}
}

func TestValuesDiff(t *testing.T) {
	if d := valuesDiff(map[string]any{"a": float64(1)}, map[string]any{"a": float64(1)}); d != "" {
		t.Errorf("equal values differ:\n%s", d)
	}
	d := valuesDiff(map[string]any{"replicas": float64(1), "x": "y"}, map[string]any{"replicas": float64(2), "x": "y"})
	if !strings.Contains(d, "-replicas: 1\n+replicas: 2\n") {
		t.Errorf("diff:\n%s", d)
	}
}

func TestLoadRefusesOtherVersion(t *testing.T) {
	a := &inventory.Addon{Name: "demo", Path: "testdata/demo", Version: "1.2.4"}
	if _, err := Load(a, func(p string) string { return p }, "", nil); err == nil || !strings.Contains(err.Error(), "asks for version 1.2.4") {
		t.Errorf("err = %v", err)
	}
}
