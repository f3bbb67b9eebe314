package hardening

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestUnder(t *testing.T) {
	for value, want := range map[string]string{
		"k8s:enc:secretbox:v1:key-20261202-101500:\x00\x01": "key-20261202-101500",
		"k8s:enc:secretbox:v1:Bad_Name:xx":                  Foreign,
		"k8s:enc:secretbox:v1:nocolon":                      Foreign,
		"k8s:enc:aescbc:v1:key1:xx":                         Foreign,
		"k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret":           Clear,
		`{"kind":"Widget"}`:                                 Clear,
	} {
		if got := Under([]byte(value)); got != want {
			t.Errorf("Under(%q) = %q, want %q", value, got, want)
		}
	}
}

func TestPrefixes(t *testing.T) {
	for res, want := range map[string][]string{
		"secrets":                     {"/registry/secrets/"},
		"configmaps":                  {"/registry/configmaps/"},
		"services":                    {"/registry/services/specs/"},
		"deployments.apps":            {"/registry/deployments/"},
		"ingresses.networking.k8s.io": {"/registry/ingress/"},
		"widgets.example.com":         {"/registry/example.com/widgets/", "/registry/widgets/"},
	} {
		if got := Prefixes(res); !slices.Equal(got, want) {
			t.Errorf("Prefixes(%q) = %q, want %q", res, got, want)
		}
	}
}

// fakeEtcd is a sorted map of keys to values.
type fakeEtcd map[string]string

func (f fakeEtcd) Scan(_ context.Context, prefix string, fn func(key, value []byte) error) error {
	var keys []string
	for k := range f {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := fn([]byte(k), []byte(f[k])); err != nil {
			return err
		}
	}
	return nil
}

func TestScan(t *testing.T) {
	const w = "key-20261202-101500"
	etcd := fakeEtcd{
		"/registry/secrets/default/a":         EncryptedPrefix + w + ":x",
		"/registry/secrets/default/b":         "k8s\x00clear",
		"/registry/secrets/kube-system/c":     EncryptedPrefix + "key-20250101-000000:x",
		"/registry/secrets/bad//name":         "ignored",
		"/registry/services/specs/default/kb": "k8s\x00",
		"/registry/services/endpoints/x/y":    "k8s\x00",
		"/registry/example.com/widgets/w1":    `{"cluster-scoped":true}`,
	}
	got, err := Scan(context.Background(), etcd, []string{"secrets", "services", "widgets.example.com", "configmaps"}, w)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("got %d resources", len(got))
	}
	s := got[0]
	if s.Objects != 3 || s.ByKey[w] != 1 || s.ByKey[Clear] != 1 || s.ByKey["key-20250101-000000"] != 1 {
		t.Errorf("secrets: %+v", s)
	}
	if want := []Object{{"default", "b"}, {"kube-system", "c"}}; !slices.Equal(s.Stale, want) {
		t.Errorf("stale secrets %v, want %v", s.Stale, want)
	}
	if s.Keys() != "(clear)=1 key-20250101-000000=1 key-20261202-101500=1" {
		t.Errorf("Keys() = %q", s.Keys())
	}
	if svc := got[1]; svc.Objects != 1 || svc.Prefix != "/registry/services/specs/" {
		t.Errorf("services: %+v (endpoints are not services)", svc)
	}
	if wd := got[2]; wd.Objects != 1 || wd.Stale[0] != (Object{Name: "w1"}) {
		t.Errorf("widgets: %+v", wd)
	}
	if cm := got[3]; cm.Objects != 0 || !cm.Current() || cm.Prefix != "" {
		t.Errorf("configmaps: %+v", cm)
	}
}
