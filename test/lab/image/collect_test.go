package image

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestCollectFollowsLinksInsideTheRoot(t *testing.T) {
	root := t.TempDir()
	mk := func(p, content string) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(p, target string) {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	// merged /usr: /sbin -> usr/sbin; alternatives: an absolute link that must stay inside the root.
	mk("usr/sbin/xtables-nft-multi", "not an ELF file")
	link("sbin", "usr/sbin")
	link("usr/sbin/iptables", "/etc/alternatives/iptables")
	link("etc/alternatives/iptables", "/usr/sbin/iptables-nft")
	link("usr/sbin/iptables-nft", "xtables-nft-multi")
	mk("usr/lib/xtables/libxt_mark.so", "ext")

	files, err := Collect(root, []string{"/sbin/iptables", "/usr/lib/xtables"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range files {
		if f.Link != "" {
			got[f.Path] = "-> " + f.Link
		} else {
			got[f.Path] = f.Source
		}
	}
	want := map[string]string{
		"/sbin":                          "-> usr/sbin",
		"/usr/sbin/iptables":             "-> /etc/alternatives/iptables",
		"/etc/alternatives/iptables":     "-> /usr/sbin/iptables-nft",
		"/usr/sbin/iptables-nft":         "-> xtables-nft-multi",
		"/usr/sbin/xtables-nft-multi":    filepath.Join(root, "usr/sbin/xtables-nft-multi"),
		"/usr/lib/xtables/libxt_mark.so": filepath.Join(root, "usr/lib/xtables/libxt_mark.so"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("collected:\n got %v\nwant %v", got, want)
	}
	if _, err := Collect(root, []string{"/usr/sbin/missing"}); err == nil {
		t.Error("a missing file was collected")
	}
}
