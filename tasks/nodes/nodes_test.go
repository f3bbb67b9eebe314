package nodes

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8stesting "k8s.io/client-go/testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/bootstrap"
)

func node(name string, ready bool) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}},
		Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: "fd00::5"}}}}
}

// A Node is Ready since a kubelet's start only by a status posted then or later: one posted before is
// the previous kubelet's.
func TestReadySince(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	n := node("w1", true)
	for _, c := range []struct {
		beat  time.Time
		since time.Time
		want  bool
	}{{start.Add(-time.Second), start, false}, {start, start, true}, {start.Add(time.Second), start, true}, {start.Add(-time.Hour), time.Time{}, true}} {
		n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(c.beat)
		if got := ReadySince(n, c.since); got != c.want {
			t.Errorf("heartbeat %v, since %v: %v, want %v", c.beat, c.since, got, c.want)
		}
	}
	if ReadySince(node("w2", false), time.Time{}) {
		t.Error("a NotReady node is Ready since nothing")
	}
}

func TestLabel(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(node("cp1", true), node("w1.example.com", true))
	cp := &inventory.Host{Name: "cp1", NodeName: "cp1", Roles: []inventory.Role{inventory.RoleControlPlane}}
	w := &inventory.Host{Name: "w1", NodeName: "w1.example.com", Roles: []inventory.Role{inventory.RoleWorker},
		Labels: map[string]string{"disk": "ssd"}, Taints: []inventory.Taint{{Key: "gpu", Value: "yes", Effect: "NoSchedule"}}}
	settings := func(h *inventory.Host) inventory.NodeSettings {
		return (&inventory.Inventory{Hosts: []inventory.Host{*h}}).NodeSettings(h)
	}
	for _, h := range []*inventory.Host{cp, w, {Name: "w9", NodeName: "w9", Roles: []inventory.Role{inventory.RoleWorker}}} {
		if _, err := Label(ctx, kube, h, settings(h)); err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
	}
	n, _ := kube.CoreV1().Nodes().Get(ctx, "cp1", metav1.GetOptions{})
	if _, ok := n.Labels[bootstrap.ControlPlaneLabel]; !ok || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != bootstrap.ControlPlaneLabel {
		t.Errorf("cp1: labels %v taints %v", n.Labels, n.Spec.Taints)
	}
	if got := Roles(n); !slices.Equal(got, []string{"control-plane"}) {
		t.Errorf("roles %v", got)
	}
	n, _ = kube.CoreV1().Nodes().Get(ctx, "w1.example.com", metav1.GetOptions{})
	if n.Labels["disk"] != "ssd" || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Value != "yes" || InternalIP(n) != "fd00::5" {
		t.Errorf("w1: %v %v", n.Labels, n.Spec.Taints)
	}
	// Again: nothing to update.
	kube.ClearActions()
	if changes, err := Label(ctx, kube, w, settings(w)); err != nil || len(changes) != 0 {
		t.Fatal(changes, err)
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() == "update" {
			t.Errorf("a second Label updated the Node: %v", a)
		}
	}
	// Someone else's label and taint; then the inventory drops disk, changes the gpu taint's value and
	// adds a label: clusterctl's old label goes, the others stay.
	n.Labels["team"] = "a"
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute})
	if _, err := kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.Labels = map[string]string{"zone": "b"}
	w.Taints[0].Value = "no"
	changes, err := Label(ctx, kube, w, settings(w))
	if want := []string{"label zone=b", "-label disk", "taint gpu=no:NoSchedule"}; err != nil || !slices.Equal(changes, want) {
		t.Errorf("changes %q, %v; want %q", changes, err, want)
	}
	n, _ = kube.CoreV1().Nodes().Get(ctx, "w1.example.com", metav1.GetOptions{})
	if _, ok := n.Labels["disk"]; ok || n.Labels["team"] != "a" || n.Labels["zone"] != "b" || len(n.Spec.Taints) != 2 || n.Spec.Taints[0].Value != "no" ||
		n.Annotations[LabelsAnnotation] != "zone" || n.Annotations[TaintsAnnotation] != "gpu:NoSchedule" {
		t.Errorf("w1 after the inventory changed: labels %v taints %v annotations %v", n.Labels, n.Spec.Taints, n.Annotations)
	}
	// Every label and taint out of the inventory: clusterctl's go, with its annotations.
	w.Labels, w.Taints = nil, nil
	if changes, err := Label(ctx, kube, w, settings(w)); err != nil || !slices.Equal(changes, []string{"-label zone", "-taint gpu:NoSchedule"}) {
		t.Errorf("changes %q, %v", changes, err)
	}
	n, _ = kube.CoreV1().Nodes().Get(ctx, "w1.example.com", metav1.GetOptions{})
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "maintenance" || n.Labels["team"] != "a" || len(n.Annotations) != 0 {
		t.Errorf("w1 after the inventory dropped all: labels %v taints %v annotations %v", n.Labels, n.Spec.Taints, n.Annotations)
	}
}

func TestDrainRound(t *testing.T) {
	ctx := context.Background()
	pod := func(name string, mod func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "w1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if mod != nil {
			mod(p)
		}
		return p
	}
	now := metav1.Now()
	objs := []any{
		node("w1", false),
		pod("app", nil),
		pod("ds", func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "x"}} }),
		pod("static", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }),
		pod("done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pod("going", func(p *corev1.Pod) { p.DeletionTimestamp = &now; p.Finalizers = []string{"x"} }),
	}
	kube := fake.NewClientset()
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Node:
			_, _ = kube.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Pod:
			_, _ = kube.CoreV1().Pods("default").Create(ctx, o, metav1.CreateOptions{})
		}
	}
	left, err := DrainRound(ctx, kube, "w1")
	if err != nil {
		t.Fatal(err)
	}
	// The fake lists every Pod (no field selectors): each is judged as on w1. The Node is not Ready, so
	// the Pod being deleted is not waited for.
	if !slices.Equal(left, []string{"default/app"}) {
		t.Errorf("left %v", left)
	}
	evicted := 0
	for _, a := range kube.Actions() {
		if a.GetSubresource() == "eviction" {
			evicted++
		}
	}
	if evicted != 1 {
		t.Errorf("%d evictions, want 1", evicted)
	}
}

// An uncordon whose update conflicts with another writer (the kubelet's status) is tried again.
func TestUncordonRetriesAConflict(t *testing.T) {
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w2"}, Spec: corev1.NodeSpec{Unschedulable: true}})
	conflicts := 1
	kube.PrependReactor("update", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "w2", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	changed, err := Uncordon(context.Background(), kube, "w2")
	if err != nil || !changed {
		t.Fatalf("uncordon after a conflict: changed %v, %v", changed, err)
	}
	if n, _ := kube.CoreV1().Nodes().Get(context.Background(), "w2", metav1.GetOptions{}); n.Spec.Unschedulable {
		t.Error("w2 still unschedulable")
	}
}
