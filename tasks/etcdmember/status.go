package etcdmember

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Status is what one member says of itself, as `etcdctl endpoint status` and `endpoint health` show it.
type Status struct {
	ID        uint64 `json:"-"`
	IDHex     string `json:"id"`
	Version   string `json:"version"`
	Leader    bool   `json:"leader"`
	LeaderHex string `json:"leaderID"`
	Learner   bool   `json:"learner"`
	// DBSize is the backend database's size on disk; DBSizeInUse the part holding data (the rest is freed
	// pages a defragmentation returns).
	DBSize      int64  `json:"dbSize"`
	DBSizeInUse int64  `json:"dbSizeInUse"`
	Revision    int64  `json:"revision"`
	RaftTerm    uint64 `json:"raftTerm"`
	RaftIndex   uint64 `json:"raftIndex"`
	// Healthy: the member answered a linearizable read (it is part of a quorum that has a leader) and
	// reports no error (alarms such as NOSPACE).
	Healthy bool     `json:"healthy"`
	Errors  []string `json:"errors,omitempty"`
}

// Status asks the client's endpoint for its status and its health (a linearizable read of a key that need
// not exist, as etcdctl's endpoint health does).
func (c *Client) Status(ctx context.Context) (*Status, error) {
	eps := c.c.Endpoints()
	if len(eps) != 1 {
		return nil, fmt.Errorf("status needs one endpoint, the client has %d", len(eps))
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := c.c.Status(sctx, eps[0])
	if err != nil {
		return nil, err
	}
	s := &Status{ID: r.Header.MemberId, IDHex: fmt.Sprintf("%x", r.Header.MemberId), Version: r.Version,
		Leader: r.Leader == r.Header.MemberId, LeaderHex: fmt.Sprintf("%x", r.Leader), Learner: r.IsLearner,
		DBSize: r.DbSize, DBSizeInUse: r.DbSizeInUse, Revision: r.Header.Revision, RaftTerm: r.RaftTerm,
		RaftIndex: r.RaftIndex, Errors: r.Errors}
	hctx, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	if _, err := c.c.Get(hctx, "health"); err != nil && !s.Learner {
		s.Errors = append(s.Errors, "linearizable read: "+err.Error())
	}
	s.Healthy = len(s.Errors) == 0
	return s, nil
}

// SnapshotInfo describes a snapshot written by Snapshot.
type SnapshotInfo struct {
	// Revision is the store's revision the snapshot holds (the stream's first header).
	Revision int64 `json:"revision"`
	// Version is the etcd version of the member that made it: restore with the same or newer.
	Version string `json:"etcdVersion"`
	Size    int64  `json:"size"`
	// SHA256 is of the whole file (the file as written, its trailing integrity hash included).
	SHA256 string `json:"sha256"`
}

// Snapshot streams a point-in-time snapshot of the member's database to w. The stream ends with the
// SHA-256 of the database before it, which is checked here, as etcdutl checks it on restore.
func (c *Client) Snapshot(ctx context.Context, w io.Writer) (*SnapshotInfo, error) {
	r, err := c.c.SnapshotWithVersion(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Snapshot.Close()
	file := sha256.New()
	tail := &trailer{h: sha256.New()}
	n, err := io.Copy(io.MultiWriter(w, file, tail), r.Snapshot)
	if err != nil {
		return nil, fmt.Errorf("snapshot stream after %d bytes: %w", n, err)
	}
	if err := tail.check(); err != nil {
		return nil, err
	}
	info := &SnapshotInfo{Version: r.Version, Size: n, SHA256: hex.EncodeToString(file.Sum(nil))}
	if r.Header != nil {
		info.Revision = r.Header.Revision
	}
	return info, nil
}

// trailer hashes everything written to it but the last sha256.Size bytes, which it keeps.
type trailer struct {
	h    hash.Hash
	last []byte
	n    int64
}

func (t *trailer) Write(p []byte) (int, error) {
	t.n += int64(len(p))
	t.last = append(t.last, p...)
	if len(t.last) > sha256.Size {
		t.h.Write(t.last[:len(t.last)-sha256.Size])
		t.last = append(t.last[:0], t.last[len(t.last)-sha256.Size:]...)
	}
	return len(p), nil
}

// check reports whether the data ended with the SHA-256 of what came before it (etcd appends it to a
// snapshot; the data before it is a whole number of 512-byte pages).
func (t *trailer) check() error {
	if len(t.last) < sha256.Size || (t.n-sha256.Size)%512 != 0 {
		return fmt.Errorf("not an etcd snapshot: %d bytes do not end with an integrity hash", t.n)
	}
	if !bytes.Equal(t.h.Sum(nil), t.last) {
		return errors.New("etcd snapshot corrupt: its integrity hash does not match its data")
	}
	return nil
}

// VerifySnapshot checks a snapshot file's integrity hash (see Snapshot) and returns its size and SHA-256.
func VerifySnapshot(path string) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	file := sha256.New()
	tail := &trailer{h: sha256.New()}
	n, err := io.Copy(io.MultiWriter(file, tail), f)
	if err != nil {
		return 0, "", fmt.Errorf("%s: %w", path, err)
	}
	if err := tail.check(); err != nil {
		return 0, "", fmt.Errorf("%s: %w", path, err)
	}
	return n, hex.EncodeToString(file.Sum(nil)), nil
}

// SnapshotRevision opens a snapshot file's database read-only, checks its pages (as etcdutl snapshot
// status does) and returns the store's revision it holds: the newest key revision.
func SnapshotRevision(path string) (int64, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	defer db.Close()
	var rev int64
	err = db.View(func(tx *bolt.Tx) error {
		var problems []string
		for err := range tx.Check() { // read to the end: the checker stops when its channel is drained
			problems = append(problems, err.Error())
		}
		if len(problems) > 0 {
			return fmt.Errorf("database check failed (%d problems): %s", len(problems), strings.Join(problems[:min(len(problems), 5)], "; "))
		}
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return errors.New("not an etcd database: it has no key bucket")
		}
		// Keys are revisions: 8 bytes of main revision, big-endian, then '_' and the sub-revision.
		if k, _ := b.Cursor().Last(); len(k) >= 8 {
			rev = int64(binary.BigEndian.Uint64(k[:8]))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return rev, nil
}
