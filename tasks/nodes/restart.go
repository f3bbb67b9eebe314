package nodes

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// What a kubelet restart does to the Pods of its node, and what a rolling restart waits for before the
// next node's: a restarted kubelet reports every container with a readiness probe NotReady until that
// probe has run once (up to one period after the kubelet starts; upstream's kubernetes/kubernetes#100277),
// so a Service whose ready Pods are all on kubelets restarted together has no endpoint for that time.

// ReadyPod is a Pod that was Ready on a node before its kubelet restarted: it must be Ready again, by its
// restarted kubelet's word, before the next node's kubelet restarts.
type ReadyPod struct {
	UID             types.UID
	Namespace, Name string
	// Probe is how long the restarted kubelet may take to run the Pod's readiness probes once (the longest
	// period and timeout among its containers); zero when it has none (Ready is then its containers running).
	Probe time.Duration
}

// probeMargin is added to a Pod's probe time, which counts from the Node Ready from the restarted kubelet:
// for its probe workers' start (the Pod's first sync, about when the Node turns Ready) and the status update
// after the probe. A kubelet that keeps a Pod Ready across its restart (its first sync before its probe
// workers exist, kubernetes/kubernetes#135795) never shows a change, and the roll then waits the whole
// time: the common case in make test's CA rotation (each worker's restart 12.2–13.3 s with a 5 s margin).
const probeMargin = 2 * time.Second

// mirrorAnnotation marks the API's mirror of a kubelet's static Pod (the kubelet's
// ConfigMirrorAnnotationKey).
const mirrorAnnotation = "kubernetes.io/config.mirror"

// Mirror reports whether a Pod is the mirror of a static Pod: its kubelet runs it from a manifest, and a
// restarted kubelet's static Pods are waited for by their manifests' digests (StaticPodsWaiting).
func Mirror(p corev1.Pod) bool {
	_, ok := p.Annotations[mirrorAnnotation]
	return ok
}

// PodsOn lists a node's Pods (bounded by the API's own limits: one node's Pods).
func PodsOn(ctx context.Context, kube kubernetes.Interface, nodeName string) ([]corev1.Pod, error) {
	list, err := kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", nodeName).String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// ReadyPods are the Pods that are Ready and not being deleted, with their readiness probes' time.
func ReadyPods(pods []corev1.Pod) []ReadyPod {
	var out []ReadyPod
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || !PodReady(p) {
			continue
		}
		r := ReadyPod{UID: p.UID, Namespace: p.Namespace, Name: p.Name}
		for _, c := range p.Spec.Containers {
			if pr := c.ReadinessProbe; pr != nil {
				period, timeout := pr.PeriodSeconds, pr.TimeoutSeconds
				if period <= 0 {
					period = 10 // the API's defaults
				}
				if timeout <= 0 {
					timeout = 1
				}
				r.Probe = max(r.Probe, time.Duration(period+timeout)*time.Second)
			}
		}
		out = append(out, r)
	}
	return out
}

// NotReadyAgain lists (namespace/name) the Pods of before that the kubelet restarted at started (by the
// node's clock, which its Pods' conditions carry too) has not reported Ready again: not Ready now; or, with
// a readiness probe, Ready by a condition older than the restart while less than the probe's time has
// passed since the Node was seen Ready from the restarted kubelet (sinceReady): that kubelet may still
// report it NotReady before its first probe. A Pod gone or being deleted is not waited for (its controller
// replaces it).
func NotReadyAgain(before []ReadyPod, now []corev1.Pod, started time.Time, sinceReady time.Duration) []string {
	byUID := make(map[types.UID]*corev1.Pod, len(now))
	for i := range now {
		byUID[now[i].UID] = &now[i]
	}
	var waiting []string
	for _, b := range before {
		p := byUID[b.UID]
		if p == nil || p.DeletionTimestamp != nil {
			continue
		}
		if !PodReady(p) {
			waiting = append(waiting, b.Namespace+"/"+b.Name)
			continue
		}
		if b.Probe == 0 || sinceReady >= b.Probe+probeMargin {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.LastTransitionTime.Time.Before(started.Truncate(time.Second)) {
				waiting = append(waiting, b.Namespace+"/"+b.Name+" (its first readiness probe)")
			}
		}
	}
	return waiting
}
