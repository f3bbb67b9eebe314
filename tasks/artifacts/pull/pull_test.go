package pull

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func sumOf(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// server serves files by path (http.ServeContent: Range requests honoured) and records the Range headers.
type server struct {
	mu     sync.Mutex
	files  map[string][]byte
	ranges []string
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data, ok := s.files[r.URL.Path]
	if h := r.Header.Get("Range"); h != "" {
		s.ranges = append(s.ranges, r.URL.Path+" "+h)
	}
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, r.URL.Path, fixedTime, strings.NewReader(string(data)))
}

func newPuller(t *testing.T, dir string) *puller {
	t.Helper()
	return &puller{o: Options{Dir: dir}, client: http.DefaultClient}
}

// A partial download is continued with a Range request, and the file is renamed into place verified.
func TestDownloadResumes(t *testing.T) {
	data := []byte(strings.Repeat("kubelet ", 10000))
	srv := &server{files: map[string][]byte{"/kubelet": data}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	dir := t.TempDir()
	dest := filepath.Join(dir, "bin", "kubelet")
	os.MkdirAll(filepath.Dir(dest), 0o755)
	os.WriteFile(dest+".part", data[:3000], 0o644)
	if err := newPuller(t, dir).download(context.Background(), ts.URL+"/kubelet", dest, sumOf(data), 0o755); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(dest)
	if string(got) != string(data) {
		t.Error("the continued file differs from the served one")
	}
	if len(srv.ranges) != 1 || srv.ranges[0] != "/kubelet bytes=3000-" {
		t.Errorf("range requests: %q", srv.ranges)
	}
	if st, _ := os.Stat(dest); st.Mode().Perm() != 0o755 {
		t.Errorf("mode %v", st.Mode())
	}
	if _, err := os.Stat(dest + ".part"); err == nil {
		t.Error("the partial file is left")
	}
}

// A file whose content is not the published sum is an error naming the file, the URL and both digests,
// and nothing of it is kept.
func TestChecksumMismatchKeepsNothing(t *testing.T) {
	data := []byte("not the kubelet")
	ts := httptest.NewServer(&server{files: map[string][]byte{"/kubelet": data}})
	defer ts.Close()
	dir := t.TempDir()
	dest := filepath.Join(dir, "kubelet")
	want := sumOf([]byte("the kubelet"))
	err := newPuller(t, dir).download(context.Background(), ts.URL+"/kubelet", dest, want, 0o755)
	var ce *ChecksumError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v, want a ChecksumError", err)
	}
	for _, s := range []string{"kubelet", ts.URL + "/kubelet", want, sumOf(data)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not name %s", err, s)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("kept: %v", entries)
	}
}

// Checksum files come in three shapes: the sum alone, "<sum>  <file>", and a list of those.
func TestFetchSum(t *testing.T) {
	a, b := sumOf([]byte("a")), sumOf([]byte("b"))
	ts := httptest.NewServer(&server{files: map[string][]byte{
		"/alone":  []byte(a + "\n"),
		"/named":  []byte(a + "  runc.amd64\n"),
		"/list":   []byte(a + "  etcd-v3.6.5-linux-amd64.tar.gz\n" + b + " *etcd-v3.6.5-linux-arm64.tar.gz\n"),
		"/absent": []byte(a + "  other\n"),
		"/junk":   []byte("<html>not found</html>\n"),
	}})
	defer ts.Close()
	p := newPuller(t, t.TempDir())
	for path, want := range map[string]string{"/alone": a, "/named": a, "/list": b} {
		name := map[string]string{"/alone": "x", "/named": "runc.amd64", "/list": "etcd-v3.6.5-linux-arm64.tar.gz"}[path]
		got, err := p.fetchSum(context.Background(), ts.URL+path, name)
		if err != nil || got != want {
			t.Errorf("%s: %q %v, want %s", path, got, err, want)
		}
	}
	for _, path := range []string{"/absent", "/junk", "/missing"} {
		if _, err := p.fetchSum(context.Background(), ts.URL+path, "runc.amd64"); err == nil {
			t.Errorf("%s: no error", path)
		}
	}
}

func TestSourcesAndVersions(t *testing.T) {
	s := DefaultSources().Override(Sources{Release: "https://mirror.example/k8s/", RegistryMirror: "registry.example:5000"})
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := s.kubernetesURL("v1.34.4", "arm64", "kubelet"); got != "https://mirror.example/k8s/release/v1.34.4/bin/linux/arm64/kubelet" {
		t.Errorf("release URL %s", got)
	}
	for ref, want := range map[string]string{
		"registry.k8s.io/coredns/coredns:v1.12.1": "registry.example:5000/coredns/coredns:v1.12.1",
		"docker.io/library/haproxy:3.2":           "registry.example:5000/library/haproxy:3.2",
		"quay.io/calico/node:v3.30.3":             "registry.example:5000/calico/node:v3.30.3",
	} {
		if got := s.mirrored(ref); got != want {
			t.Errorf("%s from the mirror: %s, want %s", ref, got, want)
		}
	}
	for _, bad := range []Sources{{Release: "ftp://x"}, {Etcd: "https://u:p@x"}, {CNI: "https://x/?q=1"}} {
		if err := DefaultSources().Override(bad).Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	v, err := VersionsFor("v1.34.4")
	if err != nil || v.Etcd != "v3.6.5" || v.Crictl != "1.34.0" || v.Containerd[:2] != "2." {
		t.Errorf("v1.34.4: %+v %v", v, err)
	}
	for _, bad := range []string{"1.34.4", "v1.20.0", "v1.34", "v1.34.4; rm -rf /"} {
		if _, err := VersionsFor(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

var fixedTime = time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)

// A server that stops sending ends the download with an error; what came is kept to continue from.
func TestStalledDownloadKeepsItsBytes(t *testing.T) {
	defer func(d time.Duration) { stallTimeout = d }(stallTimeout)
	stallTimeout = 200 * time.Millisecond
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "2000")
		w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer ts.Close()
	defer close(release)
	dir := t.TempDir()
	dest := filepath.Join(dir, "kubelet")
	err := newPuller(t, dir).download(context.Background(), ts.URL+"/kubelet", dest, sumOf(nil), 0o755)
	if err == nil || !strings.Contains(err.Error(), "stopped sending") || !strings.Contains(err.Error(), "1000 bytes kept") {
		t.Fatalf("error %v", err)
	}
	if st, err := os.Stat(dest + ".part"); err != nil || st.Size() != 1000 {
		t.Errorf("partial file: %v %v", st, err)
	}
}
