package playbooks

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/clusterctl/clusterctl/tasks/certs"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/transport"
)

// CheckExpiration reads every certificate from every host (one command each, certificates only) and
// compares each with the state directory's copy where there is one.
func CheckExpiration(ctx context.Context, e *Env, now time.Time) ([]certs.Cert, []transport.HostResult, error) {
	results, err := Connect(ctx, e, e.Hosts, 1)
	if err != nil {
		return nil, results, err
	}
	var reachable []string
	for _, r := range results {
		if r.Err == nil {
			reachable = append(reachable, r.Host)
		}
	}
	var mu sync.Mutex
	byHost := map[string][]certs.Cert{}
	res, err := e.play(ctx, Play{Name: "certificates", Hosts: reachable, Policy: transport.Policy{MaxFail: 1}, Run: func(ctx context.Context, name string) (bool, error) {
		out, err := e.Conn(name).Run(ctx, "sh -s", []byte(scripts.Certs()))
		if err != nil {
			return false, err
		}
		list, err := certs.Parse(name, out.Stdout, now)
		if err != nil {
			return false, err
		}
		node := e.Inv.Host(name).NodeName
		for i := range list {
			list[i].State = compareWithState(e.StateDir, node, &list[i])
		}
		mu.Lock()
		byHost[name] = list
		mu.Unlock()
		return false, nil
	}})
	for _, r := range results {
		if r.Err != nil {
			res = append(res, r)
		}
	}
	var all []certs.Cert
	for _, h := range e.Hosts {
		all = append(all, byHost[h.Name]...)
	}
	return all, res, err
}

// statePath is where the state directory keeps the copy of a host file, or "".
func statePath(stateDir, node, p string) string {
	switch {
	case p == kubeadm.AdminKubeconfig:
		return filepath.Join(stateDir, "admin.conf")
	case p == kubeadm.SuperAdminConfig:
		return filepath.Join(stateDir, "kubeconfig", "super-admin.conf")
	case strings.HasPrefix(p, kubeadm.PKIDir+"/"):
		rel := strings.TrimPrefix(p, kubeadm.PKIDir+"/")
		switch rel {
		case "ca.crt", "front-proxy-ca.crt", "etcd/ca.crt":
			return filepath.Join(stateDir, "pki", filepath.FromSlash(rel))
		}
		return filepath.Join(stateDir, "pki", "nodes", node, filepath.FromSlash(rel))
	case path.Dir(p) == kubeadm.KubernetesDir && strings.HasSuffix(p, ".conf"):
		return filepath.Join(stateDir, "kubeconfig", node, path.Base(p))
	}
	return ""
}

func compareWithState(stateDir, node string, c *certs.Cert) string {
	if c.Cert == nil {
		return ""
	}
	sp := statePath(stateDir, node, c.Path)
	if sp == "" {
		return ""
	}
	data, err := os.ReadFile(sp)
	if errors.Is(err, fs.ErrNotExist) {
		return "" // made on the node (a worker's kubelet.conf)
	}
	if err != nil {
		return "unreadable"
	}
	want := firstCert(data)
	if want == nil {
		return "unreadable"
	}
	if bytes.Equal(want.Raw, c.Cert.Raw) {
		return "match"
	}
	return "differs"
}

// firstCert is the first certificate of a PEM file, or a kubeconfig's first client certificate.
func firstCert(data []byte) *x509.Certificate {
	if cfg, err := clientcmd.Load(data); err == nil && len(cfg.AuthInfos) > 0 {
		for _, u := range cfg.AuthInfos {
			data = u.ClientCertificateData
			break
		}
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return nil
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil
	}
	return c
}
