package transport

import (
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
	"strings"

	"github.com/pkg/sftp"
)

// getLimit bounds what Get and the comparison of small files read back from a host.
const getLimit = 16 << 20

func readAll(client *sftp.Client, p string) ([]byte, error) { return readLimited(client, p, getLimit) }

// readLimited reads a file of at most limit bytes (a larger one is an error).
func readLimited(client *sftp.Client, p string, limit int64) ([]byte, error) {
	f, err := client.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	w := &cappedBuffer{limit: limit}
	if _, err := f.WriteTo(w); err != nil && !errors.Is(err, io.EOF) {
		if w.over {
			return nil, fmt.Errorf("%s is larger than %d bytes: %w", p, limit, errTooLarge)
		}
		return nil, err
	}
	return w.buf.Bytes(), nil
}

// errTooLarge is a file read back from a host that is over its limit.
var errTooLarge = errors.New("too large")

// cappedBuffer is a buffer that refuses to grow past limit.
type cappedBuffer struct {
	buf   bytes.Buffer
	limit int64
	over  bool
}

func (w *cappedBuffer) Write(p []byte) (int, error) {
	if int64(w.buf.Len()+len(p)) > w.limit {
		w.over = true
		return 0, errors.New("over the limit")
	}
	return w.buf.Write(p)
}

func (c *Conn) writeAtomic(ctx context.Context, client *sftp.Client, f File, mode fs.FileMode) error {
	if f.Source == "" {
		return c.writeFrom(ctx, client, f, mode, bytes.NewReader(f.Data), nil)
	}
	src, err := os.Open(f.Source)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", c.target.Name, f.Path, err)
	}
	defer src.Close()
	h := sha256.New()
	r := &sizedReader{r: io.TeeReader(&ctxReader{ctx: ctx, r: src}, h), size: f.Size}
	return c.writeFrom(ctx, client, f, mode, r, func(n int64) error {
		if sum := hex.EncodeToString(h.Sum(nil)); n != f.Size || sum != f.SHA256 {
			return fmt.Errorf("%s changed since it was listed (%d bytes, sha256 %s; listed: %d bytes, sha256 %s)", f.Source, n, sum, f.Size, f.SHA256)
		}
		return nil
	})
}

// sizedReader tells sftp's ReadFrom how much is coming, so that it writes with requests in flight together.
type sizedReader struct {
	r    io.Reader
	size int64
}

func (r *sizedReader) Read(p []byte) (int, error) { return r.r.Read(p) }

func (r *sizedReader) Size() int64 { return r.size }

// ErrNoSpace is a write that failed because the host's filesystem had no room for the file.
var ErrNoSpace = errors.New("no space left on the host's filesystem")

// explainNoSpace turns a failed write into ErrNoSpace, with the figures, when the filesystem of dir has less
// room than the file needs (its temporary file already removed): sftp-server reports a full disk as a bare
// "Failure". Any other failure, or one it cannot tell (no statvfs@openssh.com), is returned as it was.
func explainNoSpace(client *sftp.Client, dir string, size int64, err error) error {
	st, serr := client.StatVFS(dir)
	if serr != nil || size <= 0 || st.FreeSpace() >= uint64(size) {
		return err
	}
	return fmt.Errorf("%w: the file is %s, the filesystem of %s has %s free of %s (%w)",
		ErrNoSpace, mebibytes(uint64(size)), dir, mebibytes(st.FreeSpace()), mebibytes(st.TotalSpace()), err)
}

func mebibytes(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// ctxReader stops a long copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r *ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// writeFrom writes f.Path atomically from r, with f's owner and mode; check, when given, is told how many
// bytes were written and may refuse them before the rename.
func (c *Conn) writeFrom(ctx context.Context, client *sftp.Client, f File, mode fs.FileMode, r io.Reader, check func(int64) error) error {
	dir, base := path.Dir(f.Path), path.Base(f.Path)
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	tmp := path.Join(dir, "."+base+tmpMarker+hex.EncodeToString(b))
	fail := func(op string, err error) error {
		_ = client.Remove(tmp)
		if op == "writing" || op == "closing" || op == "fsync" {
			err = explainNoSpace(client, dir, f.Len(), err)
		}
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
	n, err := w.ReadFrom(r)
	if err != nil {
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
	if check != nil {
		if err := check(n); err != nil {
			return fail("uploading", err)
		}
	}
	if err := client.PosixRename(tmp, f.Path); err != nil {
		return fail("renaming into place", err)
	}
	// Temporary files an interrupted upload of the same file left behind.
	if entries, err := client.ReadDir(dir); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "."+base+tmpMarker) {
				_ = client.Remove(path.Join(dir, e.Name()))
			}
		}
	}
	c.written.Add(n)
	return nil
}
