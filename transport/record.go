package transport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/pkg/sftp"
)

// RecordFile is where Put keeps, on each host, what it knows of the large files it wrote or hashed there:
// one line "SHA256 SIZE MTIME PATH" per file. A large file whose size and modification time (seconds) are
// those recorded is taken to hold the recorded content without hashing it on the host, as rsync's quick
// check does; anything else about it (a size or time that differs, no line) has it hashed again.
const RecordFile = "/var/lib/clusterctl/pushed"

// recordLimit bounds the record read back from a host.
const recordLimit = 1 << 20

// recordEntry is one line of the record.
type recordEntry struct {
	sha256      string
	size, mtime int64
}

// parseRecord reads a record; lines it does not understand are ignored (they are hashed again).
func parseRecord(data []byte) map[string]recordEntry {
	rec := map[string]recordEntry{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.SplitN(line, " ", 4)
		if len(f) != 4 || len(f[0]) != 64 || !path.IsAbs(f[3]) {
			continue
		}
		if _, err := hex.DecodeString(f[0]); err != nil {
			continue
		}
		size, err1 := strconv.ParseInt(f[1], 10, 64)
		mtime, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || size < 0 {
			continue
		}
		rec[f[3]] = recordEntry{sha256: f[0], size: size, mtime: mtime}
	}
	return rec
}

// formatRecord writes a record, its lines sorted by path.
func formatRecord(rec map[string]recordEntry) []byte {
	paths := make([]string, 0, len(rec))
	for p := range rec {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var b bytes.Buffer
	for _, p := range paths {
		e := rec[p]
		fmt.Fprintf(&b, "%s %d %d %s\n", e.sha256, e.size, e.mtime, p)
	}
	return b.Bytes()
}

// record is the host's record, read once per connection and kept up to date in memory (c.recMu held).
func (c *Conn) record(client *sftp.Client) (map[string]recordEntry, error) {
	if c.rec != nil {
		return c.rec, nil
	}
	data, err := readLimited(client, c.recordFile, recordLimit)
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errTooLarge) {
		return nil, fmt.Errorf("%s: reading %s: %w", c.target.Name, c.recordFile, err)
	}
	// None, or one too large to be ours: every large file is hashed, and the record written anew.
	c.rec = parseRecord(data)
	return c.rec, nil
}

// digestOf is a file's content digest in hex: the caller's, or computed.
func digestOf(f File) string {
	if f.SHA256 != "" {
		return f.SHA256
	}
	sum := sha256.Sum256(f.Data)
	return hex.EncodeToString(sum[:])
}

// updateRecord records the large files of files that Put wrote (written) or hashed and found the same
// (states[i].verified), with their size and modification time on the host, and writes the record back
// when it changed.
func (c *Conn) updateRecord(ctx context.Context, client *sftp.Client, files []File, states []remoteState, written []bool) error {
	c.recMu.Lock()
	defer c.recMu.Unlock()
	rec, err := c.record(client)
	if err != nil {
		return err
	}
	changed := false
	for i, f := range files {
		if !f.large() || !written[i] && !states[i].verified {
			continue
		}
		st, err := client.Stat(f.Path)
		if err != nil {
			return fmt.Errorf("%s: stat %s: %w", c.target.Name, f.Path, err)
		}
		e := recordEntry{sha256: digestOf(f), size: st.Size(), mtime: st.ModTime().Unix()}
		if rec[f.Path] != e {
			rec[f.Path] = e
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if err := mkdirAll(client, path.Dir(c.recordFile)); err != nil {
		return fmt.Errorf("%s: creating %s: %w", c.target.Name, path.Dir(c.recordFile), err)
	}
	return c.writeAtomic(ctx, client, File{Path: c.recordFile, Data: formatRecord(rec)}, 0o600)
}
