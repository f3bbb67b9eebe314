package hardening

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
)

// This file reads how the encrypted resources are stored in etcd: under which key each object is, or in
// clear (written before encryption was on). It reads etcd directly, as only etcd shows it; the API
// server decrypts whatever it reads.

// EncryptedPrefix begins every value the API servers wrote with clusterctl's provider; the key's name
// and a ':' follow.
const EncryptedPrefix = "k8s:enc:" + Provider + ":v1:"

// anyEncrypted begins a value written by any encryption provider (aescbc, aesgcm, kms, secretbox).
const anyEncrypted = "k8s:enc:"

// Clear is how Stored names objects stored unencrypted; Foreign those of another provider.
const (
	Clear   = "(clear)"
	Foreign = "(other provider)"
)

// Scanner reads every key under an etcd prefix with its value (etcdmember.Client.Scan).
type Scanner interface {
	Scan(ctx context.Context, prefix string, fn func(key, value []byte) error) error
}

// Object is one stored object: its namespace (empty for a cluster-scoped one) and name.
type Object struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

func (o Object) String() string {
	if o.Namespace == "" {
		return o.Name
	}
	return o.Namespace + "/" + o.Name
}

// Stored is how one resource's objects are stored.
type Stored struct {
	Resource string `json:"resource"`
	// Prefix is where etcd holds them (empty when it holds none).
	Prefix string `json:"etcdPrefix,omitempty"`
	// Objects counts them; ByKey by what they are under: a key's name, Clear or Foreign.
	Objects int            `json:"objects"`
	ByKey   map[string]int `json:"byKey"`
	// Stale are those not under the write key, for a rewrite.
	Stale []Object `json:"-"`
}

// Current says whether every object is under the write key.
func (s *Stored) Current() bool { return len(s.Stale) == 0 }

// Under says what a stored value is under: the name of clusterctl's key, Clear, or Foreign.
func Under(value []byte) string {
	if rest, ok := bytes.CutPrefix(value, []byte(EncryptedPrefix)); ok {
		if name, _, ok := bytes.Cut(rest, []byte(":")); ok && keyNameRE.Match(name) {
			return string(name)
		}
		return Foreign
	}
	if bytes.HasPrefix(value, []byte(anyEncrypted)) {
		return Foreign
	}
	return Clear
}

// builtinGroups are the API groups the kube-apiserver serves itself: their resources are stored under
// /registry/<resource>/, where an extension API's (a CustomResourceDefinition's) are under
// /registry/<group>/<resource>/.
var builtinGroups = map[string]bool{"": true, "apps": true, "batch": true, "autoscaling": true, "policy": true,
	"networking.k8s.io": true, "rbac.authorization.k8s.io": true, "storage.k8s.io": true, "scheduling.k8s.io": true,
	"coordination.k8s.io": true, "node.k8s.io": true, "discovery.k8s.io": true, "certificates.k8s.io": true,
	"admissionregistration.k8s.io": true, "flowcontrol.apiserver.k8s.io": true, "events.k8s.io": true,
	"resource.k8s.io": true, "internal.apiserver.k8s.io": true, "storagemigration.k8s.io": true}

// renamed are the built-in resources the kube-apiserver stores under another name.
var renamed = map[string]string{"replicationcontrollers": "controllers", "endpoints": "services/endpoints",
	"nodes": "minions", "services": "services/specs", "ingresses": "ingress"}

// Prefixes are where etcd may hold a resource (resource or resource.group), the likeliest first.
func Prefixes(resource string) []string {
	r, group, _ := strings.Cut(resource, ".")
	name := r
	if n, ok := renamed[r]; ok && builtinGroups[group] {
		name = n
	}
	if builtinGroups[group] {
		return []string{"/registry/" + name + "/"}
	}
	return []string{"/registry/" + group + "/" + r + "/", "/registry/" + r + "/"}
}

// Scan reads how each resource's objects are stored, against the write key: for each, the first of its
// Prefixes that holds anything. Values are read a page at a time and only their prefix is kept.
func Scan(ctx context.Context, etcd Scanner, resources []string, write string) ([]Stored, error) {
	var out []Stored
	for _, res := range resources {
		s := Stored{Resource: res, ByKey: map[string]int{}}
		for _, prefix := range Prefixes(res) {
			err := etcd.Scan(ctx, prefix, func(key, value []byte) error {
				obj, ok := objectOf(string(key), prefix)
				if !ok {
					return nil
				}
				under := Under(value)
				s.Objects++
				s.ByKey[under]++
				if under != write {
					s.Stale = append(s.Stale, obj)
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("reading %s from etcd: %w", res, err)
			}
			if s.Objects > 0 {
				s.Prefix = prefix
				break
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// objectOf is the object an etcd key under prefix names: namespace/name or name. Keys with more parts
// (another resource stored under a longer prefix, such as services/endpoints under services/) are not.
func objectOf(key, prefix string) (Object, bool) {
	rest := strings.TrimPrefix(key, prefix)
	parts := strings.Split(rest, "/")
	for _, p := range parts {
		if p == "" {
			return Object{}, false
		}
	}
	switch len(parts) {
	case 1:
		return Object{Name: parts[0]}, true
	case 2:
		return Object{Namespace: parts[0], Name: parts[1]}, true
	}
	return Object{}, false
}

// Keys lists, sorted, what a scan found objects under, with counts: "key-20261202-101500=12 (clear)=3".
func (s *Stored) Keys() string {
	names := make([]string, 0, len(s.ByKey))
	for k := range s.ByKey {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s=%d", k, s.ByKey[k]))
	}
	return strings.Join(parts, " ")
}
