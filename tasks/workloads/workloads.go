// Package workloads is what a CA rotation does to the cluster's workloads through the API: find those whose
// Pods started before the new CA was trusted and talk to the API, roll them as kubectl rollout restart
// does, follow their rollouts, and check what Pods see (kube-root-ca.crt) and which tokens the old
// service-account key signed.
package workloads

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Workload is a Deployment, DaemonSet or StatefulSet.
type Workload struct{ Namespace, Kind, Name string }

func (w Workload) String() string { return w.Kind + " " + w.Namespace + "/" + w.Name }

// StartedBefore finds the workloads with a running Pod that started before t and mounts a service-account
// token (static Pods aside), and the Pods of that kind no controller clusterctl can roll owns
// (namespace/name).
func StartedBefore(ctx context.Context, kube kubernetes.Interface, t time.Time) (todo []Workload, unowned []string, err error) {
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	seen := map[Workload]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror || p.Status.StartTime == nil || !p.Status.StartTime.Time.Before(t) ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || !MountsToken(p) {
			continue
		}
		w := Workload{Namespace: p.Namespace}
		if w.Kind, w.Name, err = controller(ctx, kube, p); err != nil {
			return nil, nil, err
		}
		if w.Kind == "" {
			unowned = append(unowned, p.Namespace+"/"+p.Name)
			continue
		}
		if !seen[w] {
			seen[w] = true
			todo = append(todo, w)
		}
	}
	return todo, unowned, nil
}

// controller is the workload that owns a Pod, or kind "" when there is none clusterctl can roll.
func controller(ctx context.Context, kube kubernetes.Interface, p *corev1.Pod) (kind, name string, err error) {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return "", "", nil
	}
	switch ref.Kind {
	case "ReplicaSet":
		rs, err := kube.AppsV1().ReplicaSets(p.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", "", err
		}
		if d := metav1.GetControllerOf(rs); d != nil && d.Kind == "Deployment" {
			return "Deployment", d.Name, nil
		}
	case "DaemonSet", "StatefulSet":
		return ref.Kind, ref.Name, nil
	}
	return "", "", nil
}

// MountsToken reports whether a Pod mounts a projected service-account token.
func MountsToken(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					return true
				}
			}
		}
	}
	return false
}

// Restart rolls a workload as kubectl rollout restart does: a restartedAt annotation on its Pod template.
func Restart(ctx context.Context, kube kubernetes.Interface, w Workload, at time.Time) error {
	patch := []byte(fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, at.UTC().Format(time.RFC3339)))
	opts := metav1.PatchOptions{FieldManager: "clusterctl"}
	var err error
	switch w.Kind {
	case "Deployment":
		_, err = kube.AppsV1().Deployments(w.Namespace).Patch(ctx, w.Name, types.StrategicMergePatchType, patch, opts)
	case "DaemonSet":
		_, err = kube.AppsV1().DaemonSets(w.Namespace).Patch(ctx, w.Name, types.StrategicMergePatchType, patch, opts)
	case "StatefulSet":
		_, err = kube.AppsV1().StatefulSets(w.Namespace).Patch(ctx, w.Name, types.StrategicMergePatchType, patch, opts)
	default:
		err = fmt.Errorf("cannot roll a %s", w.Kind)
	}
	if err != nil {
		return fmt.Errorf("restarting %s: %w", w, err)
	}
	return nil
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// StaleRootCA lists the namespaces whose kube-root-ca.crt (the CA data Pods mount; the controller-manager
// publishes its root CA file there) is not want.
func StaleRootCA(ctx context.Context, kube kubernetes.Interface, want string) ([]string, error) {
	list, err := kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=kube-root-ca.crt"})
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, cm := range list.Items {
		if cm.Name == "kube-root-ca.crt" && cm.Data["ca.crt"] != want {
			stale = append(stale, cm.Namespace)
		}
	}
	return stale, nil
}

// KeyID is the key ID the API server puts in the tokens it signs with a key (its "kid" header):
// base64url(SHA-256(PKIX DER of the public key)).
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// TokenKeyID is the "kid" of a JWT's header (nothing else of the token is read).
func TokenKeyID(token string) string {
	header, _, _ := strings.Cut(strings.TrimSpace(token), ".")
	data, err := base64.RawURLEncoding.DecodeString(header)
	if err != nil {
		return ""
	}
	var h struct {
		Kid string `json:"kid"`
	}
	if json.Unmarshal(data, &h) != nil {
		return ""
	}
	return h.Kid
}

// SecretsSignedBy lists the service-account token Secrets (namespace/name) whose token a key signed.
func SecretsSignedBy(ctx context.Context, kube kubernetes.Interface, kid string) ([]string, error) {
	secrets, err := kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{FieldSelector: "type=" + string(corev1.SecretTypeServiceAccountToken)})
	if err != nil {
		return nil, err
	}
	var signed []string
	for _, s := range secrets.Items {
		if s.Type == corev1.SecretTypeServiceAccountToken && TokenKeyID(string(s.Data[corev1.ServiceAccountTokenKey])) == kid {
			signed = append(signed, s.Namespace+"/"+s.Name)
		}
	}
	return signed, nil
}

// RunningPods are the running Pods by UID (namespace/name).
func RunningPods(ctx context.Context, kube kubernetes.Interface) (map[string]string, error) {
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	running := map[string]string{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			running[string(p.UID)] = p.Namespace + "/" + p.Name
		}
	}
	return running, nil
}

// OldTokens reads a node's token listing (scripts.PodTokens: each token file under podsDir and its token's
// header) and lists the running Pods whose token a key other than kid signed.
func OldTokens(listing []byte, podsDir string, running map[string]string, kid string) []string {
	var old []string
	for _, line := range strings.Split(strings.TrimSpace(string(listing)), "\n") {
		file, header, ok := strings.Cut(line, " ")
		uid := strings.Split(strings.TrimPrefix(file, podsDir+"/"), "/")[0]
		if pod, run := running[uid]; ok && run && TokenKeyID(header+".") != kid {
			old = append(old, pod)
		}
	}
	return old
}
