// Package nodes is clusterctl's work on Nodes and their Pods through the API: role labels and the
// inventory's labels and taints, readiness, draining, static Pods running their current manifests, the
// addons and rollouts a run waits for. Each function takes a kubernetes.Interface.
package nodes

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/bootstrap"
)

// The annotations that say which of a Node's labels and taints clusterctl set from the inventory (label
// keys; taints as key:effect; sorted, comma-separated): those, and only those, it takes off once the
// inventory no longer gives them.
const (
	LabelsAnnotation = "clusterctl.dev/labels"
	TaintsAnnotation = "clusterctl.dev/taints"
)

// Label makes a host's Node carry its role labels (control-plane nodes as kubeadm marks them, tainted
// unless they are workers too) and the inventory's labels and taints (inventory.NodeSettings), and takes
// off those clusterctl set before that the inventory no longer gives. A Node not registered yet is left
// for later. It returns what it changed, one entry each ("label k=v", "-taint k:NoSchedule").
func Label(ctx context.Context, kube kubernetes.Interface, h *inventory.Host, s inventory.NodeSettings) ([]string, error) {
	return LabelNode(ctx, kube, nil, h, s)
}

// LabelNode is Label starting from a Node already read (a list's; nil: it is read), read again only when
// another writer changed it in between.
func LabelNode(ctx context.Context, kube kubernetes.Interface, read *corev1.Node, h *inventory.Host, s inventory.NodeSettings) ([]string, error) {
	var changes []string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node := read
		read = nil // a conflict reads it anew
		if node == nil {
			var err error
			node, err = kube.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil // not registered yet: labelled when it is
			}
			if err != nil {
				return err
			}
		} else {
			node = node.DeepCopy()
		}
		var update bool
		if changes, update = reconcileNode(node, h, s); !update {
			return nil
		}
		_, err := kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{FieldManager: apiclient.FieldManager})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("the labels and taints of %s: %w", h.NodeName, err)
	}
	return changes, nil
}

// Reconciled reports whether a Node has the labels and taints LabelNode gives it: it would not change it.
func Reconciled(node *corev1.Node, h *inventory.Host, s inventory.NodeSettings) bool {
	_, update := reconcileNode(node.DeepCopy(), h, s)
	return !update
}

// reconcileNode changes a Node in memory to what Label wants; it says what it changed, and whether the
// Node is to be written (an annotation alone may have changed).
func reconcileNode(node *corev1.Node, h *inventory.Host, s inventory.NodeSettings) (changes []string, update bool) {
	labels := map[string]string{}
	var taints []corev1.Taint
	if h.Has(inventory.RoleControlPlane) {
		labels[bootstrap.ControlPlaneLabel] = ""
		labels[bootstrap.ExcludeFromLBLabel] = ""
		if !h.Has(inventory.RoleWorker) {
			taints = append(taints, corev1.Taint{Key: bootstrap.ControlPlaneLabel, Effect: corev1.TaintEffectNoSchedule})
		}
	}
	maps.Copy(labels, s.Labels)
	for _, t := range s.Taints {
		taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if cur, ok := node.Labels[k]; !ok || cur != labels[k] {
			node.Labels[k] = labels[k]
			changes = append(changes, "label "+k+"="+labels[k])
		}
	}
	for _, k := range listed(node.Annotations[LabelsAnnotation]) {
		if _, keep := labels[k]; !keep {
			if _, ok := node.Labels[k]; ok {
				delete(node.Labels, k)
				changes = append(changes, "-label "+k)
			}
		}
	}
	for _, t := range taints {
		i := slices.IndexFunc(node.Spec.Taints, func(x corev1.Taint) bool { return x.Key == t.Key && x.Effect == t.Effect })
		switch {
		case i < 0:
			node.Spec.Taints = append(node.Spec.Taints, t)
		case node.Spec.Taints[i].Value != t.Value:
			node.Spec.Taints[i].Value = t.Value
		default:
			continue
		}
		changes = append(changes, "taint "+taintString(t))
	}
	for _, ke := range listed(node.Annotations[TaintsAnnotation]) {
		key, effect, _ := strings.Cut(ke, ":")
		if slices.ContainsFunc(taints, func(x corev1.Taint) bool { return x.Key == key && string(x.Effect) == effect }) {
			continue
		}
		if i := slices.IndexFunc(node.Spec.Taints, func(x corev1.Taint) bool { return x.Key == key && string(x.Effect) == effect }); i >= 0 {
			node.Spec.Taints = slices.Delete(node.Spec.Taints, i, i+1)
			changes = append(changes, "-taint "+ke)
		}
	}
	var taintKeys []string
	for _, t := range s.Taints {
		taintKeys = append(taintKeys, t.Key+":"+t.Effect)
	}
	annotated := setAnnotation(node, LabelsAnnotation, slices.Sorted(maps.Keys(s.Labels)))
	annotated = setAnnotation(node, TaintsAnnotation, taintKeys) || annotated
	return changes, len(changes) > 0 || annotated
}

