package nodes

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestComponents(t *testing.T) {
	mirror := func(node, comp, image string, ready bool, waiting string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: comp + "-" + node, Labels: map[string]string{"component": comp, "tier": "control-plane"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Image: image}}}}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		cs := corev1.ContainerStatus{RestartCount: 2}
		if waiting != "" {
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: waiting}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		return p
	}
	pods := []corev1.Pod{
		mirror("cp1", "kube-apiserver", "registry.k8s.io/kube-apiserver:v1.37.2@sha256:4132e1", true, ""),
		mirror("cp1", "etcd", "localhost:5000/etcd:3.7.0-0", false, "CrashLoopBackOff"),
		// the same component on a node not asked about, and a Pod of the node that is not the control plane's
		mirror("cp2", "kube-apiserver", "registry.k8s.io/kube-apiserver:v1.37.2", true, ""),
	}
	got := Components(pods, []string{"cp1"}, []string{"kube-apiserver", "etcd", "kube-scheduler"})
	if len(got) != 3 {
		t.Fatalf("%d components, want 3: %+v", len(got), got)
	}
	if c := got[0]; !c.Ready || c.Version != "v1.37.2" || c.Restarts != 2 || c.Problem != "" {
		t.Errorf("apiserver: %+v", c)
	}
	if c := got[1]; c.Ready || c.Version != "3.7.0-0" || c.Problem != "waiting: CrashLoopBackOff" {
		t.Errorf("etcd: %+v", c)
	}
	if c := got[2]; c.Ready || c.Problem == "" {
		t.Errorf("a component without a mirror Pod: %+v", c)
	}
}

func TestHealthOf(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Spec: corev1.NodeSpec{Unschedulable: true}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.\nmore"}}
	h := HealthOf(n)
	if h.Ready || !h.Cordoned || h.Roles == nil || h.Reason != "Unknown NodeStatusUnknown: Kubelet stopped posting node status." {
		t.Errorf("%+v", h)
	}
}
