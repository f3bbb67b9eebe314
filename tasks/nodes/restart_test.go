package nodes

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func pod(name string, ready bool, since time.Time, probe *corev1.Probe) corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", ReadinessProbe: probe}, {Name: "side"}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(since)}}}}
}

// What must be Ready again after a kubelet restart: the Pods Ready before, each with its readiness probe's
// time (defaults as the API's); not those NotReady or being deleted.
func TestReadyPods(t *testing.T) {
	old := time.Unix(1_800_000_000, 0)
	deleting := pod("deleting", true, old, nil)
	deleting.DeletionTimestamp = &metav1.Time{Time: old}
	got := ReadyPods([]corev1.Pod{
		pod("plain", true, old, nil),
		pod("probed", true, old, &corev1.Probe{PeriodSeconds: 3, TimeoutSeconds: 2}),
		pod("defaults", true, old, &corev1.Probe{}),
		pod("unready", false, old, &corev1.Probe{}),
		deleting,
	})
	want := []ReadyPod{
		{UID: "uid-plain", Namespace: "default", Name: "plain"},
		{UID: "uid-probed", Namespace: "default", Name: "probed", Probe: 5 * time.Second},
		{UID: "uid-defaults", Namespace: "default", Name: "defaults", Probe: 11 * time.Second},
	}
	if !slices.Equal(got, want) {
		t.Errorf("ReadyPods = %+v, want %+v", got, want)
	}
}

// A control-plane node's static Pods' mirrors are told from its other Pods (CoreDNS) by the kubelet's
// annotation.
func TestMirror(t *testing.T) {
	static := pod("kube-apiserver-cp1", true, time.Time{}, nil)
	static.Annotations = map[string]string{"kubernetes.io/config.mirror": "0f1e", "kubernetes.io/config.hash": "0f1e"}
	other := pod("coredns-1", true, time.Time{}, nil)
	other.Annotations = map[string]string{"kubernetes.io/config.hash": "x"}
	got := slices.DeleteFunc([]corev1.Pod{static, other, pod("plain", true, time.Time{}, nil)}, Mirror)
	if len(got) != 2 || got[0].Name != "coredns-1" || got[1].Name != "plain" {
		t.Errorf("without the mirrors: %v, want coredns-1 and plain", got)
	}
}

// A Pod counts as Ready again by its restarted kubelet's word: Ready now, and with a readiness probe,
// by a condition from after the restart, or once its probe's time has passed since the Node was Ready
// (a kubelet that keeps it Ready across the restart, as a fixed upstream may).
func TestNotReadyAgain(t *testing.T) {
	restart := time.Unix(1_800_000_100, 0)
	before, after := restart.Add(-time.Minute), restart.Add(2*time.Second)
	probe := &corev1.Probe{PeriodSeconds: 1, TimeoutSeconds: 1} // 2 s, 4 s with the margin
	was := ReadyPods([]corev1.Pod{pod("plain", true, before, nil), pod("probed", true, before, probe)})
	for _, c := range []struct {
		name       string
		now        []corev1.Pod
		sinceReady time.Duration
		want       []string
	}{
		{"both still Ready from before, right after the restart", []corev1.Pod{pod("plain", true, before, nil), pod("probed", true, before, probe)}, time.Second,
			[]string{"default/probed (its first readiness probe)"}},
		{"the probed Pod NotReady", []corev1.Pod{pod("plain", true, before, nil), pod("probed", false, after, probe)}, time.Second,
			[]string{"default/probed"}},
		{"the probed Pod Ready again since", []corev1.Pod{pod("plain", true, before, nil), pod("probed", true, after, probe)}, time.Second, nil},
		{"the probe's time passed, never NotReady", []corev1.Pod{pod("plain", true, before, nil), pod("probed", true, before, probe)}, 4 * time.Second, nil},
		{"the probe's time not passed yet", []corev1.Pod{pod("plain", true, before, nil), pod("probed", true, before, probe)}, 3 * time.Second,
			[]string{"default/probed (its first readiness probe)"}},
		{"the probe's time passed, NotReady", []corev1.Pod{pod("plain", true, before, nil), pod("probed", false, after, probe)}, time.Hour,
			[]string{"default/probed"}},
		{"a Pod without a probe NotReady", []corev1.Pod{pod("plain", false, after, nil), pod("probed", true, after, probe)}, time.Second,
			[]string{"default/plain"}},
		{"Pods gone or replaced are not waited for", []corev1.Pod{pod("other", false, after, nil)}, time.Second, nil},
	} {
		if got := NotReadyAgain(was, c.now, restart, c.sinceReady); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
