package apply

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/scripts"
	"github.com/clusterctl/clusterctl/transport"
)

// etcdUser is the user a node's etcd member runs as under profile cis: the owner of its own copy of its
// server key (render puts it in kubeadm.EtcdKeysDir only then); nil: root.
func etcdUser(files []transport.File) *scripts.EtcdUser {
	for _, f := range files {
		if f.Path == path.Join(kubeadm.EtcdKeysDir, "server.key") && f.UID > 0 {
			return &scripts.EtcdUser{UID: f.UID, GID: f.GID}
		}
	}
	return nil
}

// manifestUser is the user a static Pod's manifest runs it as (its Pod's runAsUser and runAsGroup); nil
// when it names none, or root.
func manifestUser(data []byte) *scripts.EtcdUser {
	var pod corev1.Pod
	if err := yaml.Unmarshal(data, &pod); err != nil {
		return nil
	}
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.RunAsUser == nil || sc.RunAsGroup == nil || *sc.RunAsUser <= 0 {
		return nil
	}
	return &scripts.EtcdUser{UID: int(*sc.RunAsUser), GID: int(*sc.RunAsGroup)}
}
