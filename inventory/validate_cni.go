package inventory

import (
	"slices"
	"strings"
)

// cni checks the pod network.
func (v *validator) cni(c *CNI) {
	if !slices.Contains(CNIPlugins, c.Plugin) {
		v.errorf("cluster.cni.plugin", "%q is not a pod network clusterctl sets up; use one of %s", c.Plugin, strings.Join(CNIPlugins, ", "))
		return
	}
	takesManifests := c.Plugin == CNIManifests
	switch {
	case takesManifests && len(c.Manifests) == 0:
		v.errorf("cluster.cni.manifests", "plugin %s needs at least one manifest file", CNIManifests)
	case !takesManifests && len(c.Manifests) > 0:
		v.errorf("cluster.cni.manifests", "manifests are applied only with plugin: %s", CNIManifests)
	}
	setsUp := c.Plugin != CNIManifests && c.Plugin != CNINone
	switch {
	case c.MTU != 0 && !setsUp:
		v.errorf("cluster.cni.mtu", "the MTU is set only for a pod network clusterctl sets up, not with plugin: %s", c.Plugin)
	case c.MTU != 0 && (c.MTU < 1280 || c.MTU > 65535):
		v.errorf("cluster.cni.mtu", "%d is not an MTU Pods can have: 1280 (IPv6's minimum) to 65535", c.MTU)
	}
	if c.NetworkPolicy && !setsUp {
		v.errorf("cluster.cni.networkPolicy", "the policy controller runs only beside a pod network clusterctl sets up (bridge or flannel), not with plugin: %s; with your own network, use its policy enforcement", c.Plugin)
	}
}

// kubeProxy checks kube-proxy's mode: the setting, not a flag, says it.
func (v *validator) kubeProxy(k *KubeProxy) {
	if !slices.Contains(ProxyModes, k.Mode) {
		v.errorf("cluster.kubeProxy.mode", "%q is not a kube-proxy mode clusterctl runs; use %s", k.Mode, strings.Join(ProxyModes, " or "))
	}
	for _, a := range k.ExtraArgs.Pairs() {
		if a[0] == "proxy-mode" {
			v.errorf("cluster.kubeProxy.extraArgs.proxy-mode", "kube-proxy's mode is cluster.kubeProxy.mode (%s), not a flag", strings.Join(ProxyModes, " or "))
		}
	}
}
