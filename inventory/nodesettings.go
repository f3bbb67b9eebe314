package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Group is a set of hosts that share Node labels, taints and kubelet settings: the hosts it names, and every
// host with one of the roles it names.
type Group struct {
	// Name of the group, in messages.
	Name string `yaml:"name" json:"name"`
	// Hosts are the names of the group's hosts (hosts[].name).
	Hosts []string `yaml:"hosts,omitempty" json:"hosts,omitempty"`
	// Roles: every host with one of these roles is in the group too.
	Roles []Role `yaml:"roles,omitempty" json:"roles,omitempty"`
	// Labels are set on the Node of every host of the group (see hosts[].labels).
	Labels map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
	// Taints are set on the Node of every host of the group (see hosts[].taints).
	Taints []Taint `yaml:"taints,omitempty" json:"taints,omitempty"`
	// Kubelet is merged into the kubelet configuration of every host of the group (see hosts[].kubelet).
	Kubelet KubeletConfig `yaml:"kubelet,omitempty" json:"kubelet,omitempty"`
}

// Contains reports whether a host is in the group.
func (g *Group) Contains(h *Host) bool {
	return slices.Contains(g.Hosts, h.Name) || slices.ContainsFunc(g.Roles, h.Has)
}

// KubeletConfig is a part of the kubelet's KubeletConfiguration (kubelet.config.k8s.io/v1beta1), written with
// its field names (maxPods, systemReserved, evictionHard, ...), merged over what clusterctl writes as a JSON
// merge patch: a mapping merges into a mapping, anything else replaces, null takes a field out.
type KubeletConfig map[string]any

// NodeSettings are what a host's Node and kubelet get from the inventory: the cluster's (cluster.nodeLabels,
// cluster.nodeTaints, cluster.kubelet.config), then each group's the host is in, in the inventory's order,
// then the host's own; a later value of a label, a taint (by key and effect) or a kubelet field wins.
type NodeSettings struct {
	Labels  map[string]string
	Taints  []Taint
	Kubelet KubeletConfig
}

// NodeSettings resolves a host's labels, taints and kubelet settings.
func (inv *Inventory) NodeSettings(h *Host) NodeSettings {
	s := NodeSettings{Labels: map[string]string{}}
	add := func(labels map[string]string, taints []Taint, kc KubeletConfig) {
		maps.Copy(s.Labels, labels)
		for _, t := range taints {
			if i := slices.IndexFunc(s.Taints, func(x Taint) bool { return x.Key == t.Key && x.Effect == t.Effect }); i >= 0 {
				s.Taints[i] = t
			} else {
				s.Taints = append(s.Taints, t)
			}
		}
		if len(kc) > 0 {
			s.Kubelet = mergePatch(s.Kubelet, kc)
		}
	}
	add(inv.Cluster.NodeLabels, inv.Cluster.NodeTaints, inv.Cluster.Kubelet.Config)
	for i := range inv.Groups {
		if g := &inv.Groups[i]; g.Contains(h) {
			add(g.Labels, g.Taints, g.Kubelet)
		}
	}
	add(h.Labels, h.Taints, h.Kubelet)
	return s
}

// mergePatch applies a JSON merge patch (RFC 7386) to a copy of doc.
func mergePatch(doc, patch map[string]any) map[string]any {
	out := make(map[string]any, len(doc)+len(patch))
	maps.Copy(out, doc)
	for k, pv := range patch {
		switch pm, ok := asMap(pv); {
		case pv == nil:
			delete(out, k)
		case ok:
			dm, _ := asMap(out[k])
			out[k] = mergePatch(dm, pm)
		default:
			out[k] = pv
		}
	}
	return out
}

func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case KubeletConfig:
		return m, true
	}
	return nil, false
}

