package nodes

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// NodeHealth is a Node as `clusterctl status` reports it.
type NodeHealth struct {
	Name     string   `json:"name"`
	Ready    bool     `json:"ready"`
	Reason   string   `json:"reason,omitempty"`
	Roles    []string `json:"roles"`
	Kubelet  string   `json:"kubelet"`
	Runtime  string   `json:"runtime"`
	Kernel   string   `json:"kernel"`
	Cordoned bool     `json:"cordoned"`
}

// HealthOf is what a Node says of itself.
func HealthOf(n *corev1.Node) NodeHealth {
	h := NodeHealth{Name: n.Name, Ready: Ready(n), Roles: append([]string{}, Roles(n)...), Kubelet: n.Status.NodeInfo.KubeletVersion,
		Runtime: n.Status.NodeInfo.ContainerRuntimeVersion, Kernel: n.Status.NodeInfo.KernelVersion, Cordoned: n.Spec.Unschedulable}
	if !h.Ready {
		h.Reason = "no Ready condition"
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				h.Reason = strings.TrimSpace(string(c.Status) + " " + c.Reason + ": " + firstLine(c.Message))
			}
		}
	}
	return h
}

// Component is a control-plane component's static Pod on a node.
type Component struct {
	Node      string `json:"node"`
	Component string `json:"component"`
	Ready     bool   `json:"ready"`
	// Version is its image's tag; Restarts its containers' restarts.
	Version  string `json:"version,omitempty"`
	Restarts int32  `json:"restarts"`
	// Problem says why it is not Ready (no mirror Pod: the kubelet does not run it, or has not said so).
	Problem string `json:"problem,omitempty"`
}

// Components are the control-plane components each of nodes should run (components, as kubeadm names
// them), as their mirror Pods in kube-system (tier=control-plane) say: one per node and component, in
// that order, missing ones with a problem.
func Components(pods []corev1.Pod, nodes, components []string) []Component {
	var out []Component
	for _, node := range nodes {
		for _, comp := range components {
			c := Component{Node: node, Component: comp, Problem: "no mirror Pod: the kubelet does not run it"}
			i := slices.IndexFunc(pods, func(p corev1.Pod) bool {
				return p.Spec.NodeName == node && p.Labels["component"] == comp && p.Labels["tier"] == "control-plane"
			})
			if i >= 0 {
				c = componentOf(&pods[i], node, comp)
			}
			out = append(out, c)
		}
	}
	return out
}

func componentOf(p *corev1.Pod, node, comp string) Component {
	c := Component{Node: node, Component: comp, Ready: PodReady(p)}
	if len(p.Spec.Containers) > 0 {
		c.Version = imageTag(p.Spec.Containers[0].Image)
	}
	for _, s := range p.Status.ContainerStatuses {
		c.Restarts += s.RestartCount
		if !c.Ready && c.Problem == "" {
			switch {
			case s.State.Waiting != nil:
				c.Problem = fmt.Sprintf("waiting: %s", s.State.Waiting.Reason)
			case s.State.Terminated != nil:
				c.Problem = fmt.Sprintf("exited %d: %s", s.State.Terminated.ExitCode, s.State.Terminated.Reason)
			}
		}
	}
	if !c.Ready && c.Problem == "" {
		c.Problem = "not Ready (phase " + string(p.Status.Phase) + ")"
	}
	return c
}

// imageTag is an image reference's tag ("" without one): registry.k8s.io/etcd:3.7.0-0@sha256:... is
// 3.7.0-0.
func imageTag(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndexByte(ref, ':'); i >= 0 && !strings.Contains(ref[i:], "/") {
		return ref[i+1:]
	}
	return ""
}
