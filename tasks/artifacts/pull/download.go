package pull

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/transport"
)

// Limits on what a server may send.
const (
	// maxSumFile bounds a checksum file (SHA256SUMS of a release lists a few dozen files).
	maxSumFile = 1 << 20
	// maxDownload bounds one file (the largest, a CNI plugins archive or the kubelet, is under 100 MB).
	maxDownload = 1 << 30
)

// ChecksumError is a file whose content is not what its project published.
type ChecksumError struct {
	File, URL, Want, Got string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("%s: checksum mismatch for %s: expected sha256 %s, received %s; the download was removed", e.File, e.URL, e.Want, e.Got)
}

var hexSumRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// fetchSum reads a published checksum file and returns the SHA-256 it gives for name: a file of one
// "<sum>" or "<sum>  <name>" line, or a list of such lines (SHA256SUMS).
func (p *puller) fetchSum(ctx context.Context, sumURL, name string) (string, error) {
	data, err := p.get(ctx, sumURL, maxSumFile)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	var lone []string
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		sum := strings.ToLower(fields[0])
		if !hexSumRE.MatchString(sum) {
			continue
		}
		switch {
		case len(fields) == 1:
			lone = append(lone, sum)
		case path.Base(strings.TrimPrefix(fields[len(fields)-1], "*")) == name:
			return sum, nil
		}
	}
	if len(lone) == 1 {
		return lone[0], nil
	}
	return "", fmt.Errorf("%s: no SHA-256 for %s in it", sumURL, name)
}

// get reads a small file whole.
func (p *puller) get(ctx context.Context, u string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, requestError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("GET %s: larger than %d bytes", u, limit)
	}
	return data, nil
}

// download fetches u into dest, continuing dest's partial file (dest.part) with a Range request, and
// renames it into place only when its SHA-256 is want. A file already in place with that sum is kept.
func (p *puller) download(ctx context.Context, u, dest, want string, mode os.FileMode) error {
	rel := p.rel(dest)
	if kept, err := p.keep(dest, u, want, mode); kept || err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	part := dest + ".part"
	h := sha256.New()
	var have int64
	if f, err := os.OpenFile(part, os.O_RDONLY|syscall.O_NOFOLLOW, 0); err == nil {
		have, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	// A server that stops sending ends the download after stallTimeout; what came is kept to continue.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watch := newStallWatch(ctx, cancel, stallTimeout)
	defer watch.stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: GET %s: %w", rel, u, requestError(err))
	}
	defer resp.Body.Close()
	f, have, err := openPart(resp, part, have, mode, h)
	if err != nil {
		return fmt.Errorf("%s: GET %s: %w", rel, u, err)
	}
	total := int64(-1)
	if resp.ContentLength >= 0 {
		total = have + resp.ContentLength
	}
	pr := &progress{p: p, file: rel, url: u, done: have, total: total, start: time.Now(), startBytes: have}
	pr.report(true)
	n, err := io.Copy(io.MultiWriter(f, h, pr, watch), io.LimitReader(resp.Body, maxDownload-have+1))
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, errStalled) {
		err = cause
	}
	if err == nil && have+n > maxDownload {
		err = fmt.Errorf("larger than %d bytes", int64(maxDownload))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// Kept: the next run continues it.
		return fmt.Errorf("%s: GET %s: %w (%d bytes kept to continue)", rel, u, err, have+n)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		_ = os.Remove(part)
		return &ChecksumError{File: rel, URL: u, Want: want, Got: got}
	}
	if err := os.Chmod(part, mode); err != nil {
		return err
	}
	if err := os.Rename(part, dest); err != nil {
		return err
	}
	p.emit(Event{Type: EventFileDone, File: rel, URL: u, Bytes: have + n, Total: have + n, DurationMS: time.Since(pr.start).Milliseconds()})
	return nil
}

// keep reports whether dest is in place with the SHA-256 want (its mode set to mode); what is there but not
// a regular file (a planted symbolic link) is removed, to be replaced by the verified download.
func (p *puller) keep(dest, u, want string, mode os.FileMode) (bool, error) {
	if st, err := os.Lstat(dest); err == nil && !st.Mode().IsRegular() {
		if err := os.Remove(dest); err != nil {
			return false, err
		}
	}
	if sum, _, err := artifacts.HashFile(dest); err == nil && sum == want {
		p.emit(Event{Type: EventFileDone, File: p.rel(dest), URL: u, Cached: true})
		return true, os.Chmod(dest, mode)
	}
	return false, nil
}

// openPart opens the partial file to write the response into: appended to when the server continues
// where it stopped (have bytes, hashed into h), or written anew (h reset). It returns the bytes the file
// starts from.
func openPart(resp *http.Response, part string, have int64, mode os.FileMode, h hash.Hash) (*os.File, int64, error) {
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0 && strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", have)):
		f, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, mode)
		return f, have, err
	case resp.StatusCode == http.StatusOK:
		// The server ignored the range (or there was nothing to continue): start again.
		h.Reset()
		f, err := createExclusive(part, mode) // never through what a planted link points to
		return f, 0, err
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		// The partial file is complete or longer than the file: start again next time.
		_ = os.Remove(part)
		return nil, 0, fmt.Errorf("%s (a partial download was removed; run again)", resp.Status)
	}
	return nil, 0, errors.New(resp.Status)
}

// stallTimeout is how long a download may receive nothing before it is given up (and continued next run).
var stallTimeout = time.Minute

var errStalled = errors.New("the server stopped sending")

// stallWatch cancels a download that receives nothing for a while; written bytes reset it.
type stallWatch struct {
	mu    sync.Mutex
	timer *time.Timer
	d     time.Duration
}

func newStallWatch(ctx context.Context, cancel context.CancelCauseFunc, d time.Duration) *stallWatch {
	w := &stallWatch{d: d}
	w.timer = time.AfterFunc(d, func() {
		if ctx.Err() == nil {
			cancel(errStalled)
		}
	})
	return w
}

func (w *stallWatch) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.timer.Reset(w.d)
	w.mu.Unlock()
	return len(b), nil
}

func (w *stallWatch) stop() { w.timer.Stop() }

// progress reports a download's bytes at most every half second.
type progress struct {
	p           *puller
	file, url   string
	done, total int64
	start, last time.Time
	startBytes  int64
}

func (pr *progress) Write(b []byte) (int, error) {
	pr.done += int64(len(b))
	pr.report(false)
	return len(b), nil
}

func (pr *progress) report(force bool) {
	now := time.Now()
	if !force && now.Sub(pr.last) < 500*time.Millisecond {
		return
	}
	pr.last = now
	e := Event{Type: EventProgress, File: pr.file, URL: pr.url, Bytes: pr.done, Total: pr.total}
	if secs := now.Sub(pr.start).Seconds(); secs > 0.2 {
		e.Rate = int64(float64(pr.done-pr.startBytes) / secs)
		if e.Rate > 0 && pr.total > 0 {
			e.ETAMS = (pr.total - pr.done) * 1000 / e.Rate
		}
	}
	pr.p.emit(e)
}

// errBadArchive is an archive entry clusterctl refuses to unpack.
var errBadArchive = errors.New("unexpected archive entry")

// requestError is a request's error without what the message says already (net/http's `Get "URL":` and
// the dialer's `dial tcp ADDR:`): the URL is said once.
func requestError(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	if cause, ok := transport.DialCause(ue.Err); ok {
		return fmt.Errorf("cannot connect: %w", cause)
	}
	return ue.Err
}
