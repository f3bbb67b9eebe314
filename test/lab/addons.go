package lab

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/tasks/flannel"
)

// The third-party add-ons build-addons.sh builds (their charts' versions are the modules').
const (
	LocalPathVersion     = "v0.0.30"
	MetricsServerVersion = "v0.8.0"
	// MetricsServerChart is the chart in metrics-server's module at MetricsServerVersion.
	MetricsServerChart = "3.12.2"
	// FlannelCNIPluginVersion is the release of github.com/containernetworking/plugins whose flannel CNI
	// plugin the lab's flannel-cni-plugin image holds (the module proxy does not serve
	// flannel-io/cni-plugin). It speaks CNI up to 0.4.0.
	FlannelCNIPluginVersion = "v0.9.1"
	// FlannelImage and FlannelCNIPluginImage are the images flannel's chart runs, under the lab's names
	// (a test sets them as the chart's values): flanneld with install-conf and iptables, and the CNI
	// plugin beside busybox's cp.
	FlannelImage          = "clusterctl.local/lab/flannel:" + flannel.Version
	FlannelCNIPluginImage = "clusterctl.local/lab/flannel-cni-plugin:" + FlannelCNIPluginVersion
)

// Addons is the add-ons directory build-addons.sh made (charts and images, with their manifest); a test
// skips when it is not there.
func Addons(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(ArtifactsDir(KubernetesVersion)), "addons",
		"lpp-"+LocalPathVersion+"_ms-"+MetricsServerVersion+"_flannel-"+flannel.Version+"_cni-"+FlannelCNIPluginVersion)
	m, err := artifacts.Load(dir)
	if !fileExists(filepath.Join(dir, artifacts.ManifestFile)) {
		t.Skipf("no add-ons in %s: test/lab/build-addons.sh builds them (~7 min once)", dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(dir); err != nil {
		t.Fatalf("add-ons in %s do not match their manifest:\n%v", dir, err)
	}
	return dir
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
