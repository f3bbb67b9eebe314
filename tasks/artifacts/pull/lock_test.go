package pull

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/tasks/artifacts"
)

// kubeletAt is a puller of version's amd64 kubelet from ts into dir, with the lock lock; unpinned records
// what it says nothing pinned.
func kubeletAt(t *testing.T, ts *httptest.Server, version, dir, lock string, require bool, unpinned *[]string) *puller {
	t.Helper()
	v, err := VersionsFor(version)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := loadTrust(trustOptions{Dir: dir, Lock: lock, Versions: v, Require: require,
		Notice: func(key, u, digest string) { *unpinned = append(*unpinned, key+" "+digest) }})
	if err != nil {
		t.Fatal(err)
	}
	client := ts.Client()
	client.CheckRedirect = noDowngrade
	return &puller{o: Options{Dir: dir, Sources: Sources{Release: ts.URL}}, v: v, client: client, trust: tr, m: &artifacts.Manifest{}}
}

func releaseFiles(version string, data []byte) map[string][]byte {
	p := "/release/" + version + "/bin/linux/amd64/kubelet"
	return map[string][]byte{p: data, p + ".sha256": []byte(sumOf(data) + "\n")}
}

// One lock across versions and directories: a pull of another version, or of the same version into a new
// directory (a new workstation's cache, an upgrade's), is checked against what earlier pulls locked; what
// nothing pinned is said once per file; --require-lock refuses it.
func TestLockAcrossVersions(t *testing.T) {
	ctx := context.Background()
	good37, good36, bad := []byte("kubelet 1.37"), []byte("kubelet 1.36"), []byte("a kubelet with a backdoor")
	srv := &server{files: releaseFiles("v1.37.2", good37)}
	for k, v := range releaseFiles("v1.36.3", good36) {
		srv.files[k] = v
	}
	ts := httptest.NewTLSServer(srv)
	defer ts.Close()
	lock := filepath.Join(t.TempDir(), "team", "clusterctl.lock")
	var unpinned []string
	for _, version := range []string{"v1.37.2", "v1.36.3"} {
		p := kubeletAt(t, ts, version, filepath.Join(t.TempDir(), version), lock, false, &unpinned)
		if err := p.kubernetesBinary(ctx, "amd64", "kubelet"); err != nil {
			t.Fatal(err)
		}
		if err := p.trust.save(); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := os.ReadFile(lock)
	for _, want := range []string{sumOf(good37) + "  kubernetes v1.37.2 bin/linux-amd64/kubelet\n", sumOf(good36) + "  kubernetes v1.36.3 bin/linux-amd64/kubelet\n"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("the lock lacks %q:\n%s", want, data)
		}
	}
	if len(unpinned) != 2 || !strings.HasPrefix(unpinned[0], "kubernetes v1.37.2 bin/linux-amd64/kubelet "+sumOf(good37)) {
		t.Errorf("first pulls said: %q", unpinned)
	}
	// A re-pull says nothing: the lock pins it.
	unpinned = nil
	if err := kubeletAt(t, ts, "v1.37.2", filepath.Join(t.TempDir(), "again"), lock, true, &unpinned).kubernetesBinary(ctx, "amd64", "kubelet"); err != nil || len(unpinned) != 0 {
		t.Errorf("a locked re-pull with --require-lock: %v, said %q", err, unpinned)
	}
	// Another server's bytes for a locked version, into a new directory: refused by the lock.
	srv.mu.Lock()
	srv.files = releaseFiles("v1.37.2", bad)
	for k, v := range releaseFiles("v1.37.3", bad) {
		srv.files[k] = v
	}
	srv.mu.Unlock()
	err := kubeletAt(t, ts, "v1.37.2", filepath.Join(t.TempDir(), "new"), lock, false, &unpinned).kubernetesBinary(ctx, "amd64", "kubelet")
	if le := (*LockError)(nil); !errors.As(err, &le) || !strings.Contains(err.Error(), lock) || !strings.Contains(err.Error(), sumOf(good37)) {
		t.Errorf("other bytes into a new directory: %v", err)
	}
	// A version nothing pins, with --require-lock: refused, nothing downloaded.
	dir := filepath.Join(t.TempDir(), "v1.37.3")
	err = kubeletAt(t, ts, "v1.37.3", dir, lock, true, &unpinned).kubernetesBinary(ctx, "amd64", "kubelet")
	if !errors.Is(err, ErrNotLocked) || !strings.Contains(err.Error(), "kubernetes v1.37.3 bin/linux-amd64/kubelet") {
		t.Errorf("--require-lock of an unpinned version: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bin/linux-amd64/kubelet")); err == nil {
		t.Error("a refused file was downloaded")
	}
}

// An artifacts directory's own lock of an earlier clusterctl still pins what it names.
func TestDirectoryLockStillPins(t *testing.T) {
	good, bad := []byte("the kubelet"), []byte("a kubelet with a backdoor")
	ts := httptest.NewTLSServer(&server{files: releaseFiles("v1.37.2", bad)})
	defer ts.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, LockFile), []byte(sumOf(good)+"  bin/linux-amd64/kubelet\n"), 0o644)
	var unpinned []string
	err := kubeletAt(t, ts, "v1.37.2", dir, filepath.Join(t.TempDir(), LockFile), false, &unpinned).kubernetesBinary(context.Background(), "amd64", "kubelet")
	if le := (*LockError)(nil); !errors.As(err, &le) || !strings.Contains(err.Error(), "own lock") {
		t.Errorf("other bytes than the directory's lock: %v", err)
	}
}

// A lock others may write to is refused: it says which bytes are the right ones.
func TestLockOthersMayWrite(t *testing.T) {
	lock := filepath.Join(t.TempDir(), LockFile)
	os.WriteFile(lock, nil, 0o666)
	os.Chmod(lock, 0o666)
	v, _ := VersionsFor("v1.37.2")
	if _, err := loadTrust(trustOptions{Dir: t.TempDir(), Lock: lock, Versions: v}); !errors.Is(err, ErrUnsafeDir) || !strings.Contains(err.Error(), "chmod go-w") {
		t.Errorf("a world-writable lock: %v", err)
	}
}
