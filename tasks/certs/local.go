package certs

import (
	"errors"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/clusterctl/clusterctl/tasks/statedir"
)

// Local reads the certificates of a state directory: every certificate under pki/ (the CAs, and each
// node's as pushed), and the client certificates of admin.conf and the kubeconfigs under kubeconfig/. Host
// is "" and Path the file's, relative to the directory. Soonest first.
func Local(stateDir string, now time.Time) ([]Cert, error) {
	var out []Cert
	add := func(path string) error {
		data, err := statedir.ReadFile(path, 1<<20)
		if err != nil {
			return err
		}
		if c := firstCert(data); c != nil {
			rel, _ := filepath.Rel(stateDir, path)
			out = append(out, entry("", filepath.ToSlash(rel), c, now))
		}
		return nil
	}
	for _, dir := range []string{"pki", "kubeconfig"} {
		err := filepath.WalkDir(filepath.Join(stateDir, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() && (strings.HasSuffix(path, ".crt") || strings.HasSuffix(path, ".conf")) {
				return add(path)
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if err := add(filepath.Join(stateDir, "admin.conf")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].NotAfter.Before(out[j].NotAfter) })
	return out, nil
}
