package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/tasks/kubelet"
)

// KubeBenchVersion is the kube-bench kube-bench.sh builds: the version the module proxy serves with the CIS
// Kubernetes Benchmark v1.12's checks (cfg/cis-1.12).
const KubeBenchVersion = "v0.15.1"

// KubeBench is the directory kube-bench.sh makes: kube-bench and its cfg/. The test is skipped, saying so,
// when it has not been built.
func KubeBench(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(ArtifactsDir(KubernetesVersion)), "kube-bench-"+KubeBenchVersion)
	for _, p := range []string{"kube-bench", "cfg/cis-1.12/node.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Skipf("no kube-bench in %s: test/lab/kube-bench.sh builds it (~2 min once)", dir)
		}
	}
	return dir
}

// KernelDefaults gives this machine's kernel the settings kubelets protecting the kernel's defaults require
// (kubelet.KernelDefaults), which lab hosts, containers sharing its kernel with a read-only /proc/sys, cannot
// set themselves (a VM's setup does); the values it had come back when the test ends.
func KernelDefaults(t testing.TB) {
	t.Helper()
	for _, s := range kubelet.KernelDefaults {
		p := "/proc/sys/" + strings.ReplaceAll(s.Name, ".", "/")
		old, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(old)) == s.Value {
			continue
		}
		if err := os.WriteFile(p, []byte(s.Value), 0o644); err != nil {
			t.Fatalf("setting %s on this machine for the lab's kubelets: %v", s.Name, err)
		}
		t.Cleanup(func() {
			if err := os.WriteFile(p, old, 0o644); err != nil {
				t.Errorf("putting %s back to %s: %v", s.Name, strings.TrimSpace(string(old)), err)
			}
		})
	}
}
