package textdiff

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestUnified(t *testing.T) {
	for _, tc := range []struct{ name, a, b, want string }{
		{"equal", "x\n", "x\n", ""},
		{"changed value", "replicas: 1\nimage: a\n", "replicas: 2\nimage: a\n",
			"--- old\n+++ new\n@@ -1,2 +1,2 @@\n-replicas: 1\n+replicas: 2\n image: a\n"},
		{"from nothing", "", "a: 1\n", "--- old\n+++ new\n@@ -0,0 +1 @@\n+a: 1\n"},
		{"to nothing", "a: 1\n", "", "--- old\n+++ new\n@@ -1 +0,0 @@\n-a: 1\n"},
	} {
		if got := Unified("old", "new", tc.a, tc.b, 3); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}

// TestAgainstDiff checks the hunks against diff -u's, where diff is installed: two changes far apart make
// two hunks, near ones one.
func TestAgainstDiff(t *testing.T) {
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("no diff")
	}
	var a, b []string
	for i := range 40 {
		l := strings.Repeat("x", i%7) + string(rune('a'+i%26))
		a = append(a, l)
		switch i {
		case 3, 5, 30:
			b = append(b, l+" changed")
		case 20:
		default:
			b = append(b, l)
		}
	}
	b = append(b, "added at the end")
	as, bs := strings.Join(a, "\n")+"\n", strings.Join(b, "\n")+"\n"
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte(as), 0o600)
	os.WriteFile(filepath.Join(dir, "b"), []byte(bs), 0o600)
	cmd := exec.Command("diff", "-u", "--label", "a", "--label", "b", "a", "b")
	cmd.Dir = dir
	want, _ := cmd.Output()
	if got := Unified("a", "b", as, bs, 3); got != string(want) {
		t.Errorf("got:\n%s\ndiff -u:\n%s", got, want)
	}
}
