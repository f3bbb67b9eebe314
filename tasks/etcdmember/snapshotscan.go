package etcdmember

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// SnapshotFile reads the keys of a snapshot file on the workstation, as Client.Scan reads a member's.
type SnapshotFile string

// Scan calls fn with every key under prefix that the snapshot holds (its newest revision of each, deleted
// keys left out) and its value, in key order. The database's key bucket holds every revision not yet
// compacted, by revision: the newest of each key wins.
func (s SnapshotFile) Scan(ctx context.Context, prefix string, fn func(key, value []byte) error) error {
	if prefix == "" {
		return errors.New("scan: an empty prefix would read the whole store")
	}
	db, err := bolt.Open(string(s), 0o400, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("%s: %w", s, err)
	}
	defer db.Close()
	live := map[string][]byte{}
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return errors.New("not an etcd database: it has no key bucket")
		}
		return b.ForEach(func(rev, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			var kv mvccpb.KeyValue
			if err := proto.Unmarshal(v, &kv); err != nil {
				return fmt.Errorf("revision %x: %w", rev, err)
			}
			if !bytes.HasPrefix(kv.Key, []byte(prefix)) {
				return nil
			}
			// A tombstone's revision key ends in 't' (after 8 bytes of main revision, '_', 8 of sub).
			if len(rev) > 17 && rev[17] == 't' {
				delete(live, string(kv.Key))
				return nil
			}
			live[string(kv.Key)] = bytes.Clone(kv.Value)
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("%s: %w", s, err)
	}
	keys := make([]string, 0, len(live))
	for k := range live {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := fn([]byte(k), live[k]); err != nil {
			return err
		}
	}
	return nil
}
