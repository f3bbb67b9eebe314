package etcdmember

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// snapshotOf is what etcd streams for a database: its pages, then their SHA-256.
func snapshotOf(t *testing.T, pages int) []byte {
	t.Helper()
	db := make([]byte, pages*512)
	if _, err := rand.Read(db); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(db)
	return append(db, sum[:]...)
}

func TestVerifySnapshot(t *testing.T) {
	good := snapshotOf(t, 300)
	flipped := bytes.Clone(good)
	flipped[1000] ^= 1
	cases := []struct {
		name string
		data []byte
		want string // "" ok, else in the error
	}{
		{"whole", good, ""},
		{"a flipped bit", flipped, "integrity hash does not match"},
		{"truncated", good[:len(good)-100], "do not end with an integrity hash"},
		{"a database without its hash", good[:len(good)-sha256.Size], "integrity hash"},
		{"empty", nil, "not an etcd snapshot"},
	}
	dir := t.TempDir()
	for _, c := range cases {
		p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
		if err := os.WriteFile(p, c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		n, sum, err := VerifySnapshot(p)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want == "" && (n != int64(len(c.data)) || len(sum) != 64):
			t.Errorf("%s: size %d, sha256 %q", c.name, n, sum)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

// The check holds whatever sizes the stream arrives in.
func TestTrailerChunks(t *testing.T) {
	data := snapshotOf(t, 7)
	for _, chunk := range []int{1, 31, 32, 33, 512, len(data)} {
		tr := &trailer{h: sha256.New()}
		for i := 0; i < len(data); i += chunk {
			tr.Write(data[i:min(i+chunk, len(data))])
		}
		if err := tr.check(); err != nil {
			t.Errorf("chunks of %d: %v", chunk, err)
		}
	}
}
