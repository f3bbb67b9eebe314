package apply

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/transport"
	"github.com/clusterctl/clusterctl/transport/transporttest/conntest"
)

// A dry run shows the diff of each text file that would change, from the host's content to clusterctl's;
// a secret (0600) is named as redacted, its content nowhere; a binary is named without a diff.
func TestDryRunDiffs(t *testing.T) {
	ctx := context.Background()
	conn := conntest.Connect(t)
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg := write("config.yaml", "kind: KubeletConfiguration\nmaxPods: 250\nport: 10250\n", 0o644)
	key := write("apiserver.key", "OLD PRIVATE KEY\n", 0o600)
	bin := write("kubelet", "\x7fELF\x00old", 0o755)
	files := []transport.File{
		{Path: cfg, Data: []byte("kind: KubeletConfiguration\nmaxPods: 110\nport: 10250\n"), Mode: 0o644},
		{Path: key, Data: []byte("NEW PRIVATE KEY\n"), Mode: 0o600},
		{Path: bin, Data: []byte("\x7fELF\x00new"), Mode: 0o755},
		{Path: filepath.Join(dir, "new.conf"), Data: []byte("a=1\n"), Mode: 0o644},
	}
	out, err := Files(ctx, conn, files, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Files) != 4 {
		t.Fatalf("%d changes, want 4: %+v", len(out.Files), out.Files)
	}
	if d := out.Files[0].Diff; !strings.Contains(d, "-maxPods: 250\n+maxPods: 110\n") || !strings.Contains(d, "--- "+cfg+" (on the host)") {
		t.Errorf("config diff:\n%s", d)
	}
	if f := out.Files[1]; !f.Redacted || f.Diff != "" {
		t.Errorf("the key: %+v", f)
	}
	for _, f := range out.Files {
		if strings.Contains(f.Diff, "PRIVATE KEY") {
			t.Errorf("a secret's content shown in %s's diff", f.Path)
		}
	}
	if f := out.Files[2]; f.Diff != "" || f.Redacted {
		t.Errorf("the binary: %+v", f)
	}
	if d := out.Files[3].Diff; !strings.Contains(d, "+a=1") {
		t.Errorf("a new file's diff:\n%s", d)
	}
}
