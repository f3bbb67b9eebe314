package statepull

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"testing"
)

type fakeHost struct {
	name  string
	files map[string]string
}

func (f fakeHost) Name() string { return f.name }

func (f fakeHost) List(_ context.Context, dir string, max int) ([]string, error) {
	if len(f.files) == 0 {
		return nil, fmt.Errorf("%s: %w", dir, fs.ErrNotExist)
	}
	var out []string
	for p := range f.files {
		if strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (f fakeHost) Get(_ context.Context, p string) ([]byte, error) {
	d, ok := f.files[p]
	if !ok {
		return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	return []byte(d), nil
}

func cp(name, ca string) fakeHost {
	return fakeHost{name, map[string]string{
		"/etc/kubernetes/pki/ca.crt":              ca,
		"/etc/kubernetes/pki/ca.key":              ca + " key",
		"/etc/kubernetes/pki/sa.pub":              "sa",
		"/etc/kubernetes/pki/etcd/ca.crt":         "etcd ca",
		"/etc/kubernetes/pki/apiserver.crt":       name + " apiserver",
		"/etc/kubernetes/pki/etcd/peer.key":       name + " peer key",
		"/etc/kubernetes/pki/README":              "not ours",
		"/etc/kubernetes/scheduler.conf":          name + " scheduler",
		"/etc/kubernetes/super-admin.conf":        "super",
		"/etc/kubernetes/admin.conf":              "admin",
		"/etc/kubernetes/manifests/etcd.yaml":     "rendered, not pulled",
		"/etc/kubernetes/controller-manager.conf": name + " cm",
	}}
}

func TestPullAndMerge(t *testing.T) {
	ctx := context.Background()
	a, err := Pull(ctx, cp("cp1", "ca1"), "cp1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Pull(ctx, cp("cp2", "ca1"), "cp2")
	if err != nil {
		t.Fatal(err)
	}
	files, err := Merge([][]File{a, b})
	if err != nil {
		t.Fatal(err)
	}
	var rels []string
	for _, f := range files {
		rels = append(rels, f.Rel)
	}
	for _, want := range []string{"pki/ca.crt", "pki/ca.key", "pki/sa.pub", "pki/etcd/ca.crt", "pki/nodes/cp1/apiserver.crt", "pki/nodes/cp2/etcd/peer.key",
		"kubeconfig/cp1/scheduler.conf", "kubeconfig/cp2/controller-manager.conf", "kubeconfig/super-admin.conf", "admin.conf"} {
		if !slices.Contains(rels, want) {
			t.Errorf("%s not pulled: %v", want, rels)
		}
	}
	if slices.ContainsFunc(rels, func(r string) bool { return strings.Contains(r, "README") || strings.Contains(r, "manifests") }) {
		t.Errorf("pulled what the state directory does not keep: %v", rels)
	}
	if n := len(rels); n != 14 {
		t.Errorf("%d files, want 14 (4 shared once, 2 PKI files and 2 kubeconfigs per node, admin and super-admin once): %v", n, rels)
	}

	other, _ := Pull(ctx, cp("cp3", "ca2"), "cp3")
	if _, err := Merge([][]File{a, other}); err == nil || !strings.Contains(err.Error(), "pki/ca.crt differs between cp1 and cp3") {
		t.Errorf("a CA that differs: %v", err)
	}
	if _, err := Pull(ctx, fakeHost{"cp4", map[string]string{}}, "cp4"); !errors.Is(err, ErrNotJoined) {
		t.Errorf("a host without /etc/kubernetes/pki: %v", err)
	}
	rot := cp("cp1", "ca1")
	rot.files["/etc/kubernetes/pki/ca-signer.crt"] = "old"
	if _, err := Pull(ctx, rot, "cp1"); err == nil || !strings.Contains(err.Error(), "CA rotation is under way") {
		t.Errorf("a CA rotation under way: %v", err)
	}
}
