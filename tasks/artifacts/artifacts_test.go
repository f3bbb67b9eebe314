package artifacts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestManifestRoundTripAndVerify(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("bin/linux-amd64/kubelet", "kubelet binary")
	write("images/linux-amd64/pause.tar", "pause image")
	m := &Manifest{KubernetesVersion: "v1.34.4", PauseVersion: "3.10.1"}
	if err := m.Add(dir, File{Path: "images/linux-amd64/pause.tar", Kind: KindImage, Name: "pause", Arch: "amd64", Image: "registry.k8s.io/pause:3.10.1"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Add(dir, File{Path: "bin/linux-amd64/kubelet", Kind: KindBinary, Name: "kubelet", Arch: "amd64"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Write(dir); err != nil {
		t.Fatal(err)
	}
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Files[0].Path != "bin/linux-amd64/kubelet" {
		t.Errorf("files not sorted by path: %+v", back.Files)
	}
	// printf 'kubelet binary' | sha256sum
	if f := back.Files[0]; f.SHA256 != "a0293c2f7bd5dfaf9a245d01cc7f74313786457207f0b5ec8a104cbf51405c00" || f.Size != 14 {
		t.Errorf("kubelet recorded as %s, %d bytes", f.SHA256, f.Size)
	}
	if f := back.Find(KindImage, "pause", "amd64"); f == nil || f.Image != "registry.k8s.io/pause:3.10.1" {
		t.Errorf("Find(pause) = %+v", f)
	}
	if err := back.Verify(dir); err != nil {
		t.Fatalf("fresh directory does not verify: %v", err)
	}

	write("bin/linux-amd64/kubelet", "kubelet binarx")               // same size, other content
	write("images/linux-amd64/pause.tar", "pause image, but longer") // other size
	back.Files = append(back.Files, File{Path: "../etc/passwd", Kind: KindBinary}, File{Path: "bin/linux-amd64/gone", Kind: KindBinary})
	err = back.Verify(dir)
	if err == nil {
		t.Fatal("corrupt directory verifies")
	}
	for _, want := range []string{"kubelet: sha256", "pause.tar: 23 bytes, manifest says 11", "../etc/passwd: path leaves", "gone: no such file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Verify error lacks %q:\n%v", want, err)
		}
	}
}

func TestLoadRejectsUnknownFields(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(`{"kubernetesVersion":"v1.34.4","fils":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), `unknown field "fils"`) {
		t.Errorf("Load = %v", err)
	}
}
