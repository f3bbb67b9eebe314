// Package backup is clusterctl's backup archive: one file holding a consistent etcd snapshot and the state
// directory (its keys included), a gzip'd tar, encrypted to age recipients (filippo.io/age) unless the
// operator asked for it plain:
//
//	manifest.json        the cluster, when, the snapshot's revision and SHA-256, clusterctl's version
//	etcd-snapshot.db     the snapshot
//	state/...            the state directory (without its lock, and without snapshots it holds)
package backup

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"filippo.io/age"

	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// Names inside the archive.
const (
	manifestName = "manifest.json"
	snapshotName = "etcd-snapshot.db"
	stateDir     = "state/"
)

// Manifest says what an archive holds.
type Manifest struct {
	Cluster     string    `json:"cluster"`
	Created     time.Time `json:"created"`
	Revision    int64     `json:"revision"`
	SnapshotSHA string    `json:"snapshotSHA256"`
	Version     string    `json:"clusterctlVersion"`
	StateFiles  int       `json:"stateFiles"`
}

// Options say how to write an archive.
type Options struct {
	// Recipients the archive is encrypted to; none: plain (the caller made sure the operator asked).
	Recipients []age.Recipient
	Manifest   Manifest
}

// ageHeader begins every age file.
const ageHeader = "age-encryption.org/v1\n"

// limits bound what an archive read back may hold.
const (
	maxEntries   = 10000
	maxStateFile = 64 << 20
)

// Write writes the archive of snapshot and the state directory to out (0600, atomically: a temporary file
// beside it, synced, renamed); an existing out is refused.
func Write(out, snapshot, state string, o Options) (Manifest, error) {
	m := o.Manifest
	if _, err := os.Lstat(out); err == nil {
		return m, fmt.Errorf("%s exists", out)
	}
	sum, err := fileSHA(snapshot)
	if err != nil {
		return m, err
	}
	m.SnapshotSHA = sum
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp-")
	if err != nil {
		return m, err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return m, err
	}
	buf := bufio.NewWriterSize(tmp, 1<<20)
	var sink io.WriteCloser = nopCloser{buf}
	if len(o.Recipients) > 0 {
		if sink, err = age.Encrypt(buf, o.Recipients...); err != nil {
			tmp.Close()
			return m, err
		}
	}
	m, err = writeTar(sink, snapshot, state, m)
	if err == nil {
		err = sink.Close()
	}
	if err == nil {
		err = buf.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return m, err
	}
	return m, os.Rename(tmp.Name(), out)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// writeTar writes the gzip'd tar: the manifest last-known (its state file count), the snapshot, the state.
func writeTar(w io.Writer, snapshot, state string, m Manifest) (Manifest, error) {
	files, err := stateFiles(state)
	if err != nil {
		return m, err
	}
	m.StateFiles = len(files)
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	if err := add(tw, manifestName, bytes.NewReader(append(data, '\n')), int64(len(data)+1), m.Created); err != nil {
		return m, err
	}
	if err := addFile(tw, snapshotName, snapshot, m.Created); err != nil {
		return m, err
	}
	for _, rel := range files {
		if err := addFile(tw, stateDir+rel, filepath.Join(state, filepath.FromSlash(rel)), m.Created); err != nil {
			return m, err
		}
	}
	if err := tw.Close(); err != nil {
		return m, err
	}
	return m, zw.Close()
}

// stateFiles are the state directory's regular files to keep (slash paths): all but the run lock,
// temporary files, and the etcd snapshots it holds (the archive's own is newer).
func stateFiles(state string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(state, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(state, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		base := path.Base(rel)
		if rel == "run.lock" || strings.HasSuffix(base, ".db") || strings.HasSuffix(base, ".part") || strings.Contains(base, ".tmp-") {
			return nil
		}
		out = append(out, rel)
		return nil
	})
	return out, err
}

func addFile(tw *tar.Writer, name, file string, at time.Time) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	return add(tw, name, f, st.Size(), at)
}

