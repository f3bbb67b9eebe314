// Package netpol enforces NetworkPolicy beside a pod network clusterctl sets up (cni.networkPolicy): SIG
// Network's kube-network-policies (sigs.k8s.io/kube-network-policies) as a DaemonSet from an image of the
// artifacts. It works on any CNI's Pods: the first packet of each new connection to or from a Pod that a
// policy selects goes through nftables to the controller's queue, and the controller accepts or drops it
// by the policies then in force. A policy takes effect on the next connection of Pods already running;
// connections established before stay.
//
// It was chosen over the policy engines of other networks because it is the Kubernetes project's own,
// independent of the pod network (bridge and flannel alike), a single small Go program that the module
// proxy serves and the lab builds, and it runs on nftables (no iptables, no ipset, no BPF).
package netpol

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/clusterctl/clusterctl/tasks/images"
	"github.com/clusterctl/clusterctl/tasks/network"
	"github.com/clusterctl/clusterctl/tasks/preflight"
)

const (
	// Name is the controller's DaemonSet, service account, RBAC and container name, in kube-system.
	Name      = "kube-network-policies"
	namespace = "kube-system"
	// QueueID is the netfilter queue its rules send packets to.
	QueueID = 100
	// CheckName is its preflight check (--ignore-preflight-errors=NetworkPolicyKernel).
	CheckName = "NetworkPolicyKernel"
)

// The controller's image, at the release this package deploys: its name in an artifacts manifest, its
// version and its upstream reference.
const (
	ImageName = "kube-network-policies"
	Version   = "v0.8.0"
	Image     = "registry.k8s.io/networking/kube-network-policies:" + Version
)

// With is the pod network p with the policy controller beside it (p's early or staged network kept).
func With(p network.Plugin) network.Plugin {
	switch e := p.(type) {
	case network.Early:
		return withEarly{with{p}, e}
	case network.Staged:
		return withStaged{with{p}, e}
	}
	return with{p}
}

type with struct{ network.Plugin }

type withEarly struct {
	with
	early network.Early
}

func (w withEarly) ApplyEarly(ctx context.Context, env network.Env, c *network.Cluster) error {
	return w.early.ApplyEarly(ctx, env, c)
}

type withStaged struct {
	with
	network.Staged
}

func (w with) Images() []images.Image {
	return append(w.Plugin.Images(), images.Image{Name: ImageName, Ref: Image})
}

func (w with) Check(nodes []network.Node) []preflight.Finding {
	return append(w.Plugin.Check(nodes), Check(nodes)...)
}

func (w with) Leftovers() network.Leftovers { return w.Plugin.Leftovers().Add(Leftovers()) }

// Apply sets the pod network up, then the controller, and waits for it on every node of the run.
func (w with) Apply(ctx context.Context, env network.Env, c *network.Cluster) (network.Outcome, error) {
	out, err := w.Plugin.Apply(ctx, env, c)
	if err != nil {
		return out, err
	}
	admin, err := env.Admin(ctx)
	if err != nil {
		return out, err
	}
	objs, err := Objects(c.Images.Ref(ImageName), c.APIEndpoint)
	if err != nil {
		return out, err
	}
	if err := network.ApplyObjects(ctx, admin, env.Timeout(), "the NetworkPolicy controller's objects", objs); err != nil {
		return out, err
	}
	return out, env.Poll(ctx, func() (bool, string, error) {
		pods, err := admin.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + Name})
		if err != nil {
			return false, "", nil // the API server restarting: ask again
		}
		running := map[string]bool{}
		for i := range pods.Items {
			p := &pods.Items[i]
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Ready && p.DeletionTimestamp == nil {
					running[p.Spec.NodeName] = true
				}
			}
		}
		var missing []string
		for _, n := range c.Run() {
			if !running[n.Name] {
				missing = append(missing, n.Name)
			}
		}
		return len(missing) == 0, "the NetworkPolicy controller on " + strings.Join(missing, ", "), nil
	})
}

// Leftovers: the controller removes its nftables table when it is interrupted (SIGINT; it does not catch
// SIGTERM), so reset interrupts it and waits before it kills the other containers.
func Leftovers() network.Leftovers { return network.Leftovers{Graceful: []string{Name}} }

