// Package certs reads the certificates a node holds, as the node holds them (not the workstation's copy,
// which may have drifted): every certificate under /etc/kubernetes/pki, the client certificates of the
// kubeconfigs in /etc/kubernetes, and the kubelet's client and serving certificates. Private keys never
// leave the host: the script prints certificates only.
package certs

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
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
