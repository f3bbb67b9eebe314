package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/pkg/sftp"
)

// File is a file to put on a host.
type File struct {
	Path string // absolute
	Data []byte
	Mode fs.FileMode // permission bits (default 0644)
	UID  int         // owner (default root)
	GID  int
}

// remoteState is what a host has at a path: content hash, mode and owner.
type remoteState struct {
	exists   bool
	sha256   string
	mode     fs.FileMode
	uid, gid int
}

// tmpMarker names the temporary files of atomic uploads; leftovers of an interrupted upload are removed by
// the next Put to the same path.
const tmpMarker = ".clusterctl-tmp-"

// Put writes files atomically (a temporary file in the target directory, fsync, mode and owner, rename over
// the target), in one round trip to learn what is already there; files whose content, mode and owner are
// already right are left alone. It reports which files changed. A dropped connection never leaves a partial
// target file: the rename happens only after the whole content is synced.
func (c *Conn) Put(ctx context.Context, files []File) ([]bool, error) {
	if len(files) == 0 {
		return nil, nil
	}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path {
			return nil, fmt.Errorf("%s: upload path %q must be absolute and clean", c.target.Name, f.Path)
		}
	}
	states, err := c.stat(ctx, files)
	if err != nil {
		return nil, err
	}
	changed := make([]bool, len(files))
	for i, f := range files {
		mode := f.Mode.Perm()
		if mode == 0 {
			mode = 0o644
		}
		st := states[i]
		sum := sha256.Sum256(f.Data)
		sameContent := st.exists && st.sha256 == hex.EncodeToString(sum[:])
		if sameContent && st.mode == mode && st.uid == f.UID && st.gid == f.GID {
			continue
		}
		changed[i] = true
		if sameContent {
			client, err := c.SFTP(ctx)
			if err != nil {
				return changed, err
			}
			if err := client.Chmod(f.Path, mode); err != nil {
				return changed, fmt.Errorf("%s: chmod %s: %w", c.target.Name, f.Path, err)
			}
			if err := client.Chown(f.Path, f.UID, f.GID); err != nil {
				return changed, fmt.Errorf("%s: chown %s: %w", c.target.Name, f.Path, err)
			}
			continue
		}
		if err := c.writeAtomic(ctx, f, mode); err != nil {
			return changed, err
		}
	}
	return changed, nil
}

func (c *Conn) writeAtomic(ctx context.Context, f File, mode fs.FileMode) error {
	client, err := c.SFTP(ctx)
	if err != nil {
		return err
	}
	dir := path.Dir(f.Path)
	if err := client.MkdirAll(dir); err != nil {
		return fmt.Errorf("%s: creating %s: %w", c.target.Name, dir, err)
	}
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	tmp := path.Join(dir, "."+path.Base(f.Path)+tmpMarker+hex.EncodeToString(b))
	fail := func(op string, err error) error {
		_ = client.Remove(tmp)
		return fmt.Errorf("%s: %s %s: %w", c.target.Name, op, f.Path, err)
	}
	w, err := client.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return fmt.Errorf("%s: creating %s: %w", c.target.Name, tmp, err)
	}
	// Mode and owner first, so that a secret is never readable by others, even empty.
	if err := w.Chmod(mode); err != nil {
		w.Close()
		return fail("chmod", err)
	}
	if err := w.Chown(f.UID, f.GID); err != nil {
		w.Close()
		return fail("chown", err)
	}
	if _, err := w.ReadFrom(bytes.NewReader(f.Data)); err != nil {
		w.Close()
		return fail("writing", err)
	}
	syncErr := w.Sync()
	if err := w.Close(); err != nil {
		return fail("closing", err)
	}
	var status *sftp.StatusError
	if errors.As(syncErr, &status) && status.FxCode() == sftp.ErrSSHFxOpUnsupported {
		// A server without the fsync@openssh.com extension: coreutils' sync flushes the file instead.
		_, syncErr = c.Run(ctx, "sync -- "+ShellQuote(tmp), nil)
	}
	if syncErr != nil {
		return fail("fsync", syncErr)
	}
	if err := ctx.Err(); err != nil {
		return fail("uploading", err)
	}
	if err := client.PosixRename(tmp, f.Path); err != nil {
		return fail("renaming into place", err)
	}
	return nil
}

// stat learns, in one command, the hash, mode and owner of every target, and removes temporary files that
// an interrupted upload to the same paths left behind.
func (c *Conn) stat(ctx context.Context, files []File) ([]remoteState, error) {
	var script strings.Builder
	script.WriteString("for f in")
	for _, f := range files {
		script.WriteString(" " + ShellQuote(f.Path))
	}
	script.WriteString(`; do
  rm -f "$(dirname "$f")/.$(basename "$f")` + tmpMarker + `"* 2>/dev/null
  if [ -f "$f" ]; then
    h=$(sha256sum < "$f") || exit 1
    echo "${h%% *} $(stat -c '%a %u %g' "$f")"
  else
    echo -
  fi
done`)
	res, err := c.Run(ctx, script.String(), nil)
	if err != nil {
		return nil, err
	}
	out := make([]remoteState, 0, len(files))
	sc := bufio.NewScanner(bytes.NewReader(res.Stdout))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 1 && fields[0] == "-" {
			out = append(out, remoteState{})
			continue
		}
		if len(fields) != 4 {
			return nil, fmt.Errorf("%s: unexpected output from stat: %q", c.target.Name, sc.Text())
		}
		mode, err1 := strconv.ParseUint(fields[1], 8, 32)
		uid, err2 := strconv.Atoi(fields[2])
		gid, err3 := strconv.Atoi(fields[3])
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("%s: unexpected output from stat: %q", c.target.Name, sc.Text())
		}
		out = append(out, remoteState{exists: true, sha256: fields[0], mode: fs.FileMode(mode), uid: uid, gid: gid})
	}
	if len(out) != len(files) {
		return nil, fmt.Errorf("%s: stat reported %d files, expected %d", c.target.Name, len(out), len(files))
	}
	return out, nil
}

// Get reads a file from the host (as root when the connection becomes root). A missing file is an error
// that wraps fs.ErrNotExist.
func (c *Conn) Get(ctx context.Context, p string) ([]byte, error) {
	client, err := c.SFTP(ctx)
	if err != nil {
		return nil, err
	}
	f, err := client.Open(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.target.Name, p, err)
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := f.WriteTo(&b); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: reading %s: %w", c.target.Name, p, err)
	}
	return b.Bytes(), nil
}
