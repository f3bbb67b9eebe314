package etcdmember

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// revKey is the key bucket's key of a revision: main, '_', sub, and 't' for a tombstone.
func revKey(main int64, tombstone bool) []byte {
	k := make([]byte, 17, 18)
	binary.BigEndian.PutUint64(k, uint64(main))
	k[8] = '_'
	if tombstone {
		k = append(k, 't')
	}
	return k
}

func TestSnapshotFileScan(t *testing.T) {
	path := filepath.Join(t.TempDir(), "snap.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	put := []struct {
		rev       int64
		key, val  string
		tombstone bool
	}{
		{1, "/registry/secrets/default/a", "old-a", false},
		{2, "/registry/secrets/default/b", "b", false},
		{3, "/registry/configmaps/default/c", "c", false},
		{4, "/registry/secrets/default/a", "new-a", false},
		{5, "/registry/secrets/default/b", "", true},
		{6, "/registry/secrets/kube-system/d", "d", false},
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("key"))
		if err != nil {
			return err
		}
		for _, p := range put {
			v, err := proto.Marshal(&mvccpb.KeyValue{Key: []byte(p.key), Value: []byte(p.val), ModRevision: p.rev})
			if err != nil {
				return err
			}
			if err := b.Put(revKey(p.rev, p.tombstone), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	var got []string
	err = SnapshotFile(path).Scan(context.Background(), "/registry/secrets/", func(k, v []byte) error {
		got = append(got, string(k)+"="+string(v))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// a's newest value, b deleted, the configmap under another prefix.
	if want := "/registry/secrets/default/a=new-a /registry/secrets/kube-system/d=d"; strings.Join(got, " ") != want {
		t.Errorf("scan: %v, want %s", got, want)
	}
}
