package pull

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/clusterctl/clusterctl/tasks/artifacts"
)

// testTrust is the trust of a pull of version into dir with checksums ("" for none) and the lock lock.
func testTrust(t *testing.T, dir, checksums, lock, version string) *trust {
	t.Helper()
	v, err := VersionsFor(version)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := loadTrust(trustOptions{Dir: dir, Checksums: checksums, Lock: lock, Versions: v})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// kubeletPuller is a puller of v1.37.2's kubelet from ts into dir, trusting what checksums says ("" for
// nothing but the lock, dir/../artifacts.lock).
func kubeletPuller(t *testing.T, ts *httptest.Server, dir, checksums string) *puller {
	t.Helper()
	tr := testTrust(t, dir, checksums, filepath.Join(filepath.Dir(dir), LockFile), "v1.37.2")
	v, _ := VersionsFor("v1.37.2")
	client := ts.Client()
	client.CheckRedirect = noDowngrade
	return &puller{o: Options{Dir: dir, Sources: Sources{Release: ts.URL}}, v: v, client: client, trust: tr, m: &artifacts.Manifest{}}
}

// kubeletFiles is what a release server serves for v1.37.2's amd64 kubelet: the binary and its sum.
func kubeletFiles(data []byte) map[string][]byte {
	const p = "/release/v1.37.2/bin/linux/amd64/kubelet"
	return map[string][]byte{p: data, p + ".sha256": []byte(sumOf(data) + "\n")}
}

// The first verified pull writes the lock; a later pull from a server that serves other bytes with a
// matching checksum file (another mirror, a compromised origin) is refused, naming the file, the URL, the
// locked and the received digest, and the file in place is kept.
func TestLockRefusesOtherBytes(t *testing.T) {
	good, bad := []byte("the kubelet"), []byte("a kubelet with a backdoor")
	srv := &server{files: kubeletFiles(good)}
	ts := httptest.NewTLSServer(srv)
	defer ts.Close()
	dir := t.TempDir()
	ctx := context.Background()
	p := kubeletPuller(t, ts, dir, "")
	if err := p.kubernetesBinary(ctx, "amd64", "kubelet"); err != nil {
		t.Fatal(err)
	}
	if err := p.trust.save(); err != nil {
		t.Fatal(err)
	}
	lock, _ := os.ReadFile(p.trust.lockFile)
	if !strings.Contains(string(lock), sumOf(good)+"  kubernetes v1.37.2 bin/linux-amd64/kubelet\n") {
		t.Fatalf("lock:\n%s", lock)
	}

	srv.mu.Lock()
	srv.files = kubeletFiles(bad)
	srv.mu.Unlock()
	err := kubeletPuller(t, ts, dir, "").kubernetesBinary(ctx, "amd64", "kubelet")
	var le *LockError
	if !errors.As(err, &le) {
		t.Fatalf("error %v, want a LockError", err)
	}
	for _, s := range []string{"kubernetes v1.37.2 bin/linux-amd64/kubelet", ts.URL + "/release/v1.37.2/bin/linux/amd64/kubelet", sumOf(good), sumOf(bad), p.trust.lockFile} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q does not name %s", err, s)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "bin/linux-amd64/kubelet")); string(got) != string(good) {
		t.Errorf("the verified kubelet was replaced by %q", got)
	}
}