// MergeKubelet merges a host's kubelet settings (NodeSettings.Kubelet) into a KubeletConfiguration written
// as JSON or YAML-compatible JSON: the result, strictly decoded, is the host's configuration.
func MergeKubelet(base *kubeletv1beta1.KubeletConfiguration, patch KubeletConfig) (*kubeletv1beta1.KubeletConfiguration, error) {
	if len(patch) == 0 {
		return base, nil
	}
	data, err := json.Marshal(base)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	merged, err := json.Marshal(mergePatch(doc, patch))
	if err != nil {
		return nil, err
	}
	out := &kubeletv1beta1.KubeletConfiguration{}
	dec := json.NewDecoder(strings.NewReader(string(merged)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return nil, fmt.Errorf("the kubelet settings: %w", err)
	}
	return out, nil
}

// kubeletOwned are the KubeletConfiguration fields clusterctl sets from other settings, or needs as they
// are: the inventory field that says them, or why they stay.
var kubeletOwned = map[string]string{
	"apiVersion":               "it is kubelet.config.k8s.io/v1beta1",
	"kind":                     "it is KubeletConfiguration",
	"authentication":           "clients are authenticated by the cluster CA and webhook, never anonymous",
	"authorization":            "requests are authorized by the API server (webhook)",
	"clusterDNS":               "it is the tenth address of cluster.networking.serviceSubnet",
	"clusterDomain":            "set cluster.networking.dnsDomain",
	"containerRuntimeEndpoint": "set cluster.containerRuntimeEndpoint",
	"cgroupDriver":             "it is systemd, as clusterctl configures containerd",
	"failCgroupV1":             "set cluster.kubelet.failCgroupV1",
	"staticPodPath":            "the control plane's static Pods are in /etc/kubernetes/manifests",
	"rotateCertificates":       "kubelet client certificates are rotated",
	"serverTLSBootstrap":       "serving certificates are requested by CSR and approved by clusterctl",
	"tlsCertFile":              "serving certificates are requested by CSR and approved by clusterctl",
	"tlsPrivateKeyFile":        "serving certificates are requested by CSR and approved by clusterctl",
	"healthzBindAddress":       "clusterctl checks the kubelet's health on 127.0.0.1:10248",
	"healthzPort":              "clusterctl checks the kubelet's health on 127.0.0.1:10248",
}

// kubeletFields are the JSON names of KubeletConfiguration's fields.
var kubeletFields = func() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	t := reflect.TypeOf(kubeletv1beta1.KubeletConfiguration{})
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = f.Type
		}
	}
	return out
}()

// kubeletConfig checks a kubelet settings patch field by field: a KubeletConfiguration field, not one
// clusterctl sets, with a value of its type.
func (v *validator) kubeletConfig(key string, kc KubeletConfig) {
	for _, name := range slices.Sorted(maps.Keys(kc)) {
		fk := key + "." + name
		if why, ok := kubeletOwned[name]; ok {
			v.errorf(fk, "%s is set by clusterctl: %s", name, why)
			continue
		}
		if _, ok := kubeletFields[name]; !ok {
			msg := fmt.Sprintf("%s is not a field of the kubelet's KubeletConfiguration (kubelet.config.k8s.io/v1beta1)", name)
			for f := range kubeletFields {
				if strings.EqualFold(f, name) {
					msg += fmt.Sprintf("; did you mean %s?", f)
				}
			}
			v.errorf(fk, "%s", msg)
			continue
		}
		if kc[name] == nil {
			continue // takes clusterctl's value out
		}
		data, err := json.Marshal(map[string]any{name: kc[name]})
		if err == nil {
			dec := json.NewDecoder(strings.NewReader(string(data)))
			dec.DisallowUnknownFields()
			err = dec.Decode(&kubeletv1beta1.KubeletConfiguration{})
		}
		if err != nil {
			v.errorf(fk, "%s", kubeletValueError(name, err))
		}
	}
}

