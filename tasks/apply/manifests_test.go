package apply

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/transport"
)

// manifestHost answers Diff with the changes given by path and records the commands run and files put.
type manifestHost struct {
	changes map[string]transport.Change
	ran     []string
	put     []string
}

func (h *manifestHost) Name() string { return "cp1" }
func (h *manifestHost) Run(_ context.Context, cmd string, _ []byte) (transport.Result, error) {
	h.ran = append(h.ran, cmd)
	return transport.Result{}, nil
}
func (h *manifestHost) Diff(_ context.Context, files []transport.File) ([]transport.Change, error) {
	out := make([]transport.Change, len(files))
	for i, f := range files {
		out[i] = h.changes[f.Path]
	}
	return out, nil
}
func (h *manifestHost) Put(_ context.Context, files []transport.File) ([]bool, error) {
	changed := make([]bool, len(files))
	for i, f := range files {
		h.put = append(h.put, f.Path)
		changed[i] = h.changes[f.Path] != transport.ChangeNone
	}
	return changed, nil
}
func (h *manifestHost) Get(context.Context, string) ([]byte, error) { return nil, nil }

// A changed manifest's Pod is stopped before the manifest is written; a new or unchanged one is written
// as it is, and a dry run stops nothing.
func TestManifestsStopChangedPodsFirst(t *testing.T) {
	api, sch, cm := kubeadm.Manifest(kubeadm.APIServer), kubeadm.Manifest(kubeadm.Scheduler), kubeadm.Manifest(kubeadm.ControllerManager)
	h := &manifestHost{changes: map[string]transport.Change{api: transport.ChangeContent, sch: transport.ChangeCreate}}
	files := []transport.File{{Path: api, Data: []byte("a"), Mode: 0o600}, {Path: sch, Data: []byte("s"), Mode: 0o600}, {Path: cm, Data: []byte("c"), Mode: 0o600}}
	if _, err := Manifests(context.Background(), h, files, true, time.Minute); err != nil || len(h.ran) != 0 {
		t.Fatalf("dry run: ran %q (%v)", h.ran, err)
	}
	if _, err := Manifests(context.Background(), h, files, false, time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(h.ran) != 1 {
		t.Fatalf("ran %d commands, want one stop", len(h.ran))
	}
	stop := h.ran[0]
	if !strings.Contains(stop, "rm -f "+api+"\n") || strings.Contains(stop, sch) || strings.Contains(stop, cm) {
		t.Errorf("the stop should remove the API server's manifest alone:\n%s", stop)
	}
	if !strings.Contains(stop, "pgrep -x \"$p\"") || !strings.Contains(stop, " kube-apiserver;") {
		t.Errorf("the stop should wait for the kube-apiserver process:\n%s", stop)
	}
	if len(h.put) != 3 {
		t.Errorf("put %q, want the three manifests", h.put)
	}
}