func taintString(t corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// listed splits an annotation's comma-separated list.
func listed(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// setAnnotation sets (or, for an empty list, removes) an annotation listing keys; it reports a change.
func setAnnotation(node *corev1.Node, name string, keys []string) bool {
	slices.Sort(keys)
	want := strings.Join(keys, ",")
	if node.Annotations[name] == want {
		return false
	}
	if want == "" {
		delete(node.Annotations, name)
		return true
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[name] = want
	return true
}

// Ready reports whether a Node's Ready condition is true.
func Ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ReadySince reports whether a Node is Ready by a status its kubelet posted at or after since (by the
// node's clock, in the whole seconds a heartbeat carries): a kubelet restarted then reports its own state
// only once it has posted one, and until then the Node shows its predecessor's. A zero since is Ready.
func ReadySince(n *corev1.Node, since time.Time) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(since)
		}
	}
	return false
}

// InternalIP is a Node's first InternalIP address, or "".
func InternalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// InternalIPs are all the InternalIP addresses a Node reports (one of each family on a dual-stack node).
func InternalIPs(n *corev1.Node) []string {
	var out []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			out = append(out, a.Address)
		}
	}
	return out
}

// Roles are a Node's roles, from its node-role.kubernetes.io/ labels, sorted.
func Roles(n *corev1.Node) []string {
	var roles []string
	for k := range n.Labels {
		if r, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok {
			roles = append(roles, r)
		}
	}
	slices.Sort(roles)
	return roles
}

// Cordon marks a Node unschedulable; it reports whether it changed it.
func Cordon(ctx context.Context, kube kubernetes.Interface, node *corev1.Node) (bool, error) {
	if node.Spec.Unschedulable {
		return false, nil
	}
	node.Spec.Unschedulable = true
	if _, err := kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{FieldManager: apiclient.FieldManager}); err != nil {
		return false, fmt.Errorf("cordon: %w", err)
	}
	return true, nil
}

// Uncordon marks a Node schedulable again; it reports whether it changed it. An update that conflicts
// with another writer (the kubelet's status of a node just rebooted) is tried again on the Node read anew.
func Uncordon(ctx context.Context, kube kubernetes.Interface, nodeName string) (bool, error) {
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil || !node.Spec.Unschedulable {
			return err
		}
		node.Spec.Unschedulable = false
		_, err = kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{FieldManager: apiclient.FieldManager})
		changed = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("uncordon: %w", err)
	}
	return changed, nil
}

