package apply

import (
	"context"
	"io/fs"
	"testing"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
)

// keptHost is a host whose files are files (path → content); any other is missing.
type keptHost struct {
	Host
	files map[string]string
}

func (h keptHost) Get(_ context.Context, p string) ([]byte, error) {
	data, ok := h.files[p]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return []byte(data), nil
}

func TestKeptManifests(t *testing.T) {
	dir := RollbackDir("v1.37.2", "control-plane")
	if dir != "/var/lib/clusterctl/rollback/v1.37.2/control-plane" {
		t.Errorf("RollbackDir = %s", dir)
	}
	h := keptHost{files: map[string]string{
		dir + kubeadm.Manifest(kubeadm.APIServer): "old apiserver",
		dir + kubeadm.Manifest(kubeadm.Etcd):      "old etcd",
		kubeadm.Manifest(kubeadm.Scheduler):       "the scheduler's current manifest, not kept",
	}}
	got, err := KeptManifests(context.Background(), h, dir, kubeadm.ControlPlaneComponents)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Path != kubeadm.Manifest(kubeadm.Etcd) || string(got[0].Data) != "old etcd" ||
		got[1].Path != kubeadm.Manifest(kubeadm.APIServer) || got[1].Mode != 0o600 {
		t.Errorf("kept manifests: %+v", got)
	}
}
