package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

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
	// Previous, when set, is a directory where the first write of the file since the directory was made
	// keeps what it replaces (a hard link to it, or a copy, with its mode and owner; an empty marker named
	// with AbsentSuffix when there was none): an upgrade keeps each node's previous files for the run, and
	// a rollback puts them back (scripts.Rollback).
	Previous string
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

// tmpMarker names the temporary files of atomic uploads; leftovers of an interrupted upload are removed by
// the next write to the same path.
const tmpMarker = ".clusterctl-tmp-"

// readBackLimit is the size up to which an existing file is compared by reading it back over SFTP (no
// process started on the host); larger files are compared by a remote sha256sum.
const readBackLimit = 1 << 20

// states checks the files, and reads what each is on the host now (Put's and Diff's common start).
func (c *Conn) states(ctx context.Context, files []File) (*sftp.Client, []remoteState, error) {
	if len(files) == 0 {
		return nil, nil, nil
	}
	if err := c.checkFiles(files); err != nil {
		return nil, nil, err
	}
	client, err := c.SFTP(ctx)
	if err != nil {
		return nil, nil, err
	}
	states, err := c.inspect(ctx, client, files)
	return client, states, err
}

// perm is the file's mode on the host: its permission bits, 0644 when it gives none.
func (f File) perm() fs.FileMode {
	if mode := f.Mode.Perm(); mode != 0 {
		return mode
	}
	return 0o644
}

// Put writes files atomically (a temporary file in the target directory, mode and owner, content, fsync,
// rename over the target), files in parallel over the connection's SFTP session. Files whose content, mode
// and owner are already right are left alone: they cost an SFTP stat and read, or one sha256sum for large
// files, and no process on the host. It reports which files changed. A dropped connection never leaves a
// partial target file: the rename happens only after the whole content is synced.
func (c *Conn) Put(ctx context.Context, files []File) (changed []bool, err error) {
	start := time.Now()
	defer func() {
		err = c.connErr(ctx, err)
		c.logPut(ctx, files, changed, start, err)
	}()
	client, states, err := c.states(ctx, files)
	if err != nil || len(files) == 0 {
		return nil, err
	}
	changed = make([]bool, len(files))
	// Their content goes over the kept connection, or, when it is bulkMin bytes or more, a direct one.
	var size int64
	for i, f := range files {
		if !states[i].sameContent {
			size += f.Len()
		}
	}
	wclient, err := c.sftpFor(ctx, size)
	if err != nil {
		return nil, err
	}
	// Files go out at once: SFTP requests of different files are in flight together, so a host costs a few
	// round trips, not several per file.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	dirs := map[string]bool{}
	for i, f := range files {
		mode := f.perm()
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
				if err := keepAt(client, BackupDir, f.Path, st.exists, true); err != nil {
					return fmt.Errorf("%s: keeping the original of %s: %w", c.target.Name, f.Path, err)
				}
			}
			if f.Previous != "" {
				if err := keepAt(client, f.Previous, f.Path, st.exists, false); err != nil {
					return fmt.Errorf("%s: keeping the previous %s for a rollback: %w", c.target.Name, f.Path, err)
				}
			}
			return c.writeAtomic(gctx, wclient, f, mode)
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

// keepAt keeps, under base, what is at p before Put first writes it: a hard link to the file (a copy, with
// its mode and owner, where base is on another file system), or an empty marker when there is none. With
// hostsOwn (the host's own originals, BackupDir), a file clusterctl wrote itself (an earlier version kept
// no record) counts as none.
func keepAt(client *sftp.Client, base, p string, exists, hostsOwn bool) error {
	b := base + p
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
	if exists && hostsOwn {
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
	if fs, ok := st.Sys().(*sftp.FileStat); ok {
		if err := w.Chown(int(fs.UID), int(fs.GID)); err != nil {
			w.Close()
			return err
		}
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
	_, states, err := c.states(ctx, files)
	if err != nil || len(files) == 0 {
		return nil, err
	}
	out := make([]Change, len(files))
	for i, f := range files {
		mode := f.perm()
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
	return states, c.compareLarge(ctx, client, files, states, large)
}

// compareLarge sets whether the large files (indexes into files and states) hold their content: those the
// host's record of what was pushed vouches for (same size and time) by the record, the others hashed on the
// host in one command.
func (c *Conn) compareLarge(ctx context.Context, client *sftp.Client, files []File, states []remoteState, large []int) error {
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
	if err != nil || len(large) == 0 {
		return err
	}
	var script strings.Builder
	script.WriteString("sha256sum --")
	for _, i := range large {
		script.WriteString(" " + ShellQuote(files[i].Path))
	}
	res, err := c.Run(ctx, script.String(), nil)
	if err != nil {
		return err
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
	return nil
}

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
	st, err := src.Stat()
	if err != nil {
		return err
	}
	client, err := c.sftpFor(ctx, st.Size())
	if err != nil {
		return err
	}
	if err := mkdirAll(client, path.Dir(remote)); err != nil {
		return fmt.Errorf("%s: creating %s: %w", c.target.Name, path.Dir(remote), err)
	}
	return c.writeFrom(ctx, client, File{Path: remote, Source: local, Size: st.Size()}, mode, &ctxReader{ctx: ctx, r: src}, nil)
}

// GetFile streams a file of at most limit bytes from the host to the new local file local (0600; an
// existing one is refused), without holding it in memory: for files as large as an etcd snapshot. It is
// synced before it returns; on error nothing of it is left.
func (c *Conn) GetFile(ctx context.Context, remote, local string, limit int64) (err error) {
	defer func() { err = c.connErr(ctx, err) }()
	client, err := c.SFTP(ctx)
	if err != nil {
		return err
	}
	// A file of bulkMin bytes or more comes over the direct connection (sftpFor).
	if st, err := client.Stat(remote); err == nil && st.Size() >= bulkMin {
		if client, err = c.sftpFor(ctx, st.Size()); err != nil {
			return err
		}
	}
	src, err := client.Open(remote)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", c.target.Name, remote, err)
	}
	defer src.Close()
	if st, err := src.Stat(); err != nil {
		return fmt.Errorf("%s: %s: %w", c.target.Name, remote, err)
	} else if !st.Mode().IsRegular() || st.Size() > limit {
		return fmt.Errorf("%s: %s is not a regular file of at most %d bytes", c.target.Name, remote, limit)
	}
	dst, err := os.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(dst, io.LimitReader(&ctxReader{ctx: ctx, r: src}, limit+1))
	if err == nil && n > limit {
		err = fmt.Errorf("%s: %s grew past %d bytes while it was read", c.target.Name, remote, limit)
	}
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(local)
		return fmt.Errorf("%s: reading %s: %w", c.target.Name, remote, err)
	}
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

// List names the regular files under dir on the host (as root when the connection becomes root), its
// subdirectories' too, sorted; symbolic links are not followed. More than max is an error. A missing dir is
// an error that wraps fs.ErrNotExist.
func (c *Conn) List(ctx context.Context, dir string, max int) (_ []string, err error) {
	defer func() { err = c.connErr(ctx, err) }()
	client, err := c.SFTP(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	var walk func(d string, depth int) error
	walk = func(d string, depth int) error {
		entries, err := client.ReadDir(d)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", c.target.Name, d, err)
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return err
			}
			p := path.Join(d, e.Name())
			switch {
			case e.Mode().IsRegular():
				if len(out) == max {
					return fmt.Errorf("%s: more than %d files under %s", c.target.Name, max, dir)
				}
				out = append(out, p)
			case e.IsDir() && depth < 8:
				if err := walk(p, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(dir, 0); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}
