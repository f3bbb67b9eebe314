package workloads

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestTokenKeyID(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kid, err := KeyID(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	if len(kid) != 43 { // base64url of 32 bytes, unpadded
		t.Errorf("key ID %q", kid)
	}
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"` + kid + `"}`))
	for _, token := range []string{header + ".e30.c2ln", header + ".", header + "\n"} {
		if got := TokenKeyID(token); got != kid {
			t.Errorf("TokenKeyID(%q) = %q, want %q", token, got, kid)
		}
	}
	for _, bad := range []string{"", "not-base64!.x.y", base64.RawURLEncoding.EncodeToString([]byte("[]")) + ".x"} {
		if got := TokenKeyID(bad); got != "" {
			t.Errorf("TokenKeyID(%q) = %q", bad, got)
		}
	}
}

func TestMountsToken(t *testing.T) {
	withToken := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}}}}
	without := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}}
	if !MountsToken(withToken) || MountsToken(without) {
		t.Error("mountsToken")
	}
}

// Pods that started before the CA was trusted and mount a token are rolled through their Deployment; a Pod
// without a controller is reported; static Pods, later Pods and Pods without a token are left alone.
func TestStartedBeforeAndRestart(t *testing.T) {
	ctx := context.Background()
	trusted := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	token := []corev1.Volume{{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}}
	pod := func(name string, started time.Time, owner *metav1.OwnerReference, vols []corev1.Volume) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app"}, Spec: corev1.PodSpec{Volumes: vols},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: started}}}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return p
	}
	yes := true
	rsRef := &metav1.OwnerReference{Kind: "ReplicaSet", Name: "web-1", Controller: &yes}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "app",
		OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "web", Controller: &yes}}}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "app"}}
	kube := fake.NewClientset(rs, dep,
		pod("web-a", trusted.Add(-time.Hour), rsRef, token), pod("web-b", trusted.Add(-time.Hour), rsRef, token),
		pod("lonely", trusted.Add(-time.Hour), nil, token),
		pod("late", trusted.Add(time.Hour), rsRef, token),
		pod("no-token", trusted.Add(-time.Hour), nil, nil))
	todo, unowned, err := StartedBefore(ctx, kube, trusted)
	if err != nil {
		t.Fatal(err)
	}
	if len(todo) != 1 || todo[0] != (Workload{"app", "Deployment", "web"}) || len(unowned) != 1 || unowned[0] != "app/lonely" {
		t.Fatalf("todo %v, unowned %v", todo, unowned)
	}
	if err := Restart(ctx, kube, todo[0], trusted); err != nil {
		t.Fatal(err)
	}
	d, _ := kube.AppsV1().Deployments("app").Get(ctx, "web", metav1.GetOptions{})
	if d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] != "2026-11-23T12:00:00Z" {
		t.Errorf("template annotations %v", d.Spec.Template.Annotations)
	}
}

func TestStaleRootCA(t *testing.T) {
	cm := func(ns, data string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: ns}, Data: map[string]string{"ca.crt": data}}
	}
	kube := fake.NewClientset(cm("a", "new"), cm("b", "old"))
	stale, err := StaleRootCA(context.Background(), kube, "new")
	if err != nil || len(stale) != 1 || stale[0] != "b" {
		t.Errorf("%v %v", stale, err)
	}
}

func TestOldTokens(t *testing.T) {
	header := func(kid string) string {
		return base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"` + kid + `"}`))
	}
	listing := "/var/lib/kubelet/pods/u1/volumes/kubernetes.io~projected/kube-api-access-a/token " + header("new") + "\n" +
		"/var/lib/kubelet/pods/u2/volumes/kubernetes.io~projected/kube-api-access-b/token " + header("old") + "\n" +
		"/var/lib/kubelet/pods/u3/volumes/kubernetes.io~projected/kube-api-access-c/token " + header("old") + "\n"
	running := map[string]string{"u1": "app/a", "u2": "app/b"} // u3 is gone
	if got := OldTokens([]byte(listing), "/var/lib/kubelet/pods", running, "new"); len(got) != 1 || got[0] != "app/b" {
		t.Errorf("old tokens %v", got)
	}
	if got := OldTokens(nil, "/var/lib/kubelet/pods", running, "new"); len(got) != 0 {
		t.Errorf("no listing: %v", got)
	}
}

// A rollout that is not done says where it stands and what holds it: the first Pod not Ready, its node and
// the kubelet's reason; one that is done says nothing.
func TestRolledOutSaysWhy(t *testing.T) {
	two := int32(2)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns", Generation: 3},
		Spec:       appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}}},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 2},
	}
	pod := func(name string, ready corev1.ConditionStatus, waiting *corev1.ContainerStateWaiting) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: map[string]string{"k8s-app": "kube-dns"}},
			Spec:       corev1.PodSpec{NodeName: "w2"},
			Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "coredns", State: corev1.ContainerState{Waiting: waiting}, RestartCount: 1}}},
		}
	}
	kube := fake.NewSimpleClientset(dep,
		pod("coredns-a", corev1.ConditionTrue, nil),
		pod("coredns-b", corev1.ConditionFalse, &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s\nrestarting"}))
	w := Workload{Namespace: "kube-system", Kind: "Deployment", Name: "coredns"}
	done, why, err := RolledOut(context.Background(), kube, w)
	want := "1 of 2 updated, 2 available; Pod coredns-b on w2: container coredns CrashLoopBackOff: back-off 10s restarting, 1 restarts"
	if err != nil || done || why != want {
		t.Errorf("RolledOut = %v, %q, %v; want false, %q", done, why, err, want)
	}
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}
	if _, err := kube.AppsV1().Deployments("kube-system").UpdateStatus(context.Background(), dep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if done, why, err := RolledOut(context.Background(), kube, w); !done || why != "" || err != nil {
		t.Errorf("a finished rollout: %v, %q, %v", done, why, err)
	}
}
