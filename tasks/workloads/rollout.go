package workloads

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// RolledOut reports whether a workload's rollout is complete, as kubectl rollout status judges it, and
// while it is not, where it stands and what holds it: the counts, and the first of its Pods that is not
// Ready, with its node and the reason the kubelet or the scheduler gives.
func RolledOut(ctx context.Context, kube kubernetes.Interface, w Workload) (done bool, why string, err error) {
	apps := kube.AppsV1()
	var sel *metav1.LabelSelector
	switch w.Kind {
	case "Deployment":
		d, err := apps.Deployments(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		want := replicas(d.Spec.Replicas)
		s := d.Status
		done = s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want && s.AvailableReplicas == want
		why, sel = fmt.Sprintf("%d of %d updated, %d available", s.UpdatedReplicas, want, s.AvailableReplicas), d.Spec.Selector
	case "DaemonSet":
		d, err := apps.DaemonSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		s := d.Status
		done = s.ObservedGeneration >= d.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberAvailable == s.DesiredNumberScheduled
		why, sel = fmt.Sprintf("%d of %d updated, %d available", s.UpdatedNumberScheduled, s.DesiredNumberScheduled, s.NumberAvailable), d.Spec.Selector
	case "StatefulSet":
		st, err := apps.StatefulSets(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		s := st.Status
		want := replicas(st.Spec.Replicas)
		done = s.ObservedGeneration >= st.Generation && s.UpdateRevision == s.CurrentRevision && s.ReadyReplicas == want
		why, sel = fmt.Sprintf("%d of %d updated, %d ready", s.UpdatedReplicas, want, s.ReadyReplicas), st.Spec.Selector
	default:
		return true, "", nil
	}
	if done {
		return true, "", nil
	}
	if p := notReady(ctx, kube, w.Namespace, sel); p != "" {
		why += "; " + p
	}
	return false, why, nil
}

// notReady describes the first Pod (by name) of selector in ns that is not Ready, "" when there is none or
// the Pods cannot be listed (the description is a help, not the verdict).
func notReady(ctx context.Context, kube kubernetes.Interface, ns string, sel *metav1.LabelSelector) string {
	if sel == nil {
		return ""
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return ""
	}
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: s.String()})
	if err != nil {
		return ""
	}
	items := pods.Items
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	for i := range items {
		if p := &items[i]; p.DeletionTimestamp == nil && !podReady(p) {
			return podTrouble(p)
		}
	}
	return ""
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podTrouble says why a Pod is not Ready, in the words of the scheduler or the kubelet: "Pod NAME on NODE:
// REASON: MESSAGE", cut to a line.
func podTrouble(p *corev1.Pod) string {
	where := "Pod " + p.Name
	if p.Spec.NodeName != "" {
		where += " on " + p.Spec.NodeName
	}
	what := string(p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return clip(where + ": " + join(c.Reason, c.Message))
		}
	}
	statuses := append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, c := range statuses {
		switch {
		case c.State.Waiting != nil && c.State.Waiting.Reason != "":
			what = fmt.Sprintf("container %s %s", c.Name, join(c.State.Waiting.Reason, c.State.Waiting.Message))
		case c.State.Terminated != nil && c.State.Terminated.ExitCode != 0:
			what = fmt.Sprintf("container %s exited %d (%s)", c.Name, c.State.Terminated.ExitCode, c.State.Terminated.Reason)
		case c.State.Running != nil && !c.Ready:
			what = fmt.Sprintf("container %s running, not ready", c.Name)
		default:
			continue
		}
		if c.RestartCount > 0 {
			what += fmt.Sprintf(", %d restarts", c.RestartCount)
		}
		break
	}
	return clip(where + ": " + what)
}

func join(reason, msg string) string {
	if msg == "" {
		return reason
	}
	return reason + ": " + msg
}

// clip keeps a description to one line of a readable length: messages read from the API are the
// cluster's words, of any length.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 300 {
		s = string(r[:300]) + "..."
	}
	return s
}
