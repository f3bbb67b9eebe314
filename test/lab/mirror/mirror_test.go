package mirror_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/artifacts/pull"
	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/test/lab"
	"github.com/clusterctl/clusterctl/test/lab/mirror"
)

// events records a pull's events.
type events struct {
	mu  sync.Mutex
	all []pull.Event
}

func (e *events) add(ev pull.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) done() (downloaded, cached int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.all {
		if ev.Type == pull.EventFileDone {
			if ev.Cached {
				cached++
			} else {
				downloaded++
			}
		}
	}
	return
}

// `artifacts pull` against the lab's mirror of the upstream layouts: a cold pull lays out the same binaries
// the lab built, and verifies; an interrupted pull is continued where it stopped; a warm pull downloads
// nothing.
func TestPullFromMirror(t *testing.T) {
	if os.Getenv("CLUSTERCTL_LAB") == "off" {
		t.Skip("CLUSTERCTL_LAB=off")
	}
	labDir, labMan := lab.Artifacts(t)
	m, err := mirror.Start(context.Background(), labDir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dir := filepath.Join(t.TempDir(), "artifacts")
	opts := func(ev *events) pull.Options {
		return pull.Options{KubernetesVersion: labMan.KubernetesVersion, Arches: []string{"amd64"}, Dir: dir,
			Sources: pull.DefaultSources().Override(m.Sources()), Events: ev.add,
			Checksums: m.Checksums, InsecureRegistries: []string{m.Registry}, Lock: m.Lock}
	}

	// Interrupted as soon as the kubelet has a few MiB: its partial file is kept, and continued. The
	// interrupted pull goes through a slow proxy, so that it is under way when it is interrupted.
	ctx, cancel := context.WithCancel(context.Background())
	first := &events{}
	o := opts(first)
	slow := slowProxy(t, m.URL)
	o.Sources.Release = slow
	o.Events = func(ev pull.Event) {
		first.add(ev)
		if ev.Type == pull.EventProgress && strings.HasSuffix(ev.File, "/kubelet") && ev.Bytes > 4<<20 {
			cancel()
		}
	}
	if _, err := pull.Pull(ctx, o); err == nil {
		t.Fatal("the interrupted pull succeeded")
	}
	part := filepath.Join(dir, "bin", "linux-amd64", "kubelet.part")
	st, err := os.Stat(part)
	if err != nil {
		t.Fatalf("no partial kubelet kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, artifacts.ManifestFile)); err == nil {
		t.Error("an interrupted pull wrote the manifest")
	}

	cold := &events{}
	man, err := pull.Pull(context.Background(), opts(cold))
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet's first report is where its partial file ended.
	for _, ev := range cold.all {
		if ev.Type == pull.EventProgress && strings.HasSuffix(ev.File, "/kubelet") {
			if ev.Bytes != st.Size() {
				t.Errorf("the kubelet started at %d bytes, not continued from its %d", ev.Bytes, st.Size())
			}
			break
		}
	}
	if err := man.Verify(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range man.Files {
		if f.Kind == artifacts.KindImage {
			continue // saved again from the registry: same image, another archive
		}
		lf := labMan.Find(f.Kind, f.Name, f.Arch)
		if lf == nil || lf.SHA256 != f.SHA256 {
			t.Errorf("%s: pulled %s, the lab built %+v", f.Path, f.SHA256, lf)
		}
	}
	if _, err := os.Stat(part); err == nil {
		t.Error("the partial file is left")
	}

	warm := &events{}
	if _, err := pull.Pull(context.Background(), opts(warm)); err != nil {
		t.Fatal(err)
	}
	// kubelet, kubectl, the etcd, containerd, CNI and crictl archives, runc, and the images.
	if downloaded, cached := warm.done(); downloaded != 0 || cached != len(pull.KubernetesBinaries)+5+len(images.Names) {
		t.Errorf("warm pull: %d downloaded, %d cached", downloaded, cached)
	}
}

// slowProxy serves what base serves at about 3 MB/s, for as long as the test runs.
func slowProxy(t *testing.T, base string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.Path, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 64<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
			if err != nil {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
