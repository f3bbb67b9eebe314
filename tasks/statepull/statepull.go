// Package statepull rebuilds a state directory from a cluster's hosts: what the control-plane (and etcd)
// hosts hold of what clusterctl keeps on the workstation — the CAs and their keys, the service-account key
// pair, each node's certificates and kubeconfigs as pushed, the encryption keys — put where the state
// directory keeps them, and checked to be the same on every host that holds them. The admin kubeconfig is
// the control-plane nodes' (render makes a new one, signed by the pulled CA, where they hold none that is
// valid): a workstation with a credential of its own would rewrite theirs at every up, in turn with every
// other workstation.
package statepull

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/pki"
)

// Host is what pulling needs of a host.
type Host interface {
	Name() string
	List(ctx context.Context, dir string, max int) ([]string, error)
	Get(ctx context.Context, path string) ([]byte, error)
}

// File is one file of the state directory, pulled from a host.
type File struct {
	// Rel is its path in the state directory (slashes).
	Rel  string
	Data []byte
	// From is the host it was read from; Shared says every host that holds it must hold the same (a CA,
	// the service-account keys).
	From   string
	Shared bool
}

// maxFiles bounds a host's /etc/kubernetes/pki.
const maxFiles = 200

// kubeconfigs are the kubeconfigs a control-plane node holds that the state directory keeps per node.
var kubeconfigs = []string{"controller-manager.conf", "scheduler.conf", "kubelet.conf"}

// Place is where the state directory keeps a host's file, "" when it keeps none; shared: the same on every
// host (the CAs and their keys, the service-account key pair).
func Place(node, hostPath string) (rel string, shared bool) {
	if r, ok := strings.CutPrefix(hostPath, kubeadm.PKIDir+"/"); ok {
		if !strings.HasSuffix(r, ".crt") && !strings.HasSuffix(r, ".key") && !strings.HasSuffix(r, ".pub") {
			return "", false
		}
		if isShared(r) {
			return "pki/" + r, true
		}
		return "pki/nodes/" + node + "/" + r, false
	}
	switch {
	case hostPath == kubeadm.AdminKubeconfig:
		return "admin.conf", true
	case hostPath == kubeadm.SuperAdminConfig:
		return "kubeconfig/super-admin.conf", true
	case path.Dir(hostPath) == kubeadm.KubernetesDir && slices.Contains(kubeconfigs, path.Base(hostPath)):
		return "kubeconfig/" + node + "/" + path.Base(hostPath), false
	}
	return "", false
}

// isShared: a CA's certificate or key, or the service-account key pair.
func isShared(rel string) bool {
	if rel == "sa.key" || rel == "sa.pub" {
		return true
	}
	return slices.ContainsFunc(pki.CAs(), func(s pki.Spec) bool { return rel == s.Path+".crt" || rel == s.Path+".key" })
}

// ErrNotJoined is a host without /etc/kubernetes/pki: not part of the cluster yet.
var ErrNotJoined = errors.New("no " + kubeadm.PKIDir + ": not part of the cluster yet")

// Pull reads a host's files the state directory keeps (node: its Node's name). A CA rotation under way
// (a signer's files beside a CA) is refused: its state is the journal of the workstation that runs it.
func Pull(ctx context.Context, h Host, node string) ([]File, error) {
	list, err := h.List(ctx, kubeadm.PKIDir, maxFiles)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", h.Name(), ErrNotJoined)
	}
	if err != nil {
		return nil, err
	}
	for _, k := range kubeconfigs {
		list = append(list, path.Join(kubeadm.KubernetesDir, k))
	}
	list = append(list, kubeadm.AdminKubeconfig, kubeadm.SuperAdminConfig)
	var out []File
	for _, p := range list {
		if strings.Contains(path.Base(p), "-signer.") {
			return nil, fmt.Errorf("%s: %s: a CA rotation is under way: finish it (clusterctl certs rotate --ca, from the workstation that started it), then pull the state", h.Name(), p)
		}
		rel, shared := Place(node, p)
		if rel == "" {
			continue
		}
		data, err := h.Get(ctx, p)
		if err != nil {
			if strings.HasSuffix(p, ".conf") && errors.Is(err, fs.ErrNotExist) {
				continue // a host without that kubeconfig (an etcd host, super-admin.conf on a joined node)
			}
			return nil, err
		}
		out = append(out, File{Rel: rel, Data: data, From: h.Name(), Shared: shared})
	}
	return out, nil
}

// Merge checks that every shared file is the same on every host that holds it (an error naming the file
// and the two hosts) and returns each file once, in the order of the hosts.
func Merge(pulled [][]File) ([]File, error) {
	seen := map[string]File{}
	var out []File
	for _, files := range pulled {
		for _, f := range files {
			if prev, ok := seen[f.Rel]; ok {
				if f.Shared && !bytes.Equal(prev.Data, f.Data) {
					return nil, fmt.Errorf("%s differs between %s and %s: the cluster's hosts do not agree on it (a CA rotation or a restore left half done?); pull from the hosts that hold the right one (--limit)", f.Rel, prev.From, f.From)
				}
				continue
			}
			seen[f.Rel] = f
			out = append(out, f)
		}
	}
	return out, nil
}
