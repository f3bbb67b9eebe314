package statedir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A directory is refused when another user could change it or what leads to it: a writable non-sticky
// directory above it, a symbolic link to it in such a place or of another user's, another user's
// directory above it, or its own owner another user.
func TestCheckPath(t *testing.T) {
	mk := func(t *testing.T, p string, mode os.FileMode) string {
		t.Helper()
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	refused := func(t *testing.T, dir, names string) {
		t.Helper()
		err := CheckPath(dir)
		if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), names) {
			t.Errorf("CheckPath(%s) = %v, want a refusal naming %q", dir, err, names)
		}
	}
	root := t.TempDir()
	t.Run("own directories", func(t *testing.T) {
		if err := CheckPath(mk(t, filepath.Join(root, "ok", "state"), 0o700)); err != nil {
			t.Error(err)
		}
	})
	t.Run("under a sticky world-writable directory", func(t *testing.T) {
		if err := CheckPath(mk(t, filepath.Join(mk(t, filepath.Join(root, "tmp"), 0o777|os.ModeSticky), "state"), 0o700)); err != nil {
			t.Error(err)
		}
	})
	wide := mk(t, filepath.Join(root, "wide"), 0o777)
	t.Run("under a world-writable non-sticky directory", func(t *testing.T) {
		refused(t, mk(t, filepath.Join(wide, "art"), 0o755), "wide, above")
	})
	t.Run("under a group-writable one", func(t *testing.T) {
		refused(t, mk(t, filepath.Join(mk(t, filepath.Join(root, "group"), 0o775), "art"), 0o755), "mode 0775")
	})
	t.Run("a symbolic link to it in a world-writable place", func(t *testing.T) {
		target := mk(t, filepath.Join(root, "ok", "art"), 0o755)
		link := filepath.Join(wide, "link")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		refused(t, link, "wide, above")
	})
	t.Run("a directory reached through a world-writable one", func(t *testing.T) {
		inner := mk(t, filepath.Join(wide, "inner"), 0o755)
		link := filepath.Join(root, "ok", "via")
		if err := os.Symlink(inner, link); err != nil {
			t.Fatal(err)
		}
		refused(t, link, "wide, above")
	})
	if os.Geteuid() != 0 {
		t.Skip("the ownership cases need root (chown)")
	}
	const nobody = 65534
	t.Run("another user's directory", func(t *testing.T) {
		dir := mk(t, filepath.Join(root, "theirs"), 0o700)
		if err := os.Chown(dir, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, "is owned by user")
	})
	t.Run("under another user's directory", func(t *testing.T) {
		parent := mk(t, filepath.Join(root, "their-home"), 0o755)
		dir := mk(t, filepath.Join(parent, "state"), 0o700)
		if err := os.Chown(parent, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, "their-home, above")
	})
	t.Run("another user's symbolic link in a sticky directory", func(t *testing.T) {
		link := filepath.Join(root, "tmp", "their-link")
		if err := os.Symlink(mk(t, filepath.Join(root, "ok", "art2"), 0o755), link); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(link, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		refused(t, link, "symbolic link owned by")
	})
}