func add(tw *tar.Writer, name string, r io.Reader, size int64, at time.Time) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: size, ModTime: at, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err := io.Copy(tw, io.LimitReader(r, size))
	return err
}

func fileSHA(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ErrNeedIdentity is an encrypted archive read without an identity.
var ErrNeedIdentity = errors.New("the backup is encrypted: give the age identity that opens it (--identity FILE)")

// IsArchive says whether file is a backup archive (an age file, or a gzip'd tar beginning with the
// manifest), not a bare snapshot.
func IsArchive(file string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(ageHeader))
	n, _ := io.ReadFull(f, head)
	return string(head[:n]) == ageHeader || n >= 2 && head[0] == 0x1f && head[1] == 0x8b
}

// Extract reads an archive: the snapshot is written to snapshotOut (0600; "" skips it), the state
// directory's files under stateOut (0600 files in 0700 directories; "" skips them). Names are checked:
// nothing is written outside the two. identities open an encrypted archive.
func Extract(file string, identities []age.Identity, snapshotOut, stateOut string) (Manifest, error) {
	var m Manifest
	f, err := os.Open(file)
	if err != nil {
		return m, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	var r io.Reader = br
	if head, _ := br.Peek(len(ageHeader)); string(head) == ageHeader {
		if len(identities) == 0 {
			return m, ErrNeedIdentity
		}
		if r, err = age.Decrypt(br, identities...); err != nil {
			return m, fmt.Errorf("%s: %w", file, err)
		}
	}
	zr, err := gzip.NewReader(r)
	if err != nil {
		return m, fmt.Errorf("%s: not a clusterctl backup: %w", file, err)
	}
	return extractTar(tar.NewReader(zr), file, snapshotOut, stateOut)
}

func extractTar(tr *tar.Reader, file, snapshotOut, stateOut string) (Manifest, error) {
	var m Manifest
	var seenManifest, seenSnapshot bool
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, fmt.Errorf("%s: %w", file, err)
		}
		if n == maxEntries || h.Typeflag != tar.TypeReg {
			return m, fmt.Errorf("%s: %s: not a clusterctl backup entry", file, h.Name)
		}
		switch {
		case h.Name == manifestName:
			if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&m); err != nil {
				return m, fmt.Errorf("%s: its manifest: %w", file, err)
			}
			seenManifest = true
		case h.Name == snapshotName:
			seenSnapshot = true
			if snapshotOut != "" {
				if err := writeChecked(tr, snapshotOut, m.SnapshotSHA); err != nil {
					return m, fmt.Errorf("%s: the snapshot: %w", file, err)
				}
			}
		case strings.HasPrefix(h.Name, stateDir):
			rel := strings.TrimPrefix(h.Name, stateDir)
			if !fs.ValidPath(rel) || h.Size > maxStateFile {
				return m, fmt.Errorf("%s: %s: not a clusterctl backup entry", file, h.Name)
			}
			if stateOut != "" {
				data, err := io.ReadAll(io.LimitReader(tr, maxStateFile))
				if err != nil {
					return m, err
				}
				if err := statedir.WriteFile(filepath.Join(stateOut, filepath.FromSlash(rel)), data, 0o600); err != nil {
					return m, err
				}
			}
		default:
			return m, fmt.Errorf("%s: %s: not a clusterctl backup entry", file, h.Name)
		}
	}
	if !seenManifest || !seenSnapshot {
		return m, fmt.Errorf("%s: not a clusterctl backup (no manifest or no snapshot)", file)
	}
	return m, nil
}

// writeChecked writes r to out (0600, a new file) and checks its SHA-256 against want.
func writeChecked(r io.Reader, out, want string) error {
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && hex.EncodeToString(h.Sum(nil)) != want {
		err = fmt.Errorf("its SHA-256 is not the manifest's %s", want)
	}
	if err != nil {
		_ = os.Remove(out)
	}
	return err
}
