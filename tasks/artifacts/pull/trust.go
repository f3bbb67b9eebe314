package pull

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// A checksum a file's own origin publishes proves nothing against that origin: a mirror (or a server posing
// as the origin) that serves other bytes serves a matching checksum file too. So every file is also checked
// against a digest obtained elsewhere, the first of:
//
//   - the user's checksums file (--checksums: own builds, a mirror's own list),
//   - the digests built into clusterctl (builtinDigests: upstream releases whose digests are public facts),
//   - the lock (DefaultLock, --lock, cluster.downloads.lock): one file across versions and architectures
//     that every verified pull adds to, as go.sum does: a later pull or another mirror that serves other
//     bytes is refused. A team commits it beside the inventory, so that every workstation and CI job pins
//     the same bytes, upgrades included,
//   - an artifacts directory's own artifacts.lock, which earlier clusterctl versions wrote (read, never
//     written).
//
// Images are pinned by their digest the same way. A file or image fetched over plain HTTP must match one
// of them: its origin's checksum alone is never enough. Anything the first three do not pin is said once
// (Options.Events, EventUnpinned) and, with RequireLock, refused.

// LockFile is the name of the lock: "<digest>  <key>" lines, where the key names what was pulled with
// its version: "kubernetes v1.37.2 bin/linux-amd64/kubelet", "runc v1.3.4 runtime/linux-amd64/runc",
// "downloads/<release archive, named with its version>", or "image linux/<arch> <reference>" (the
// image's digest, sha256:...). File digests are SHA-256 in hex. A --checksums file has the same form, or
// keys that are paths in the artifacts directory (bin/linux-amd64/kubelet) for the version pulled.
const LockFile = "artifacts.lock"

// DefaultLock is the lock every pull on this workstation shares unless told otherwise:
// <user cache dir>/clusterctl/artifacts.lock.
func DefaultLock() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the artifacts lock (give one with --lock, or cluster.downloads.lock): %w", err)
	}
	return filepath.Join(base, "clusterctl", LockFile), nil
}

// LockError is a file or image whose digest is not the one a trusted source gives.
type LockError struct {
	Key, URL, Source, Want, Got string
}

func (e *LockError) Error() string {
	return fmt.Sprintf("%s: %s serves %s, but %s says %s: refused (another mirror, or a changed release: if the change is known to be right, remove the line from the lock or give --checksums)",
		e.Key, e.URL, e.Got, e.Source, e.Want)
}

// ErrNotLocked marks a file or image that nothing pins, refused with RequireLock.
var ErrNotLocked = errors.New("not in the lock")

// trust holds the digests files are checked against beyond their origin's, and what this pull adds to the
// lock.
type trust struct {
	user, builtin, lock, dirLock map[string]string
	userFile, lockFile, dirFile  string
	v                            Versions
	require                      bool
	notice                       func(key, url, digest string)
	mu                           sync.Mutex
	added                        map[string]string
}

// trustOptions say where a pull's trusted digests are.
type trustOptions struct {
	Dir       string // the artifacts directory (its own artifacts.lock of earlier versions is read)
	Checksums string // the user's checksums file ("" for none)
	Lock      string // the lock ("" for DefaultLock)
	Versions  Versions
	// Require refuses what nothing pins.
	Require bool
	// Notice is told of each file or image pulled that nothing pinned (it then enters the lock).
	Notice func(key, url, digest string)
}

// loadTrust reads the lock, the directory's own lock and the user's checksums file. A lock another user
// could change is refused (ErrUnsafeDir).
func loadTrust(o trustOptions) (*trust, error) {
	t := &trust{builtin: builtinDigests, added: map[string]string{}, userFile: o.Checksums, lockFile: o.Lock,
		v: o.Versions, require: o.Require, notice: o.Notice, dirFile: filepath.Join(o.Dir, LockFile)}
	if t.lockFile == "" {
		var err error
		if t.lockFile, err = DefaultLock(); err != nil {
			t.lockFile = t.dirFile
		}
	}
	if err := checkLock(t.lockFile); err != nil {
		return nil, err
	}
	var err error
	if t.lock, err = readDigests(t.lockFile, true); err != nil {
		return nil, err
	}
	t.dirLock = map[string]string{}
	if t.dirFile != t.lockFile {
		if t.dirLock, err = readDigests(t.dirFile, true); err != nil {
			return nil, err
		}
	}
	if o.Checksums != "" {
		if t.user, err = readDigests(o.Checksums, false); err != nil {
			return nil, fmt.Errorf("--checksums: %w", err)
		}
	}
	return t, nil
}

