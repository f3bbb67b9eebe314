// Package certs reads the certificates a node holds, as the node holds them (not the workstation's copy,
// which may have drifted): every certificate under /etc/kubernetes/pki, the client certificates of the
// kubeconfigs in /etc/kubernetes, and the kubelet's client and serving certificates. Private keys never
// leave the host: the script prints certificates only.
package certs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/clusterctl/clusterctl/tasks"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/scripts"
)

// Cert is one certificate found on a host.
type Cert struct {
	Host     string        `json:"host"`
	Path     string        `json:"path"`
	Subject  string        `json:"subject"`
	Issuer   string        `json:"issuer"`
	NotAfter time.Time     `json:"notAfter"`
	Residual time.Duration `json:"residual"`
	// State says how it compares with the state directory: match, differs, or "" when the state directory
	// has no copy (kubelet certificates, made on the node).
	State string `json:"state,omitempty"`
	// Cert is the parsed certificate.
	Cert *x509.Certificate `json:"-"`
	// Reference is a certificate file the kubeconfig points to (client-certificate:), when not embedded.
	Reference string `json:"reference,omitempty"`
}

// Parse reads the output of scripts.Certs from one host.
func Parse(host string, out []byte, now time.Time) ([]Cert, error) {
	var certs []Cert
	var cur string
	var block bytes.Buffer
	flush := func() error {
		if cur == "" || block.Len() == 0 {
			block.Reset()
			return nil
		}
		defer block.Reset()
		data := block.Bytes()
		if strings.HasSuffix(cur, ".conf") {
			return parseKubeconfigLines(host, cur, data, now, &certs)
		}
		b, _ := pem.Decode(data)
		if b == nil {
			return fmt.Errorf("%s: %s: no PEM certificate", host, cur)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", host, cur, err)
		}
		certs = append(certs, entry(host, cur, c, now))
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "== "); ok {
			if err := flush(); err != nil {
				return nil, err
			}
			cur = p
			continue
		}
		block.WriteString(line + "\n")
	}
	if err := flush(); err != nil {
		return nil, err
	}
	sort.SliceStable(certs, func(i, j int) bool { return certs[i].Path < certs[j].Path })
	return certs, nil
}

func parseKubeconfigLines(host, path string, data []byte, now time.Time, certs *[]Cert) error {
	// The lines are one user's client-certificate-data (or a file reference), as a kubeconfig fragment.
	cfg, err := clientcmd.Load([]byte("apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n" + string(data)))
	if err != nil {
		return fmt.Errorf("%s: %s: %w", host, path, err)
	}
	for _, u := range cfg.AuthInfos {
		if u.ClientCertificate != "" {
			*certs = append(*certs, Cert{Host: host, Path: path, Reference: u.ClientCertificate})
			continue
		}
		b, _ := pem.Decode(u.ClientCertificateData)
		if b == nil {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", host, path, err)
		}
		*certs = append(*certs, entry(host, path, c, now))
	}
	return nil
}

func entry(host, path string, c *x509.Certificate, now time.Time) Cert {
	return Cert{Host: host, Path: path, Subject: c.Subject.CommonName, Issuer: c.Issuer.CommonName, NotAfter: c.NotAfter,
		Residual: c.NotAfter.Sub(now), Cert: c}
}

// Residual formats a remaining validity as kubeadm does: 364d, 9y, or "expired".
func Residual(d time.Duration) string {
	switch days := int(d.Hours() / 24); {
	case d <= 0:
		return "expired"
	case days >= 730:
		return fmt.Sprintf("%dy", days/365)
	case days >= 1:
		return fmt.Sprintf("%dd", days)
	default:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
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
		if pki.IsCAFile(rel) {
			return filepath.Join(stateDir, "pki", filepath.FromSlash(rel))
		}
		return filepath.Join(stateDir, "pki", "nodes", node, filepath.FromSlash(rel))
	case path.Dir(p) == kubeadm.KubernetesDir && strings.HasSuffix(p, ".conf"):
		return filepath.Join(stateDir, "kubeconfig", node, path.Base(p))
	}
	return ""
}

// CompareWithState says how a certificate found on a node compares with the state directory's copy: match,
// differs, unreadable, or "" when the state directory has none (a worker's kubelet.conf, made on the node).
func CompareWithState(stateDir, node string, c *Cert) string {
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

// Read reads every certificate a host holds (scripts.Certs: certificates only, never keys).
func Read(ctx context.Context, h tasks.Runner, now time.Time) ([]Cert, error) {
	out, err := h.Run(ctx, "sh -s", []byte(scripts.Certs()))
	if err != nil {
		return nil, err
	}
	return Parse(h.Name(), out.Stdout, now)
}

// NotSignedBy lists the leaf certificates (host:path) none of cas signed.
func NotSignedBy(list []Cert, cas []*x509.Certificate) []string {
	var out []string
	for _, c := range list {
		if c.Cert == nil || c.Cert.IsCA {
			continue
		}
		ok := false
		for _, ca := range cas {
			ok = ok || c.Cert.CheckSignatureFrom(ca) == nil
		}
		if !ok {
			out = append(out, c.Host+":"+c.Path)
		}
	}
	return out
}
