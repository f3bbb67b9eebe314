package charts

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"helm.sh/helm/v4/pkg/kube"

	"github.com/clusterctl/clusterctl/tasks/apiclient"
)

// waitObjects waits for a manifests add-on's objects to be ready as Helm waits for a release's
// (kstatus: Deployments available, DaemonSets scheduled and ready, Jobs complete, ...).
func (c *Client) waitObjects(ctx context.Context, set *ManifestSet, timeout time.Duration) error {
	kc := c.kube("")
	list, err := kc.Build(bytes.NewBufferString(YAMLOf(set.Objects)), false)
	if err != nil {
		return err
	}
	w, err := kc.GetWaiterWithOptions(kube.StatusWatcherStrategy, kube.WithWaitContext(ctx))
	if err != nil {
		return err
	}
	if err := w.WaitWithJobs(list, timeout); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		msg := fmt.Sprintf("its objects were not ready within %s: %v", timeout, err)
		if why := c.notReadyObjects(ctx, set.Objects); why != "" {
			msg += "\n" + why
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// notReady says, for a release's manifest, which of its Pods are not ready and why.
func (c *Client) notReady(ctx context.Context, namespace, manifest string) string {
	objs, err := apiclient.Decode([]byte(manifest))
	if err != nil {
		return ""
	}
	var us []*unstructured.Unstructured
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		if u.GetNamespace() == "" {
			u.SetNamespace(namespace)
		}
		us = append(us, u)
	}
	return c.notReadyObjects(ctx, us)
}

// maxReported bounds the Pods (and each one's events) a failure names.
const (
	maxReported = 8
	maxEvents   = 3
)

// notReadyObjects names the Pods of the workloads among objs that are not ready: phase, the waiting or
// terminated reason of each container, and the Pod's last events.
func (c *Client) notReadyObjects(ctx context.Context, objs []*unstructured.Unstructured) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var lines []string
	seen := map[string]bool{}
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job":
		default:
			continue
		}
		sel, found, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
		if !found || len(sel) == 0 {
			continue
		}
		pods, err := c.api.Kube.CoreV1().Pods(u.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
		if err != nil {
			continue
		}
		if len(pods.Items) == 0 {
			lines = append(lines, fmt.Sprintf("  %s %s/%s: no Pods", u.GetKind(), u.GetNamespace(), u.GetName()))
		}
		for _, p := range pods.Items {
			key := p.Namespace + "/" + p.Name
			if seen[key] || podReady(&p) || len(seen) >= maxReported {
				continue
			}
			seen[key] = true
			lines = append(lines, fmt.Sprintf("  Pod %s (%s): %s", key, p.Spec.NodeName, podState(&p)))
			lines = append(lines, c.podEvents(ctx, &p)...)
			lines = append(lines, c.lastWords(ctx, &p)...)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "Pods not ready:\n" + strings.Join(lines, "\n")
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podState(p *corev1.Pod) string {
	parts := []string{string(p.Status.Phase)}
	for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		switch {
		case cs.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("%s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
			parts = append(parts, fmt.Sprintf("%s exited %d: %s", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason))
		case cs.State.Running != nil && !cs.Ready:
			parts = append(parts, fmt.Sprintf("%s running, not ready (%d restarts)", cs.Name, cs.RestartCount))
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			parts = append(parts, "not scheduled: "+c.Message)
		}
	}
	return strings.Join(parts, "; ")
}

// maxLogLines and maxLogBytes bound what lastWords reads of a container's log.
const (
	maxLogLines = 3
	maxLogBytes = 4096
)

// lastWords are, for each container of p that exited and was restarted, how it exited and the last lines
// of its log (the previous instance's): why a crashing container crashes.
func (c *Client) lastWords(ctx context.Context, p *corev1.Pod) []string {
	var out []string
	for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		t := cs.LastTerminationState.Terminated
		if t == nil || t.ExitCode == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("    %s last exited %d (%s), restarted %d times; its last lines:", cs.Name, t.ExitCode, t.Reason, cs.RestartCount))
		tail, limit := int64(maxLogLines), int64(maxLogBytes)
		data, err := c.api.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, Previous: true,
			TailLines: &tail, LimitBytes: &limit}).DoRaw(ctx)
		if err != nil {
			out = append(out, "      (its log could not be read: "+err.Error()+")")
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				out = append(out, "      "+truncate(l, 400))
			}
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func (c *Client) podEvents(ctx context.Context, p *corev1.Pod) []string {
	evs, err := c.api.Kube.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
	if err != nil {
		return nil
	}
	items := evs.Items
	slices.SortFunc(items, func(a, b corev1.Event) int { return eventTime(&a).Compare(eventTime(&b)) })
	var out []string
	for _, e := range items[max(0, len(items)-maxEvents):] {
		out = append(out, fmt.Sprintf("    %s %s: %s", e.Type, e.Reason, strings.TrimSpace(e.Message)))
	}
	return out
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