// checkLock refuses a lock that another user could change: it says which bytes are the right ones.
func checkLock(file string) error {
	st, err := os.Lstat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !st.Mode().IsRegular():
		return fmt.Errorf("%w: the lock %s is not a regular file", ErrUnsafeDir, file)
	case st.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%w: the lock %s has mode %04o: others may change which bytes are trusted; refusing it (chmod go-w %s)", ErrUnsafeDir, file, st.Mode().Perm(), file)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() && sys.Uid != 0 {
		return fmt.Errorf("%w: the lock %s is owned by user %d: refusing it (copy it, or use another with --lock)", ErrUnsafeDir, file, sys.Uid)
	}
	if err := statedir.CheckPath(filepath.Dir(file)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: the lock's directory: %w", ErrUnsafeDir, err)
	}
	return nil
}

// lockKey is the lock's key of a file at rel in the artifacts directory: with the version of what it is
// where its path does not say it (release archives are named with theirs; images carry their tag).
func (t *trust) lockKey(rel string) string {
	switch {
	case strings.HasPrefix(rel, "bin/"):
		return "kubernetes " + t.v.Kubernetes + " " + rel
	case strings.HasPrefix(rel, "runtime/") && path.Base(rel) == "runc":
		return "runc v" + strings.TrimPrefix(t.v.Runc, "v") + " " + rel
	}
	return rel
}

// want is the trusted digest of the file at rel and where it comes from, and whether the lock pins it;
// "" when none is known.
func (t *trust) want(rel string) (digest, source string, locked bool) {
	key := t.lockKey(rel)
	if d := firstDigest(t.user[key], t.user[rel]); d != "" {
		return d, "the checksums file " + t.userFile, false
	}
	if d := t.builtin[key]; d != "" {
		return d, "clusterctl's built-in digest", false
	}
	if d := t.lock[key]; d != "" {
		return d, "the lock " + t.lockFile, true
	}
	if d := t.dirLock[rel]; d != "" {
		return d, "the artifacts directory's own lock " + t.dirFile + " (of an earlier clusterctl)", false
	}
	return "", "", false
}

