package manifests

import (
	"path"

	corev1 "k8s.io/api/core/v1"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
)

// etcdUserArgs points etcd at its own copies of its server and peer keys (kubeadm.EtcdKeysDir) when it runs
// as the etcd user: the keys under the PKI directory are root's, 0600, and stay so.
func etcdUserArgs(p *Params, args []Arg) []Arg {
	if p.EtcdUser == nil {
		return args
	}
	args = setArg(args, "key-file", path.Join(kubeadm.EtcdKeysDir, "server.key"))
	return setArg(args, "peer-key-file", path.Join(kubeadm.EtcdKeysDir, "peer.key"))
}

// etcdAsUser runs the etcd static Pod as the etcd user (Params.EtcdUser) with nothing more: no
// privilege escalation, no capability, its own keys' directory mounted read-only.
func etcdAsUser(p *Params, pod *corev1.Pod) {
	u := p.EtcdUser
	if u == nil {
		return
	}
	uid, gid, t, f := int64(u.UID), int64(u.GID), true, false
	sc := pod.Spec.SecurityContext
	sc.RunAsUser, sc.RunAsGroup, sc.RunAsNonRoot = &uid, &gid, &t
	c := &pod.Spec.Containers[0]
	c.SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: &f, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	dir := corev1.HostPathDirectoryOrCreate
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "etcd-keys", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: kubeadm.EtcdKeysDir, Type: &dir}}})
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "etcd-keys", MountPath: kubeadm.EtcdKeysDir, ReadOnly: true})
}