// DrainRound is one round of a drain: it evicts the Node's Pods but DaemonSet and static ones (an eviction
// a PodDisruptionBudget refuses is tried again next round) and says which are left. Once the Node is not
// Ready (a dead host), Pods being deleted are not waited for: its kubelet never confirms, and deleting the
// Node removes them.
func DrainRound(ctx context.Context, kube kubernetes.Interface, nodeName string) (left []string, err error) {
	node, err := kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	ready := Ready(node)
	list, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		p := &list.Items[i]
		if Daemon(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if p.DeletionTimestamp != nil {
			if ready {
				left = append(left, p.Namespace+"/"+p.Name)
			}
			continue
		}
		left = append(left, p.Namespace+"/"+p.Name)
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		err := kube.CoreV1().Pods(p.Namespace).EvictV1(ctx, ev)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsTooManyRequests(err) {
			return nil, fmt.Errorf("evicting %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return left, nil
}

// Evictable lists the Pods a drain of the node would evict (namespace/name): all but DaemonSet and static
// Pods, and those that ended.
func Evictable(ctx context.Context, kube kubernetes.Interface, nodeName string) ([]string, error) {
	list, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName})
	if err != nil {
		return nil, err
	}
	var out []string
	for i := range list.Items {
		p := &list.Items[i]
		if Daemon(p) || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out, nil
}

// Daemon reports whether a Pod stays on its node through a drain: DaemonSet Pods and static Pods.
func Daemon(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// PodReady reports whether a Pod's Ready condition is true.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// StaticPod is what a control-plane node's static Pod manifest says its mirror Pod runs.
type StaticPod struct {
	Annotation string // the value of the certificate digest annotation
	Image      string // its container's image
}

// StaticPodsWaiting lists a node's control-plane mirror Pods that do not yet run their manifests' current
// annotation and image (want: by component) or are not Ready; with no annotation named and nothing wanted,
// only readiness counts. API errors are waited out (an API server restarting).
func StaticPodsWaiting(ctx context.Context, kube kubernetes.Interface, nodeName, annotation string, want map[string]StaticPod, components []string) []string {
	var waiting []string
	for _, c := range components {
		name := c + "-" + nodeName
		pod, err := kube.CoreV1().Pods(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			waiting = append(waiting, name+" (API: "+firstLine(err.Error())+")")
		case annotation != "" && pod.Annotations[annotation] != want[c].Annotation:
			waiting = append(waiting, name+" (old certificates)")
		case want[c].Image != "" && (len(pod.Spec.Containers) == 0 || pod.Spec.Containers[0].Image != want[c].Image):
			waiting = append(waiting, name+" (not yet "+want[c].Image+")")
		case !PodReady(pod):
			waiting = append(waiting, name+" (not Ready)")
		}
	}
	return waiting
}

// AddonsWaiting lists what of kube-proxy (on every node) and CoreDNS is not available yet.
func AddonsWaiting(ctx context.Context, kube kubernetes.Interface) ([]string, error) {
	var waiting []string
	ds, err := kube.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if ds.Status.DesiredNumberScheduled == 0 || ds.Status.NumberAvailable < ds.Status.DesiredNumberScheduled {
		waiting = append(waiting, fmt.Sprintf("kube-proxy (%d/%d available)", ds.Status.NumberAvailable, ds.Status.DesiredNumberScheduled))
	}
	dep, err := kube.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if dep.Status.AvailableReplicas < 1 {
		want := int32(1)
		if dep.Spec.Replicas != nil {
			want = *dep.Spec.Replicas
		}
		waiting = append(waiting, fmt.Sprintf("CoreDNS (%d/%d available)", dep.Status.AvailableReplicas, want))
	}
	return waiting, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// RolloutsWaiting lists what of kube-proxy and CoreDNS has not finished rolling out its current template:
// every Pod updated and available, the controller caught up with the latest change.
func RolloutsWaiting(ctx context.Context, kube kubernetes.Interface) ([]string, error) {
	var waiting []string
	ds, err := kube.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if s := ds.Status; s.ObservedGeneration < ds.Generation || s.UpdatedNumberScheduled < s.DesiredNumberScheduled || s.NumberAvailable < s.DesiredNumberScheduled {
		waiting = append(waiting, fmt.Sprintf("kube-proxy (%d/%d updated, %d available)", s.UpdatedNumberScheduled, s.DesiredNumberScheduled, s.NumberAvailable))
	}
	dep, err := kube.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	if s := dep.Status; s.ObservedGeneration < dep.Generation || s.UpdatedReplicas < want || s.AvailableReplicas < want || s.Replicas > want {
		waiting = append(waiting, fmt.Sprintf("CoreDNS (%d/%d updated, %d available)", s.UpdatedReplicas, want, s.AvailableReplicas))
	}
	return waiting, nil
}

// LeasesWaiting lists the nodes whose kubelet has not renewed its Lease since a time: after the API came
// back (a restore), Ready conditions may be the ones saved before, a renewal is the kubelet's own news.
func LeasesWaiting(ctx context.Context, kube kubernetes.Interface, nodeNames []string, since time.Time) []string {
	var waiting []string
	for _, n := range nodeNames {
		l, err := kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, n, metav1.GetOptions{})
		switch {
		case err != nil:
			waiting = append(waiting, n+" (API: "+firstLine(err.Error())+")")
		case l.Spec.RenewTime == nil || l.Spec.RenewTime.Time.Before(since):
			waiting = append(waiting, n+" (lease not renewed)")
		}
	}
	return waiting
}