// kubeletValueError says what is wrong with a kubelet field's value without encoding/json's Go names.
func kubeletValueError(name string, err error) string {
	if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) {
		what := map[string]string{"array": "list", "object": "mapping", "bool": "boolean"}[te.Value]
		if what == "" {
			what = te.Value
		}
		return fmt.Sprintf("%s takes a %s, not a %s", name, jsonKind(te.Type), what)
	}
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, "unknown field "); ok {
		return fmt.Sprintf("%s: %s is not one of its fields", name, after)
	}
	return fmt.Sprintf("%s: %s", name, strings.TrimPrefix(msg, "json: "))
}

// jsonKind names a Go type as the configuration's author knows it.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole number"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice:
		return "list"
	case reflect.Map, reflect.Struct:
		return "mapping"
	}
	return t.String()
}

// groups checks the inventory's groups: named once each, of hosts that exist and roles that are roles.
func (v *validator) groups() {
	seen := map[string]bool{}
	for i := range v.inv.Groups {
		g := &v.inv.Groups[i]
		k := fmt.Sprintf("groups[%d]", i)
		switch {
		case !nameRE.MatchString(g.Name):
			v.errorf(k+".name", "%q is not a group name: use letters, digits, '.', '_' and '-'", g.Name)
		case seen[g.Name]:
			v.errorf(k+".name", "group %q is named twice", g.Name)
		}
		seen[g.Name] = true
		if len(g.Hosts) == 0 && len(g.Roles) == 0 {
			v.errorf(k, "group %q has neither hosts nor roles: name the hosts it holds, or the roles whose hosts it holds", g.Name)
		}
		for j, name := range g.Hosts {
			if !slices.ContainsFunc(v.inv.Hosts, func(h Host) bool { return h.Name == name }) {
				v.errorf(fmt.Sprintf("%s.hosts[%d]", k, j), "%q is not a host of this inventory", name)
			}
		}
		for j, r := range g.Roles {
			if r != RoleControlPlane && r != RoleWorker && r != RoleEtcd {
				v.errorf(fmt.Sprintf("%s.roles[%d]", k, j), "%q is not a role; use %s, %s or %s", r, RoleControlPlane, RoleWorker, RoleEtcd)
			}
		}
		v.labelsAndTaints(k+".labels", k+".taints", g.Labels, g.Taints)
		v.kubeletConfig(k+".kubelet", g.Kubelet)
	}
	v.labelsAndTaints("cluster.nodeLabels", "cluster.nodeTaints", v.inv.Cluster.NodeLabels, v.inv.Cluster.NodeTaints)
	v.kubeletConfig("cluster.kubelet.config", v.inv.Cluster.Kubelet.Config)
}

// normalize makes a decoded patch plain (nested mappings as map[string]any) and writes the scalar values of
// the kubelet's string maps (systemReserved, kubeReserved, evictionHard, ...) as strings: `cpu: 1` is the
// quantity "1", as the kubelet reads it.
func (kc KubeletConfig) normalize() KubeletConfig {
	if kc == nil {
		return nil
	}
	out := plainValue(map[string]any(kc)).(map[string]any)
	for name, val := range out {
		t, ok := kubeletFields[name]
		m, isMap := val.(map[string]any)
		if !ok || !isMap || t.Kind() != reflect.Map || t.Elem().Kind() != reflect.String {
			continue
		}
		for k, v := range m {
			switch v.(type) {
			case int, int64, uint64, float64, bool:
				m[k] = fmt.Sprint(v)
			}
		}
	}
	return out
}

// plainValue is a decoded value with every mapping a map[string]any and every list a []any.
func plainValue(v any) any {
	if m, ok := asMap(v); ok {
		out := make(map[string]any, len(m))
		for k, x := range m {
			out[k] = plainValue(x)
		}
		return out
	}
	if l, ok := v.([]any); ok {
		out := make([]any, len(l))
		for i, x := range l {
			out[i] = plainValue(x)
		}
		return out
	}
	return v
}
