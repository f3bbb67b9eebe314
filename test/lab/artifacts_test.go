package lab

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/flannel"
)

// TestArtifactImagesRun imports every image of the artifacts directory into containerd on a lab host and runs
// each one: the binaries inside start, and kube-proxy's image has working iptables.
func TestArtifactImagesRun(t *testing.T) {
	dir, m := Artifacts(t)
	l := Start(t, Options{Hosts: 1})
	host := l.Hosts[0].Name
	ref := map[string]string{}
	for _, f := range m.Files {
		if f.Kind != artifacts.KindImage {
			continue
		}
		ref[f.Name] = f.Image
		if err := sftpPut(l, "", host, filepath.Join(dir, f.Path), "/tmp/"+f.Name+".tar"); err != nil {
			t.Fatal(err)
		}
		l.Run(t, host, "ctr -n k8s.io images import /tmp/"+f.Name+".tar >/dev/null")
	}
	for _, tc := range []struct {
		image, command, want string
	}{
		{"kube-apiserver", "kube-apiserver --version", "Kubernetes " + m.KubernetesVersion},
		{"kube-controller-manager", "kube-controller-manager --version", "Kubernetes " + m.KubernetesVersion},
		{"kube-scheduler", "kube-scheduler --version", "Kubernetes " + m.KubernetesVersion},
		{"kube-proxy", "kube-proxy --version", "Kubernetes " + m.KubernetesVersion},
		{"kube-proxy", "iptables --version", "iptables v1.8"},
		{"kube-proxy", "iptables-legacy -t nat -L -n", "Chain PREROUTING"},
		{"etcd", "etcd --version", "etcd Version: " + strings.TrimPrefix(m.EtcdVersion, "v")},
		{"etcd", "etcdctl version", "etcdctl version: " + strings.TrimPrefix(m.EtcdVersion, "v")},
		{"coredns", "/coredns -version", "CoreDNS-" + strings.TrimPrefix(m.CoreDNSVersion, "v")},
		{"flannel", "/opt/bin/flanneld --version", flannel.Version},
		{"flannel", "iptables --version", "iptables v1.8"},
		{"kube-network-policies", "/bin/netpol --help", "nfqueue-id"},
	} {
		t.Run(tc.image+" "+tc.command, func(t *testing.T) {
			r, ok := ref[tc.image]
			if !ok {
				t.Fatalf("no %s image in the manifest", tc.image)
			}
			out, err := l.SSH("", host, fmt.Sprintf("ctr -n k8s.io run --rm --privileged %s probe %s 2>&1", r, tc.command))
			if err != nil || !strings.Contains(out, tc.want) {
				t.Errorf("%s in %s: %v\n%s", tc.command, r, err, out)
			}
		})
	}
	t.Run("pause", func(t *testing.T) {
		out, err := l.SSH("", host, fmt.Sprintf("ctr -n k8s.io run -d %s pause-probe >/dev/null && sleep 0.5 && "+
			"ctr -n k8s.io task ls | grep -c 'pause-probe.*RUNNING' && ctr -n k8s.io task kill -s TERM pause-probe && "+
			"sleep 0.5 && ctr -n k8s.io task ls | grep -c 'pause-probe.*STOPPED'", ref["pause"]))
		if err != nil || out != "1\n1\n" {
			t.Errorf("pause did not run and stop on SIGTERM: %v\n%s", err, out)
		}
	})
}