// A checksums file the user gives wins over the origin's: a file that differs from it is refused before
// anything is downloaded; one that matches is pulled and locked. A malformed line is an error naming it.
func TestChecksumsFile(t *testing.T) {
	good := []byte("the kubelet")
	ts := httptest.NewTLSServer(&server{files: kubeletFiles(good)})
	defer ts.Close()
	sums := filepath.Join(t.TempDir(), "sums")
	os.WriteFile(sums, []byte("# own builds\n"+sumOf([]byte("my kubelet"))+"  bin/linux-amd64/kubelet\n"), 0o644)
	dir := t.TempDir()
	err := kubeletPuller(t, ts, dir, sums).kubernetesBinary(context.Background(), "amd64", "kubelet")
	if le := (*LockError)(nil); !errors.As(err, &le) || !strings.Contains(err.Error(), "the checksums file "+sums) {
		t.Fatalf("error %v, want a LockError naming the checksums file", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bin/linux-amd64/kubelet.part")); err == nil {
		t.Error("a refused file was downloaded")
	}
	os.WriteFile(sums, []byte(sumOf(good)+"  bin/linux-amd64/kubelet\n"), 0o644)
	if err := kubeletPuller(t, ts, dir, sums).kubernetesBinary(context.Background(), "amd64", "kubelet"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(sums, []byte("d41d8cd98f00b204e9800998ecf8427e  bin/linux-amd64/kubelet\n"), 0o644) // MD5-sized
	v, _ := VersionsFor("v1.37.2")
	if _, err := loadTrust(trustOptions{Dir: dir, Checksums: sums, Lock: filepath.Join(t.TempDir(), LockFile), Versions: v}); err == nil || !strings.Contains(err.Error(), sums+":1:") {
		t.Errorf("a malformed checksums line: %v", err)
	}
}

// Over plain HTTP (here a loopback server, the one kind allowed without --allow-http) a file whose digest
// nothing but its origin gives is refused; with it in the checksums file it is pulled.
func TestPlainHTTPNeedsATrustedDigest(t *testing.T) {
	good := []byte("the kubelet")
	ts := httptest.NewServer(&server{files: kubeletFiles(good)})
	defer ts.Close()
	dir := t.TempDir()
	err := kubeletPuller(t, ts, dir, "").kubernetesBinary(context.Background(), "amd64", "kubelet")
	if err == nil || !strings.Contains(err.Error(), "plain HTTP") || !strings.Contains(err.Error(), "--checksums") {
		t.Fatalf("error %v", err)
	}
	sums := filepath.Join(t.TempDir(), "sums")
	os.WriteFile(sums, []byte(sumOf(good)+"  bin/linux-amd64/kubelet\n"), 0o644)
	if err := kubeletPuller(t, ts, dir, sums).kubernetesBinary(context.Background(), "amd64", "kubelet"); err != nil {
		t.Fatal(err)
	}
}

// http:// bases are refused but on loopback or with --allow-http.
func TestCheckSchemes(t *testing.T) {
	for base, ok := range map[string]bool{"https://dl.k8s.io": true, "http://127.0.0.1:8080": true, "http://[::1]:8080/k8s": true,
		"http://localhost:8080": true, "http://mirror.example": false, "http://10.0.0.5/k8s": false} {
		err := DefaultSources().Override(Sources{Release: base}).CheckSchemes(false)
		if (err == nil) != ok {
			t.Errorf("%s: %v", base, err)
		}
		if err := DefaultSources().Override(Sources{Release: base}).CheckSchemes(true); err != nil {
			t.Errorf("%s with --allow-http: %v", base, err)
		}
	}
}

// An https download that redirects to plain http is refused.
func TestNoDowngradeRedirect(t *testing.T) {
	plain := httptest.NewServer(&server{files: map[string][]byte{"/kubelet": []byte("x")}})
	defer plain.Close()
	ts := httptest.NewTLSServer(http.RedirectHandler(plain.URL+"/kubelet", http.StatusFound))
	defer ts.Close()
	client := ts.Client()
	client.CheckRedirect = noDowngrade
	p := &puller{o: Options{Dir: t.TempDir()}, client: client}
	if _, err := p.get(context.Background(), ts.URL+"/kubelet.sha256", 1<<10); err == nil || !strings.Contains(err.Error(), "plain HTTP") {
		t.Errorf("redirect to http: %v", err)
	}
}

// Plain HTTP to a registry only to one named insecure.
func TestRegistryGuard(t *testing.T) {
	called := 0
	g := &registryGuard{insecure: []string{"127.0.0.1:5000"}, next: roundTripper(func(*http.Request) (*http.Response, error) {
		called++
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	})}
	for u, ok := range map[string]bool{"http://127.0.0.1:5000/v2/": true, "http://10.0.0.5:5000/v2/": false, "https://10.0.0.5:5000/v2/": true, "http://127.0.0.1:5001/v2/": false} {
		req := &http.Request{Method: "GET", URL: mustURL(t, u), Header: http.Header{}}
		_, err := g.RoundTrip(req)
		if (err == nil) != ok {
			t.Errorf("%s: %v", u, err)
		}
	}
	if called != 2 {
		t.Errorf("%d requests went through, want 2", called)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// The directory is refused when others may write to it; a planted symbolic link as a partial download is
// replaced, never written through.
func TestDirTrust(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	if err := CheckDir(dir); err == nil || !strings.Contains(err.Error(), "chmod go-w") {
		t.Errorf("a world-writable directory: %v", err)
	}
	os.Chmod(dir, 0o755)
	if err := CheckDir(dir); err != nil {
		t.Error(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("precious"), 0o644)
	good := []byte("the kubelet")
	ts := httptest.NewTLSServer(&server{files: kubeletFiles(good)})
	defer ts.Close()
	os.MkdirAll(filepath.Join(dir, "bin/linux-amd64"), 0o755)
	os.Symlink(victim, filepath.Join(dir, "bin/linux-amd64/kubelet.part"))
	if err := kubeletPuller(t, ts, dir, "").kubernetesBinary(context.Background(), "amd64", "kubelet"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "precious" {
		t.Errorf("the pull wrote through a planted link: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "bin/linux-amd64/kubelet")); string(got) != string(good) {
		t.Errorf("kubelet %q", got)
	}
	// A directory inside others may write to; a directory under a world-writable parent; a link to it
	// in a world-writable place.
	os.Chmod(filepath.Join(dir, "bin"), 0o777)
	if err := CheckDir(dir); !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), "/bin has mode 0777") {
		t.Errorf("a world-writable bin/: %v", err)
	}
	os.Chmod(filepath.Join(dir, "bin"), 0o755)
	wide := filepath.Join(t.TempDir(), "wide")
	os.Mkdir(wide, 0o777)
	os.Chmod(wide, 0o777)
	if err := CheckDir(filepath.Join(wide, "artifacts")); !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), "wide, above") {
		t.Errorf("under a world-writable parent: %v", err)
	}
	os.Symlink(dir, filepath.Join(wide, "link"))
	if err := CheckDir(filepath.Join(wide, "link")); !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), "wide, above") {
		t.Errorf("a link in a world-writable place: %v", err)
	}
}

// A built-in digest (a public fact) is checked before the origin is trusted.
func TestBuiltinDigests(t *testing.T) {
	tr := testTrust(t, t.TempDir(), "", filepath.Join(t.TempDir(), LockFile), "v1.35.1")
	for rel, key := range map[string]string{
		"bin/linux-amd64/kubelet":                     "kubernetes v1.35.1 bin/linux-amd64/kubelet",
		"runtime/linux-arm64/runc":                    "runc v1.3.4 runtime/linux-arm64/runc",
		"downloads/crictl-v1.35.0-linux-amd64.tar.gz": "downloads/crictl-v1.35.0-linux-amd64.tar.gz",
	} {
		if err := tr.check(rel, "https://dl.k8s.io/x", sumOf([]byte("not the release")), false); err == nil || !strings.Contains(err.Error(), "built-in") {
			t.Errorf("%s other than the release's: %v", rel, err)
		}
		if err := tr.check(rel, "https://dl.k8s.io/x", builtinDigests[key], false); err != nil {
			t.Error(err)
		}
	}
}

// An image is fetched over plain HTTP only from a registry named insecure, and then without the
// credentials the Docker config holds for it; its digest is locked like a file's.
func TestInsecureRegistryGetsNoCredentials(t *testing.T) {
	var mu sync.Mutex
	var auths []string
	challenge := false // ask for credentials, as a registry that holds private images does
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		a, ask := r.Header.Get("Authorization"), challenge
		if a != "" {
			auths = append(auths, a)
		}
		mu.Unlock()
		if ask && a == "" {
			w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	defer ts.Close()
	host := strings.TrimPrefix(ts.URL, "http://")
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	dst, _ := name.NewTag(host+"/pause:3.10.2", name.Insecure)
	if err := remote.Write(dst, img, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"})); err != nil {
		t.Fatal(err)
	}
	cfg := t.TempDir()
	os.WriteFile(filepath.Join(cfg, "config.json"), []byte(`{"auths": {"`+host+`": {"auth": "dXNlcjpzZWNyZXQ="}}}`), 0o600)
	t.Setenv("DOCKER_CONFIG", cfg)
	pull := func(insecure []string, checksums string) error {
		dir := t.TempDir()
		tr := testTrust(t, dir, checksums, filepath.Join(t.TempDir(), LockFile), "v1.37.2")
		p := &puller{o: Options{Dir: dir, Sources: Sources{RegistryMirror: host}, InsecureRegistries: insecure},
			client: &http.Client{Transport: http.DefaultTransport}, trust: tr, m: &artifacts.Manifest{}}
		return p.image(context.Background(), "amd64", image{"pause", "registry.k8s.io/pause:3.10.2"})
	}
	if err := pull(nil, ""); err == nil || !strings.Contains(err.Error(), "--insecure-registry "+host) {
		t.Errorf("plain HTTP to a registry not named insecure: %v", err)
	}
	// Over plain HTTP an image needs a trusted digest, as a file does.
	if err := pull([]string{host}, ""); err == nil || !strings.Contains(err.Error(), "plain HTTP and no digest of it is known") {
		t.Errorf("an unpinned image over plain HTTP: %v", err)
	}
	digest, _ := img.Digest()
	sums := filepath.Join(t.TempDir(), "sums")
	os.WriteFile(sums, []byte("sha256:"+strings.Repeat("0", 64)+"  image linux/amd64 registry.k8s.io/pause:3.10.2\n"), 0o644)
	if err := pull([]string{host}, sums); err == nil || !strings.Contains(err.Error(), digest.String()) {
		t.Errorf("an image over plain HTTP other than its pinned digest: %v", err)
	}
	os.WriteFile(sums, []byte(digest.String()+"  image linux/amd64 registry.k8s.io/pause:3.10.2\n"), 0o644)
	if err := pull([]string{host}, sums); err != nil {
		t.Fatal(err)
	}
	// A registry over plain HTTP that asks for credentials does not get them: the pull fails instead.
	mu.Lock()
	challenge = true
	mu.Unlock()
	if err := pull([]string{host}, sums); err == nil {
		t.Error("a pull from a plain-HTTP registry asking for credentials succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auths) > 0 {
		t.Errorf("credentials sent over plain HTTP: %q", auths)
	}
}