func firstDigest(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// check compares the digest an origin gives for the file at rel (got, from u) with the trusted one, and
// records got for the lock when the lock has none yet. plain says got came over plain HTTP: it must then
// match a trusted one.
func (t *trust) check(rel, u, got string, plain bool) error {
	want, source, locked := t.want(rel)
	key := t.lockKey(rel)
	switch {
	case want == "" && t.require:
		return fmt.Errorf("%s: %w %s and no checksums file or built-in digest pins it (--require-lock, cluster.downloads.requireLock): pull it once where you trust the network without --require-lock, check the line it adds, and commit the lock", key, ErrNotLocked, t.lockFile)
	case want == "" && plain:
		return fmt.Errorf("%s: %s is plain HTTP and no digest of it is known (no --checksums entry, built-in digest or lock line): give its SHA-256 with --checksums", key, u)
	case want == "":
		if t.notice != nil {
			t.notice(key, u, got)
		}
	case want != got:
		return &LockError{Key: key, URL: u, Source: source, Want: want, Got: got}
	}
	if !locked {
		t.mu.Lock()
		t.added[key] = got
		t.mu.Unlock()
	}
	return nil
}

// save adds what this pull verified to the lock (atomically, under a file lock against another pull at
// the same time; unchanged when nothing was added).
func (t *trust) save() error {
	if len(t.added) == 0 {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(t.lockFile), 0o755); err != nil {
		return err
	}
	guard, err := os.OpenFile(t.lockFile+".guard", os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer guard.Close()
	if err := syscall.Flock(int(guard.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	all, err := readDigests(t.lockFile, true) // another pull may have added lines meanwhile
	if err != nil {
		return err
	}
	maps.Copy(all, t.added)
	var b bytes.Buffer
	b.WriteString("# clusterctl artifacts lock: the digest of every file and image a verified pull received, by version\n" +
		"# and architecture. A later pull that receives other bytes is refused. Commit it beside the inventory\n" +
		"# (cluster.downloads.lock) to pin every workstation's and CI job's pulls to the same bytes.\n")
	for _, k := range slices.Sorted(maps.Keys(all)) {
		fmt.Fprintf(&b, "%s  %s\n", all[k], k)
	}
	return statedir.WriteFile(t.lockFile, b.Bytes(), 0o644)
}

// readDigests reads "<digest>  <key>" lines (# comments, blank lines); a missing file is empty when
// optional. A digest is 64 hex digits, or sha256: and 64 hex digits.
func readDigests(file string, optional bool) (map[string]string, error) {
	data, err := readRegular(file, maxSumFile)
	if optional && errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		digest, key, ok := strings.Cut(line, " ")
		key = strings.TrimSpace(key)
		hexPart := strings.TrimPrefix(digest, "sha256:")
		if !ok || key == "" || !hexSumRE.MatchString(hexPart) {
			return nil, fmt.Errorf("%s:%d: want \"<sha256>  <path>\" (64 hex digits, or sha256:<hex> for an image), got %q", file, n, line)
		}
		out[key] = digest
	}
	return out, sc.Err()
}

// imageKey is the lock's key of an image for an architecture.
func imageKey(arch, ref string) string { return "image linux/" + arch + " " + ref }

// plainHTTP reports whether u is a plain-HTTP URL.
func plainHTTP(u string) bool { return strings.HasPrefix(u, "http://") }

// isLoopback reports whether host (without port) is this machine: localhost or a loopback address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// CheckSchemes refuses plain-HTTP download bases but on loopback, unless allowHTTP.
func (s Sources) CheckSchemes(allowHTTP bool) error {
	for _, b := range []struct{ name, v string }{{"release", s.Release}, {"etcd", s.Etcd}, {"containerd", s.Containerd},
		{"runc", s.Runc}, {"cni", s.CNI}, {"crictl", s.Crictl}} {
		u, err := url.Parse(b.v)
		if err != nil || u.Scheme != "http" || allowHTTP || isLoopback(u.Hostname()) {
			continue
		}
		return fmt.Errorf("%s download URL %s is plain HTTP: anyone on the way can change what it serves; use https, or --allow-http (every file must then match --checksums, a built-in digest or the lock)", b.name, b.v)
	}
	return nil
}

// noDowngrade refuses a redirect from https to plain http.
func noDowngrade(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if req.URL.Scheme == "http" && via[0].URL.Scheme == "https" {
		return fmt.Errorf("refusing a redirect from %s to plain HTTP (%s)", via[0].URL, req.URL)
	}
	return nil
}

// registryGuard is the transport to registries: plain HTTP only to the registries named insecure (the
// go-containerregistry library falls back to it for loopback and private addresses by itself).
type registryGuard struct {
	next     http.RoundTripper
	insecure []string
}

func (g *registryGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !slices.Contains(g.insecure, req.URL.Host) {
		return nil, fmt.Errorf("plain HTTP to registry %s refused: name it with --insecure-registry %s (no credentials are sent to it)", req.URL.Host, req.URL.Host)
	}
	return g.next.RoundTrip(req)
}

// ErrUnsafeDir marks the refusal of an artifacts directory others may change: the user's setup to fix, as a
// bad flag or inventory is (exit 2).
var ErrUnsafeDir = errors.New("unsafe artifacts directory")

// CheckDir refuses an artifacts directory (or cache) that others may write to or that another user owns,
// with a directory inside (bin/, images/) others may write to, or that another user could replace (a directory above it
// others may write to, a symbolic link they own; statedir.CheckPath): what it holds is run as root on every
// host. A missing directory is made (0755).
func CheckDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%w: %s has mode %04o: others may change what hosts run as root; refusing it (chmod go-w %s)", ErrUnsafeDir, dir, st.Mode().Perm(), dir)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: %s is owned by user %d, not by you (%d): refusing it (chown %d %s, or use another directory)", ErrUnsafeDir, dir, sys.Uid, os.Geteuid(), os.Geteuid(), dir)
	}
	// The directories inside (bin/linux-amd64, images/...): a file there is checked by its digest, but
	// one others may write to can change between the check and the push.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir || !d.IsDir() {
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o022 != 0 {
			return fmt.Errorf("%w: %s has mode %04o: others may change what hosts run as root; refusing it (chmod -R go-w %s)", ErrUnsafeDir, p, st.Mode().Perm(), dir)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := statedir.CheckPath(dir); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsafeDir, err)
	}
	return nil
}

// createExclusive creates file for writing, never following a symbolic link and never opening what is
// there: a file left there (an interrupted run's) is removed first, a symbolic link as a link.
func createExclusive(file string, mode os.FileMode) (*os.File, error) {
	if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
}

// readRegular reads a regular file of at most limit bytes, not through a symbolic link.
func readRegular(file string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > limit {
		return nil, fmt.Errorf("%s: not a regular file of at most %d bytes", file, limit)
	}
	data := make([]byte, st.Size())
	_, err = io.ReadFull(f, data)
	return data, err
}
