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
//   - the lock (LockFile) that the first verified pull into the directory wrote, as go.sum does: a later pull
//     or another mirror that serves other bytes is refused.
//
// Images are pinned by their digest in the lock the same way. A file fetched over plain HTTP must match one
// of the first two or the lock: its origin's checksum alone is never enough.

// LockFile is the lock of an artifacts directory: "<digest>  <key>" lines, where the key is the file's path
// in the directory (bin/linux-amd64/kubelet, downloads/<archive>, runtime/linux-amd64/runc) with its
// SHA-256 in hex, or "image linux/<arch> <reference>" with the image's digest (sha256:...). A --checksums
// file has the same form (a lock copied from another machine is one).
const LockFile = "artifacts.lock"

// LockError is a file or image whose digest is not the one a trusted source gives.
type LockError struct {
	Key, URL, Source, Want, Got string
}

func (e *LockError) Error() string {
	return fmt.Sprintf("%s: %s serves %s, but %s says %s: refused (another mirror, or a changed release: if the change is known to be right, remove the line from %s or give --checksums)",
		e.Key, e.URL, e.Got, e.Source, e.Want, LockFile)
}

// trust holds the digests files are checked against beyond their origin's, and what this pull adds to the
// lock.
type trust struct {
	user, builtin, lock map[string]string
	userFile            string
	mu                  sync.Mutex
	added               map[string]string
}

// loadTrust reads the directory's lock and the user's checksums file (may be "").
func loadTrust(dir, checksums, version string) (*trust, error) {
	t := &trust{builtin: builtinDigests[version], added: map[string]string{}, userFile: checksums}
	var err error
	if t.lock, err = readDigests(filepath.Join(dir, LockFile), true); err != nil {
		return nil, err
	}
	if checksums != "" {
		if t.user, err = readDigests(checksums, false); err != nil {
			return nil, fmt.Errorf("--checksums: %w", err)
		}
	}
	return t, nil
}

// want is the trusted digest of key and where it comes from; "" when none is known.
func (t *trust) want(key string) (digest, source string) {
	if d := t.user[key]; d != "" {
		return d, "the checksums file " + t.userFile
	}
	if d := t.builtin[key]; d != "" {
		return d, "clusterctl's built-in digest"
	}
	if d := t.lock[key]; d != "" {
		return d, "the lock (" + LockFile + ", written by the first pull)"
	}
	return "", ""
}

// check compares the digest an origin gives for key (got, from u) with the trusted one, and records got for
// the lock when none is trusted yet. plain says got came over plain HTTP: it must then match a trusted one.
func (t *trust) check(key, u, got string, plain bool) error {
	want, source := t.want(key)
	switch {
	case want == "" && plain:
		return fmt.Errorf("%s: %s is plain HTTP and no digest of the file is known (no --checksums entry, built-in digest or lock line): give its SHA-256 with --checksums", key, u)
	case want == "":
		t.mu.Lock()
		t.added[key] = got
		t.mu.Unlock()
		return nil
	case want != got:
		return &LockError{Key: key, URL: u, Source: source, Want: want, Got: got}
	}
	if t.lock[key] == "" {
		t.mu.Lock()
		t.added[key] = got
		t.mu.Unlock()
	}
	return nil
}

// save writes the lock with what this pull added (atomically; unchanged when nothing was).
func (t *trust) save(dir string) error {
	if len(t.added) == 0 {
		return nil
	}
	all := maps.Clone(t.lock)
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, t.added)
	var b bytes.Buffer
	b.WriteString("# clusterctl artifacts lock: the digest of every file and image the first verified pull into this\n" +
		"# directory received. A later pull that receives other bytes is refused. Copy it to pin another machine's\n" +
		"# pull (clusterctl artifacts pull --checksums FILE).\n")
	for _, k := range slices.Sorted(maps.Keys(all)) {
		fmt.Fprintf(&b, "%s  %s\n", all[k], k)
	}
	return statedir.WriteFile(filepath.Join(dir, LockFile), b.Bytes(), 0o644)
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
