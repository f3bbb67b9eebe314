package render

import (
	"io/fs"
	"path"
	"strings"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/kubelet"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/transport"
)

// What profile cis (cluster.security.profile) changes in a host's files beyond the control plane's flags
// (tasks/hardening): the kubelet's files only root reads, the kernel settings its kubelet protects, and
// etcd run as its own user.

// kubeletMode is the mode of the kubelet's configuration, flags and units: kubeadm's 0644, 0600 under
// profile cis (the benchmark's 4.1.1 and 4.1.9).
func (r *renderer) kubeletMode() fs.FileMode {
	if r.c.Security.CIS() {
		return modeSecret
	}
	return modePublic
}

// kernelDefaults are the kernel settings the sysctl file sets: under profile cis, those kubelets
// protecting the kernel's defaults require.
func (r *renderer) kernelDefaults() []kubelet.Setting {
	if r.c.Security.CIS() {
		return kubelet.KernelDefaults
	}
	return nil
}

// etcdUser is the etcd user a host's member runs as under profile cis (nil: root).
func (r *renderer) etcdUser(h *inventory.Host) *scripts.EtcdUser {
	ids, ok := r.o.EtcdIDs[h.Name]
	if !r.c.Security.CIS() || !ok {
		return nil
	}
	return &scripts.EtcdUser{UID: ids[0], GID: ids[1]}
}

// etcdKeys adds to a host's files, when its etcd member runs as the etcd user, that member's copies of its
// server and peer keys (kubeadm.EtcdKeysDir), owned by it, 0600.
func (r *renderer) etcdKeys(h *inventory.Host, files []transport.File) []transport.File {
	u := r.etcdUser(h)
	if u == nil {
		return files
	}
	for _, f := range files {
		if f.Path == path.Join(kubeadm.PKIDir, "etcd", "server.key") || f.Path == path.Join(kubeadm.PKIDir, "etcd", "peer.key") {
			files = append(files, transport.File{Path: path.Join(kubeadm.EtcdKeysDir, path.Base(f.Path)), Data: f.Data, Mode: modeSecret, UID: u.UID, GID: u.GID})
		}
	}
	return files
}

// hostnameOverride tells whether a node's kubelet is given its node name (--hostname-override): always,
// but under profile cis when the host's hostname, lower-cased as the kubelet takes it, is the node name
// (the benchmark's 4.2.7 wants none; kubeadm gives it only then too).
func (r *renderer) hostnameOverride(h *inventory.Host) bool {
	hn, ok := r.o.Hostnames[h.Name]
	return !r.c.Security.CIS() || !ok || strings.ToLower(hn) != h.NodeName
}

// kubeletFor is clusterctl's kubelet configuration with the inventory's kubelet settings merged in.
func (r *renderer) kubeletFor(settings inventory.KubeletConfig) ([]byte, error) {
	kc, err := inventory.MergeKubelet(r.kubeletBase, settings)
	if err != nil {
		return nil, err
	}
	return kubelet.Marshal(kc)
}
