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
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/pkg/sftp"
	"golang.org/x/sync/errgroup"
)

// File is a file to put on a host.
type File struct {
	Path string // absolute
	Data []byte
	Mode fs.FileMode // permission bits (default 0644)
	UID  int         // owner (default root)
	GID  int
	// SHA256 is Data's digest in hex when the caller knows it (artifacts list theirs): large files are then
	// compared without hashing them here for every host.
	SHA256 string
	// Source is a local file whose content is put in place of Data, streamed, never held whole: Size is its
	// size and SHA256 its digest, both required. What is sent is hashed on the way and checked against
	// SHA256 before the rename: a source changed since it was listed is never put.
	Source string
	Size   int64
	// Keep marks a file that may have been on the host before clusterctl (a runtime's configuration, a
	// kernel setting, a unit, a binary): the first time Put replaces or creates it, it keeps the original
	// under BackupDir (or records that there was none), so that reset can put the host back as it was.
	Keep bool
}

// BackupDir is where Put keeps what it replaced of a host's own files (File.Keep): BackupDir + the path,
// or that name + AbsentSuffix when there was no file.
const (
	BackupDir    = "/var/lib/clusterctl/backup"
	AbsentSuffix = ".absent"
)

// Len is the size of the file's content.
func (f File) Len() int64 {
	if f.Source != "" {
		return f.Size
	}
	return int64(len(f.Data))
}

// large files are compared by digest (the record, or a remote hash), not read back.
func (f File) large() bool { return f.Source != "" || len(f.Data) > readBackLimit }

// remoteState is what a host has at a path.
type remoteState struct {
	exists      bool
	sameContent bool
	mode        fs.FileMode
	uid, gid    int
	size, mtime int64
	// verified: a large file whose content was hashed on the host (and found the same), to be recorded.
	verified bool
}

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

// tmpMarker names the temporary files of atomic uploads; leftovers of an interrupted upload are removed by
// the next write to the same path.
const tmpMarker = ".clusterctl-tmp-"

// readBackLimit is the size up to which an existing file is compared by reading it back over SFTP (no
// process started on the host); larger files are compared by a remote sha256sum.
const readBackLimit = 1 << 20

// Put writes files atomically (a temporary file in the target directory, mode and owner, content, fsync,
// rename over the target), files in parallel over the connection's SFTP session. Files whose content, mode
// and owner are already right are left alone: they cost an SFTP stat and read, or one sha256sum for large
// files, and no process on the host. It reports which files changed. A dropped connection never leaves a
// partial target file: the rename happens only after the whole content is synced.
func (c *Conn) Put(ctx context.Context, files []File) (_ []bool, err error) {
	defer func() { err = c.connErr(ctx, err) }()
	if len(files) == 0 {
		return nil, nil
	}
	if err := c.checkFiles(files); err != nil {
		return nil, err
	}
	client, err := c.SFTP(ctx)
	if err != nil {
		return nil, err
	}
	states, err := c.inspect(ctx, client, files)
	if err != nil {
		return nil, err
	}
	changed := make([]bool, len(files))
	// Files go out at once: SFTP requests of different files are in flight together, so a host costs a few
	// round trips, not several per file.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	dirs := map[string]bool{}
	for i, f := range files {
		mode := f.Mode.Perm()
		if mode == 0 {
			mode = 0o644
		}
		st := states[i]
		if st.sameContent && st.mode == mode && st.uid == f.UID && st.gid == f.GID {
			continue
		}
		changed[i] = true
		if st.sameContent {
			g.Go(func() error {
				if err := client.Chmod(f.Path, mode); err != nil {
					return fmt.Errorf("%s: chmod %s: %w", c.target.Name, f.Path, err)
				}
				if err := client.Chown(f.Path, f.UID, f.GID); err != nil {
					return fmt.Errorf("%s: chown %s: %w", c.target.Name, f.Path, err)
				}
				return nil
			})
			continue
		}
		if dir := path.Dir(f.Path); !dirs[dir] && !st.exists {
			dirs[dir] = true
			if err := mkdirAll(client, dir); err != nil {
				return changed, fmt.Errorf("%s: creating %s: %w", c.target.Name, dir, err)
			}
		}
		g.Go(func() error {
			// The original is kept by the same goroutine that replaces it, in parallel with the other files.
			if f.Keep {
				if err := keepOriginal(client, f.Path, st.exists); err != nil {
					return fmt.Errorf("%s: keeping the original of %s: %w", c.target.Name, f.Path, err)
				}
			}
			return c.writeAtomic(gctx, client, f, mode)
		})
	}
	if err := g.Wait(); err != nil {
		return changed, err
	}
	return changed, c.updateRecord(ctx, client, files, states, changed)
}

