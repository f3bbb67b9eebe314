package inventory

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// labels reads kubespray's node_labels: a mapping of label names to values.
func (a *ansible) labels(v avar, pos positions, key string) map[string]string {
	if v.value.Kind != yaml.MappingNode {
		a.diags.add(Error, v.pos, "expected a mapping of label names to values, got %s", kindName(v.value))
		return nil
	}
	out := map[string]string{}
	for i := 0; i+1 < len(v.value.Content); i += 2 {
		lk, lv := v.value.Content[i], resolve(v.value.Content[i+1])
		pos[key+"."+lk.Value] = Pos{File: v.pos.File, Line: lk.Line, Col: lk.Column, Path: join(v.pos.Path, lk.Value)}
		out[lk.Value] = lv.Value
	}
	return out
}

// kubelet reads kubespray's kubelet settings: kubelet_config_extra_args (every node), then
// kubelet_node_config_extra_args (nodes that are not control-plane nodes), then kubelet_max_pods.
func (a *ansible) kubelet(vars map[string]avar, used map[string]bool, pos positions, key string, controlPlane bool) KubeletConfig {
	var kc KubeletConfig
	names := []string{"kubelet_config_extra_args"}
	if !controlPlane {
		names = append(names, "kubelet_node_config_extra_args")
	}
	for _, name := range names {
		v, ok := vars[name]
		if !ok {
			continue
		}
		used[name] = true
		if v.value.Kind != yaml.MappingNode {
			a.diags.add(Error, v.pos, "expected a mapping of KubeletConfiguration fields, got %s", kindName(v.value))
			continue
		}
		var m KubeletConfig
		if err := v.value.Decode(&m); err != nil {
			a.diags.add(Error, v.pos, "%v", err)
			continue
		}
		for i := 0; i+1 < len(v.value.Content); i += 2 {
			f := v.value.Content[i]
			pos[key+"."+f.Value] = Pos{File: v.pos.File, Line: f.Line, Col: f.Column, Path: join(v.pos.Path, f.Value)}
		}
		delete(m, "failCgroupV1") // cluster.kubelet.failCgroupV1 (kubeletExtraArgs)
		kc = mergePatch(kc, m.normalize())
	}
	if n, ok := a.integer(vars, used, "kubelet_max_pods"); ok {
		pos[key+".maxPods"] = vars["kubelet_max_pods"].pos
		kc = mergePatch(kc, KubeletConfig{"maxPods": n})
	}
	if len(kc) == 0 {
		return nil
	}
	return kc
}

// taints reads kubespray's node_taints: a list of "key=value:Effect" or "key:Effect".
func (a *ansible) taints(v avar, pos positions, key string) []Taint {
	if v.value.Kind != yaml.SequenceNode {
		a.diags.add(Error, v.pos, "expected a list of taints (\"key=value:NoSchedule\"), got %s", kindName(v.value))
		return nil
	}
	var out []Taint
	for i, item := range v.value.Content {
		item = resolve(item)
		tk := fmt.Sprintf("%s[%d]", key, i)
		p := Pos{File: v.pos.File, Line: item.Line, Col: item.Column, Path: fmt.Sprintf("%s[%d]", v.pos.Path, i)}
		pos[tk+".key"], pos[tk+".value"], pos[tk+".effect"] = p, p, p
		kv, effect, ok := strings.Cut(item.Value, ":")
		if item.Kind != yaml.ScalarNode || !ok {
			a.diags.add(Error, p, "%q is not a taint (\"key=value:NoSchedule\")", item.Value)
			continue
		}
		k, val, _ := strings.Cut(kv, "=")
		out = append(out, Taint{Key: k, Value: val, Effect: effect})
	}
	return out
}
