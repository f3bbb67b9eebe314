package playbooks

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A staged network's node waits for its own range alone: the node that has one goes on while another has
// none, and the other's turn comes when its range does; a node that never gets one is named when the
// watch gives up.
func TestWatchRanges(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node := func(name, cidr string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: cidr}}
	}
	kube := fake.NewClientset(node("cp1", "10.244.0.0/24"), node("w1", ""))
	w := watchRanges(ctx, kube, []string{"cp1", "w1"}, 20*time.Second)
	n, err := w.wait(ctx, "cp1")
	if err != nil || n.Spec.PodCIDR != "10.244.0.0/24" {
		t.Fatalf("cp1: %v, %v", n, err)
	}
	select {
	case <-w.ready["w1"]:
		t.Fatal("w1 is ready without a range")
	default:
	}
	if _, err := kube.CoreV1().Nodes().Update(ctx, node("w1", "10.244.1.0/24"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if n, err := w.wait(ctx, "w1"); err != nil || n.Spec.PodCIDR != "10.244.1.0/24" {
		t.Fatalf("w1: %v, %v", n, err)
	}
	<-w.ended
	if w.err != nil {
		t.Errorf("the watch ended with %v once every node had its range", w.err)
	}

	w = watchRanges(ctx, kube, []string{"w1", "w2"}, time.Second)
	if _, err := w.wait(ctx, "w1"); err != nil {
		t.Errorf("w1: %v", err)
	}
	if _, err := w.wait(ctx, "w2"); err == nil || !strings.Contains(err.Error(), "node w2: no pod range") {
		t.Errorf("w2, never registered: %v", err)
	}
}