// Check refuses a node whose kernel cannot send packets to the controller's queue: it needs
// nfnetlink_queue, and nftables' queue expression (nft_queue), which upstream's image uses. A kernel with
// the xtables NFQUEUE target through nft_compat and no nft_queue (the lab's) gets a warning: only an image
// built to use that target (the lab's) enforces policies there. Where the host cannot tell (no module
// directory), a warning too.
func Check(nodes []network.Node) []preflight.Finding {
	var out []preflight.Finding
	for _, n := range nodes {
		f := n.Facts
		if f == nil {
			continue
		}
		finding := func(sev preflight.Severity, format string, args ...any) {
			out = append(out, preflight.Finding{Host: n.Host, Check: CheckName, Severity: sev, Message: fmt.Sprintf(format, args...)})
		}
		has := f.KernelModules
		switch {
		case !f.KernelModulesKnown:
			finding(preflight.SevWarning, "no /lib/modules for the running kernel: cannot tell whether it has nfnetlink_queue and nft_queue, which the NetworkPolicy controller needs")
		case !has["nfnetlink_queue"]:
			finding(preflight.SevError, "the kernel has no nfnetlink_queue (CONFIG_NETFILTER_NETLINK_QUEUE): the NetworkPolicy controller cannot receive packets, and policies would not be enforced")
		case !has["nft_queue"] && has["nft_compat"] && has["xt_NFQUEUE"]:
			finding(preflight.SevWarning, "the kernel has no nft_queue (CONFIG_NFT_QUEUE), only the xtables NFQUEUE target: upstream's kube-network-policies image cannot queue packets here (an image built to use that target can)")
		case !has["nft_queue"]:
			finding(preflight.SevError, "the kernel has no nft_queue (CONFIG_NFT_QUEUE): the NetworkPolicy controller cannot queue packets, and policies would not be enforced")
		}
	}
	return out
}

// Objects are the controller's: service account, RBAC (upstream's install.yaml) and the DaemonSet running
// image, reaching the API server at endpoint (a URL; "": the Service address).
func Objects(image, endpoint string) ([]runtime.Object, error) {
	apiEnv, err := network.APIEnv(endpoint)
	if err != nil {
		return nil, err
	}
	env := append([]corev1.EnvVar{{Name: "MY_NODE_NAME", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}}}, apiEnv...)
	labels := map[string]string{"app": Name, "k8s-app": Name, "tier": "node"}
	meta := metav1.ObjectMeta{Name: Name, Namespace: namespace, Labels: map[string]string{"k8s-app": Name}}
	cluster := metav1.ObjectMeta{Name: Name, Labels: map[string]string{"k8s-app": Name}}
	t := true
	fileOrCreate := corev1.HostPathDirectoryOrCreate
	hostPath := func(n, p string) corev1.Volume {
		return corev1.Volume{Name: n, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: p, Type: &fileOrCreate}}}
	}
	toContainer := corev1.MountPropagationHostToContainer
	ds := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": Name}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork:        true,
					PriorityClassName:  "system-node-critical",
					ServiceAccountName: Name,
					NodeSelector:       map[string]string{corev1.LabelOSStable: "linux"},
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					// It removes its nftables table when it stops (SIGTERM).
					TerminationGracePeriodSeconds: ptr(int64(10)),
					Containers: []corev1.Container{{
						Name: Name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
						Command: []string{"/bin/netpol"},
						Args:    []string{"--hostname-override=$(MY_NODE_NAME)", fmt.Sprintf("--nfqueue-id=%d", QueueID), "--v=2"},
						Env:     env,
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("50Mi")}},
						SecurityContext: &corev1.SecurityContext{Privileged: &t},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "nri-plugin", MountPath: "/var/run/nri"},
							{Name: "netns", MountPath: "/var/run/netns", MountPropagation: &toContainer},
						},
					}},
					Volumes: []corev1.Volume{hostPath("nri-plugin", "/var/run/nri"), hostPath("netns", "/var/run/netns")},
				},
			},
		},
	}
	return []runtime.Object{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta},
		&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: cluster,
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: []string{"list", "watch"}},
				{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"list", "watch"}},
			}},
		&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"}, ObjectMeta: cluster,
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: Name, Namespace: namespace}}},
		ds,
	}, nil
}

func ptr[T any](v T) *T { return &v }
