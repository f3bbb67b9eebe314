package inventory

// This file maps kubespray's variables for the pod network, kube-proxy and the kubelet onto the
// inventory's components (ansible_build.go builds the rest).

import (
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// network reads kube_network_plugin: flannel is clusterctl's flannel (with flannel_backend_type vxlan,
// the only backend it sets up); any other pod network of kubespray's is a warning that says what clusterctl
// installs instead and how to bring that one. calico_veth_mtu and flannel_mtu are the Pods' MTU.
func (a *ansible) network(inv *Inventory, fv map[string]avar, used map[string]bool) {
	c := &inv.Cluster.CNI
	if v, ok := a.str(fv, used, "kube_network_plugin"); ok {
		pos := fv["kube_network_plugin"].pos
		switch v {
		case CNIFlannel:
			c.Plugin = CNIFlannel
			inv.pos["cluster.cni.plugin"] = pos
		default:
			a.diags.add(Warning, pos, "%s is not a pod network clusterctl installs: it sets up its bridge network instead (nodes on one L2 segment; kube_network_plugin: flannel for routed subnets). To bring %s, apply its manifests with cni.plugin: manifests in a native inventory", v, v)
		}
	}
	if v, ok := a.str(fv, used, "flannel_backend_type"); ok && v != "vxlan" {
		a.diags.add(Warning, fv["flannel_backend_type"].pos, "flannel_backend_type %s: clusterctl's flannel uses the vxlan backend", v)
	}
	for _, name := range []string{"flannel_mtu", "calico_veth_mtu"} {
		if m, ok := a.integer(fv, used, name); ok && m > 0 {
			c.MTU = m
			inv.pos["cluster.cni.mtu"] = fv[name].pos
		}
	}
}

// proxyMode reads kube_proxy_mode: iptables and nftables are kube-proxy's mode; ipvs (kubespray's
// default when unset) is a warning that says what clusterctl runs instead.
func (a *ansible) proxyMode(inv *Inventory, fv map[string]avar, used map[string]bool) {
	v, ok := a.str(fv, used, "kube_proxy_mode")
	if !ok {
		return
	}
	pos := fv["kube_proxy_mode"].pos
	if slices.Contains(ProxyModes, v) {
		inv.Cluster.KubeProxy.Mode = v
		inv.pos["cluster.kubeProxy.mode"] = pos
		return
	}
	a.diags.add(Warning, pos, "kube_proxy_mode %s: clusterctl runs kube-proxy in iptables mode instead (kube_proxy_mode: nftables for nftables; ipvs is not a mode clusterctl runs)", v)
}

// evictionSignalRE and evictionValueRE are one of the kubelet's hard eviction thresholds: a signal
// (memory.available, nodefs.available, imagefs.inodesFree, ...) and a quantity or percentage.
var (
	evictionSignalRE = regexp.MustCompile(`^[a-z]+\.[a-zA-Z]+$`)
	evictionValueRE  = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(%|[KMGTPE]i?)?$`)
)

// evictionHard reads eviction_hard, kubespray's mapping of the kubelet's hard eviction thresholds (its
// evictionHard): the kubelet's eviction-hard flag, in the order written.
func (a *ansible) evictionHard(inv *Inventory, fv map[string]avar, used map[string]bool) {
	v, ok := fv["eviction_hard"]
	if !ok {
		return
	}
	used[v.name] = true
	if v.value.Kind != yaml.MappingNode {
		a.diags.add(Error, v.pos, "expected a mapping of eviction signals to thresholds (memory.available: 100Mi), got %s", kindName(v.value))
		return
	}
	var parts []string
	for i := 0; i+1 < len(v.value.Content); i += 2 {
		key, val := v.value.Content[i], resolve(v.value.Content[i+1])
		at := Pos{File: v.pos.File, Line: key.Line, Col: key.Column, Path: v.pos.Path + "." + key.Value}
		if !evictionSignalRE.MatchString(key.Value) || !evictionValueRE.MatchString(val.Value) {
			a.diags.add(Error, at, "%s: %q is not an eviction threshold (a signal such as nodefs.available, and a quantity such as 1Gi or a percentage such as 10%%)", key.Value, val.Value)
			continue
		}
		parts = append(parts, key.Value+"<"+val.Value)
	}
	if len(parts) > 0 {
		c := &inv.Cluster.Kubelet
		c.ExtraArgs = append(c.ExtraArgs, Arg{Name: "eviction-hard", Value: strings.Join(parts, ",")})
		inv.pos["cluster.kubelet.extraArgs.eviction-hard"] = v.pos
	}
}

// kubeletExtraArgs reads failCgroupV1 from kubelet_config_extra_args, a cluster setting in clusterctl; the
// other fields are each host's kubelet settings (ansible.kubelet).
func (a *ansible) kubeletExtraArgs(inv *Inventory, fv map[string]avar, used map[string]bool) {
	c := &inv.Cluster
	if v, ok := fv["kubelet_config_extra_args"]; ok {
		used[v.name] = true
		if v.value.Kind != yaml.MappingNode {
			a.diags.add(Error, v.pos, "expected a mapping of KubeletConfiguration fields, got %s", kindName(v.value))
		}
		for i := 0; i+1 < len(v.value.Content); i += 2 {
			key, val := v.value.Content[i], resolve(v.value.Content[i+1])
			at := Pos{File: v.pos.File, Line: key.Line, Col: key.Column, Path: v.pos.Path + "." + key.Value}
			if key.Value != "failCgroupV1" {
				continue
			}
			b, valid := parseBool(val.Value)
			if !valid {
				a.diags.add(Error, at, "%q is not true or false", val.Value)
				continue
			}
			c.Kubelet.FailCgroupV1 = &b
			inv.pos["cluster.kubelet.failCgroupV1"] = at
		}
	}
}