// checkFiles refuses paths that are not absolute and clean, and sources without their size and digest.
func (c *Conn) checkFiles(files []File) error {
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || strings.ContainsAny(f.Path, "\n\\") {
			return fmt.Errorf("%s: upload path %q must be absolute and clean, without newlines or backslashes", c.target.Name, f.Path)
		}
		if f.Source != "" && (len(f.SHA256) != 64 || f.Size < 0 || len(f.Data) > 0) {
			return fmt.Errorf("%s: %s: a streamed source (%s) needs its size and sha256, and no data", c.target.Name, f.Path, f.Source)
		}
	}
	return nil
}

// keepOriginal keeps what is at p before Put first writes it: a hard link to the host's own file (a copy
// where the backup is on another file system), or an empty marker when there is none. A file clusterctl
// wrote itself (an earlier version kept no record) counts as none.
func keepOriginal(client *sftp.Client, p string, exists bool) error {
	b := BackupDir + p
	for _, q := range []string{b, b + AbsentSuffix} {
		if _, err := client.Lstat(q); err == nil {
			return nil // kept at an earlier write
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := mkdirAll(client, path.Dir(b)); err != nil {
		return err
	}
	if exists {
		data, err := readHead(client, p, len(managedMark))
		if err != nil {
			return err
		}
		exists = string(data) != managedMark
	}
	if !exists {
		f, err := client.OpenFile(b+AbsentSuffix, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
		if err != nil {
			return err
		}
		return f.Close()
	}
	if err := client.Link(p, b); err == nil {
		return nil
	}
	// Another file system: copied through this connection, streamed (a binary may be large).
	src, err := client.Open(p)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	w, err := client.OpenFile(b, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return err
	}
	if err := w.Chmod(st.Mode().Perm()); err != nil {
		w.Close()
		return err
	}
	if _, err := io.Copy(w, src); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// managedMark starts every configuration file clusterctl writes.
const managedMark = "# Managed by clusterctl"

func readHead(client *sftp.Client, p string, n int) ([]byte, error) {
	f, err := client.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	m, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:m], nil
}

// dirMode is the mode of the directories Put creates (root's, readable by all, as kubeadm makes them).
const dirMode = 0o755

// mkdirAll creates dir and its missing parents, each given dirMode explicitly: sftp-server runs with umask
// 077, and a directory is never left with a mode that depends on a host's umask.
func mkdirAll(client *sftp.Client, dir string) error {
	if st, err := client.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := path.Dir(dir); parent != dir {
		if err := mkdirAll(client, parent); err != nil {
			return err
		}
	}
	if err := client.Mkdir(dir); err != nil {
		// Another upload of the same run may have made it meanwhile.
		if st, serr := client.Stat(dir); serr != nil || !st.IsDir() {
			return err
		}
		return nil
	}
	return client.Chmod(dir, dirMode)
}

// BytesWritten is how many bytes of file content Put has written on the host through this connection.
func (c *Conn) BytesWritten() int64 { return c.written.Load() }

// Change is what Put would do to one file.
type Change string

// The changes Diff reports.
const (
	ChangeNone    Change = ""
	ChangeCreate  Change = "create"
	ChangeContent Change = "content"
	ChangeMode    Change = "mode" // mode or owner only
)

// Diff reports what Put would change for each file, writing nothing: a dry run.
func (c *Conn) Diff(ctx context.Context, files []File) (_ []Change, err error) {
	defer func() { err = c.connErr(ctx, err) }()
	if len(files) == 0 {
		return nil, nil
	}
	if err := c.checkFiles(files); err != nil {
		return nil, err
	}
	client, err := c.SFTP(ctx)
	if err != nil {
		return nil, err
	}
	states, err := c.inspect(ctx, client, files)
	if err != nil {
		return nil, err
	}
	out := make([]Change, len(files))
	for i, f := range files {
		mode := f.Mode.Perm()
		if mode == 0 {
			mode = 0o644
		}
		st := states[i]
		switch {
		case !st.exists:
			out[i] = ChangeCreate
		case !st.sameContent:
			out[i] = ChangeContent
		case st.mode != mode || st.uid != f.UID || st.gid != f.GID:
			out[i] = ChangeMode
		}
	}
	return out, nil
}

// inspect learns what each target holds: SFTP stat for all, in parallel; small files of the right size are
// read back and compared; large ones are hashed on the host in one command.
func (c *Conn) inspect(ctx context.Context, client *sftp.Client, files []File) ([]remoteState, error) {
	states := make([]remoteState, len(files))
	var large []int
	var mu sync.Mutex
	g, _ := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, f := range files {
		g.Go(func() error {
			st, err := client.Stat(f.Path)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: stat %s: %w", c.target.Name, f.Path, err)
			}
			rs := remoteState{exists: true, mode: st.Mode().Perm(), size: st.Size(), mtime: st.ModTime().Unix()}
			if fst, ok := st.Sys().(*sftp.FileStat); ok {
				rs.uid, rs.gid = int(fst.UID), int(fst.GID)
			}
			switch {
			case !st.Mode().IsRegular() || st.Size() != f.Len():
			case !f.large():
				got, err := readAll(client, f.Path)
				if err != nil {
					return fmt.Errorf("%s: reading %s: %w", c.target.Name, f.Path, err)
				}
				rs.sameContent = bytes.Equal(got, f.Data)
			default:
				mu.Lock()
				large = append(large, i)
				mu.Unlock()
			}
			states[i] = rs
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if len(large) == 0 {
		return states, nil
	}
	// Large files the record vouches for are not hashed.
	c.recMu.Lock()
	rec, err := c.record(client)
	if err == nil {
		large = slices.DeleteFunc(large, func(i int) bool {
			e, ok := rec[files[i].Path]
			if !ok || e.size != states[i].size || e.mtime != states[i].mtime {
				return false
			}
			states[i].sameContent = e.sha256 == digestOf(files[i])
			return true
		})
	}
	c.recMu.Unlock()
	if err != nil {
		return nil, err
	}
	if len(large) == 0 {
		return states, nil
	}
	var script strings.Builder
	script.WriteString("sha256sum --")
	for _, i := range large {
		script.WriteString(" " + ShellQuote(files[i].Path))
	}
	res, err := c.Run(ctx, script.String(), nil)
	if err != nil {
		return nil, err
	}
	remote := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(res.Stdout))
	for sc.Scan() {
		if sum, p, ok := strings.Cut(sc.Text(), "  "); ok {
			remote[p] = sum
		}
	}
	for _, i := range large {
		states[i].sameContent = remote[files[i].Path] == digestOf(files[i])
		states[i].verified = states[i].sameContent
	}
	return states, nil
}

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
func (r *sizedReader) Size() int64                { return r.size }

// PutFile streams a local file to a host as Put writes one (temporary file, mode and owner, content, fsync,
// rename), without holding it in memory: for files as large as an etcd snapshot. The parent directory is
// created (0755) if missing. It is always written.
func (c *Conn) PutFile(ctx context.Context, local, remote string, mode fs.FileMode) (err error) {
	defer func() { err = c.connErr(ctx, err) }()
	if !path.IsAbs(remote) || path.Clean(remote) != remote || strings.ContainsAny(remote, "\n\\") {
		return fmt.Errorf("%s: upload path %q must be absolute and clean, without newlines or backslashes", c.target.Name, remote)
	}
	src, err := os.Open(local)
	if err != nil {
		return err
	}
	defer src.Close()
	client, err := c.SFTP(ctx)
	if err != nil {
		return err
	}
	if err := mkdirAll(client, path.Dir(remote)); err != nil {
		return fmt.Errorf("%s: creating %s: %w", c.target.Name, path.Dir(remote), err)
	}
	st, err := src.Stat()
	if err != nil {
		return err
	}
	return c.writeFrom(ctx, client, File{Path: remote, Source: local, Size: st.Size()}, mode, &ctxReader{ctx: ctx, r: src}, nil)
}

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

// Get reads a file from the host (as root when the connection becomes root). A missing file is an error
// that wraps fs.ErrNotExist.
func (c *Conn) Get(ctx context.Context, p string) (_ []byte, err error) {
	defer func() { err = c.connErr(ctx, err) }()
	client, err := c.SFTP(ctx)
	if err != nil {
		return nil, err
	}
	b, err := readAll(client, p)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c.target.Name, p, err)
	}
	return b, nil
}
