package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
)

func fixture(t *testing.T) (snapshot, state string) {
	dir := t.TempDir()
	snapshot = filepath.Join(dir, "snap.db")
	if err := os.WriteFile(snapshot, bytes.Repeat([]byte("etcd"), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	state = filepath.Join(dir, "state")
	for rel, data := range map[string]string{"pki/ca.key": "CA KEY", "admin.conf": "admin", "run.lock": "", "snapshots/old.db": "old"} {
		p := filepath.Join(state, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return snapshot, state
}

func TestWriteExtract(t *testing.T) {
	snapshot, state := fixture(t)
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b.tar.gz.age")
	m, err := Write(out, snapshot, state, Options{Recipients: []age.Recipient{id.Recipient()}, Manifest: Manifest{Cluster: "c1", Created: time.Now(), Revision: 7}})
	if err != nil {
		t.Fatal(err)
	}
	if m.StateFiles != 2 {
		t.Errorf("%d state files, want 2 (the lock and the snapshots left out)", m.StateFiles)
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode())
	}
	raw, _ := os.ReadFile(out)
	if bytes.Contains(raw, []byte("CA KEY")) || !IsArchive(out) {
		t.Fatal("the archive is not encrypted, or not recognised")
	}
	if _, err := Write(out, snapshot, state, Options{}); err == nil {
		t.Error("an existing archive was written over")
	}
	if _, err := Extract(out, nil, "", ""); !errors.Is(err, ErrNeedIdentity) {
		t.Errorf("no identity: %v", err)
	}
	other, _ := age.GenerateX25519Identity()
	if _, err := Extract(out, []age.Identity{other}, "", ""); err == nil {
		t.Error("opened with another identity")
	}
	dir := t.TempDir()
	got, err := Extract(out, []age.Identity{id}, filepath.Join(dir, "snap.db"), filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Cluster != "c1" || got.Revision != 7 {
		t.Errorf("manifest %+v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "state", "pki", "ca.key")); string(b) != "CA KEY" {
		t.Errorf("ca.key: %q", b)
	}
	if a, b := readFile(t, snapshot), readFile(t, filepath.Join(dir, "snap.db")); !bytes.Equal(a, b) {
		t.Error("the snapshot differs")
	}

	plain := filepath.Join(t.TempDir(), "b.tar.gz")
	if _, err := Write(plain, snapshot, state, Options{Manifest: Manifest{Cluster: "c1"}}); err != nil {
		t.Fatal(err)
	}
	if !IsArchive(plain) || IsArchive(snapshot) {
		t.Error("IsArchive")
	}
	if _, err := Extract(plain, nil, "", t.TempDir()); err != nil {
		t.Error(err)
	}
}

func readFile(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An entry outside the archive's layout (a path climbing out of the state directory) is refused.
func TestExtractRefusesOddEntries(t *testing.T) {
	for _, name := range []string{"state/../../etc/passwd", "other.txt", "state//abs"} {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		for _, e := range []struct{ name, data string }{{manifestName, `{"cluster":"c"}`}, {name, "x"}} {
			_ = tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o600, Size: int64(len(e.data)), Typeflag: tar.TypeReg})
			_, _ = tw.Write([]byte(e.data))
		}
		tw.Close()
		zw.Close()
		file := filepath.Join(t.TempDir(), "odd.tar.gz")
		if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		if _, err := Extract(file, nil, "", filepath.Join(out, "state")); err == nil || !strings.Contains(err.Error(), "not a clusterctl backup entry") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
