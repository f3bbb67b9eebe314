package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/clusterctl/clusterctl/tasks/flannel"
	"github.com/clusterctl/clusterctl/test/lab"
	"github.com/clusterctl/clusterctl/test/lab/mirror"
)

// addonRelease is a line of `clusterctl addons list -o json`.
type addonRelease struct {
	Name, Namespace, Chart, Version, Status, Kind string
	Revision                                      int
}

func addonsList(t *testing.T, c *Cluster) map[string]addonRelease {
	t.Helper()
	stdout, stderr, code := c.Run(t, "addons", "list", "-o", "json")
	if code != 0 {
		t.Fatalf("addons list: exit %d\n%s%s", code, stdout, stderr)
	}
	out := map[string]addonRelease{}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if l == "" {
			continue
		}
		var r struct {
			Type string `json:"type"`
			addonRelease
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("addons list -o json: %v\n%s", err, l)
		}
		if r.Type == "addon" { // then the last line, type addons: the count and the status
			out[r.Name] = r.addonRelease
		}
	}
	return out
}

func revisions(list map[string]addonRelease) string {
	var parts []string
	for _, n := range []string{"flannel", "local-path", "metrics-server", "extras", "handmade"} {
		if r, ok := list[n]; ok {
			parts = append(parts, fmt.Sprintf("%s=%d", n, r.Revision))
		}
	}
	return strings.Join(parts, " ")
}

// TestAddons installs real, unmodified third-party charts (flannel's as the pod network, with cni.plugin
// none, and metrics-server from the lab mirror's OCI registry, local-path-provisioner from its Helm
// repository) and a manifests add-on on a 1+2 cluster whose artifacts, charts and images included, were
// pulled with `artifacts pull -i` from the mirror; then: Pods on every pair of nodes reach each other and
// a Service by name through flannel's chart (make test-long: the [Conformance] suite's networking part
// passes on it), a PVC of the default StorageClass binds and a Pod writes to it, kubectl
// top lists every node, a second up makes no new revision, a changed value makes exactly one, an add-on
// taken out of the inventory is uninstalled and the others stay, and a release of the same name installed
// by someone else is refused.
func TestAddons(t *testing.T) {
	labDir, m := lab.Artifacts(t)
	addonsDir := lab.Addons(t)
	mir, err := mirror.Start(context.Background(), labDir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mir.Close() })
	if err := mir.ServeAddons(context.Background(), addonsDir); err != nil {
		t.Fatal(err)
	}
	pulled := filepath.Join(t.TempDir(), "artifacts")
	extras := t.TempDir()
	if err := os.WriteFile(filepath.Join(extras, "config.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extras\ndata:\n  greeting: hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	flRepo, flTag, _ := strings.Cut(lab.FlannelImage, ":")
	cniRepo, cniTag, _ := strings.Cut(lab.FlannelCNIPluginImage, ":")
	settings := fmt.Sprintf(`  cni: {plugin: none}
  addons:
    - name: flannel
      chart: flannel
      version: %s
      repository: %s
      namespace: kube-flannel
      podSecurity: privileged
      network: true
      values:
        podCidr: 10.244.0.0/16
        flannel:
          image: {repository: %s, tag: %s}
          flannel_cni: {image: {repository: %s, tag: %s}}
          # the lab's hosts have no default route, by which flanneld finds its interface by default
          args: [--ip-masq, --kube-subnet-mgr, --iface=host0]
          cniConf: |
            {"name": "cbr0", "cniVersion": "0.4.0", "plugins": [
              {"type": "flannel", "delegate": {"hairpinMode": true, "isDefaultGateway": true}},
              {"type": "portmap", "capabilities": {"portMappings": true}}]}
    - name: local-path
      chart: local-path-provisioner
      version: %s
      repository: %s
      namespace: local-path-storage
      podSecurity: privileged
      values:
        storageClass: {defaultClass: true}
    - name: metrics-server
      chart: metrics-server
      version: %s
      repository: %s
      namespace: kube-system
      values:
        image: {tag: %s}
        args: [--kubelet-insecure-tls]
    - name: extras
      manifests: %s
      namespace: extras
`, flannel.Version, mir.ChartsOCI(), flRepo, flTag, cniRepo, cniTag,
		strings.TrimPrefix(lab.LocalPathVersion, "v"), mir.ChartsURL(), lab.MetricsServerChart, mir.ChartsOCI(), lab.MetricsServerVersion, extras)
	c := newCluster(t, lab.Options{Hosts: 3, ControlPlanes: 1}, pulled, m.KubernetesVersion, settings)
	c.Mirror = mir
	start := time.Now()
	if _, stderr, code := RunClusterctl(t, append([]string{"artifacts", "pull", "-i", c.Inventory, "--dir", pulled}, mir.Flags()...)...); code != 0 {
		t.Fatalf("artifacts pull -i from the lab mirror: exit %d\n%s", code, stderr)
	}
	t.Logf("artifacts pull with the add-ons: %s", time.Since(start).Round(100*time.Millisecond))
	c.Up(t)

	list := addonsList(t, c)
	for _, n := range []string{"flannel", "local-path", "metrics-server", "extras"} {
		if r := list[n]; r.Status != "deployed" || r.Revision != 1 {
			t.Fatalf("after up, add-on %s: %+v (all: %v)", n, r, list)
		}
	}
	if got := c.MustK(t, "get", "configmap", "-n", "extras", "extras", "-o", "jsonpath={.data.greeting}"); got != "hello" {
		t.Errorf("the manifests add-on's ConfigMap: %q", got)
	}

	t.Run("flannel's chart carries Pods' traffic: every pair of nodes over TCP and UDP, a Service by its name (make test-long: the conformance suite's networking part)", func(t *testing.T) {
		if os.Getenv(LongEnv) != "" {
			ConformanceRun{Name: "addons-network", Label: "Conformance", Focus: conformanceNetwork, Network: ", the pod network flannel's chart (an add-on)"}.Run(t, c)
			return
		}
		// ~20 s where the conformance run takes ~130 s; make test runs that on the bridge network (TestUp).
		c.LoadProbe(t, "cp1", "w1", "w2")
		ips := ProbePods(t, c, "cp1", "w1", "w2")
		CheckPodPairs(t, c, ips)
		CheckServiceByName(t, c, "w2", "cp1", "w1")
	})

	t.Run("a PVC of the default StorageClass binds and a Pod writes to it", func(t *testing.T) {
		pod := `apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 64Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: writer, namespace: default}
spec:
  restartPolicy: Never
  containers:
    - name: w
      image: docker.io/library/busybox:latest
      imagePullPolicy: Never
      command: [sh, -c, "echo written > /data/file && cat /data/file"]
      securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
      volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]
`
		if _, err := c.K(t, pod, "apply", "-f", "-"); err != nil {
			t.Fatal(err)
		}
		c.MustWait(t, "pod/writer", "jsonpath={.status.phase}=Succeeded", 3*time.Minute)
		if phase := c.MustK(t, "get", "pvc", "data", "-o", "jsonpath={.status.phase}"); phase != "Bound" {
			t.Errorf("PVC: %s", phase)
		}
		if logs := c.MustK(t, "logs", "writer"); strings.TrimSpace(logs) != "written" {
			t.Errorf("the Pod's output: %q", logs)
		}
	})

	t.Run("kubectl top nodes lists every node", func(t *testing.T) {
		deadline := time.Now().Add(3 * time.Minute)
		for {
			out, err := c.K(t, "", "top", "nodes", "--no-headers")
			if err == nil && len(strings.Split(strings.TrimSpace(out), "\n")) == 3 {
				t.Logf("kubectl top nodes:\n%s", out)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("kubectl top nodes: %v\n%s", err, out)
			}
			time.Sleep(5 * time.Second)
		}
	})

	t.Run("a second up makes no new revision; a changed value makes exactly one", func(t *testing.T) {
		c.Up(t)
		if got := revisions(addonsList(t, c)); got != "flannel=1 local-path=1 metrics-server=1 extras=1" {
			t.Fatalf("after a second up: %s", got)
		}
		data, _ := os.ReadFile(c.Inventory)
		// A value of the Service's alone: the upgrade is one revision, with no Pod to roll out and wait for.
		changed := strings.Replace(string(data), "args: [--kubelet-insecure-tls]\n",
			"args: [--kubelet-insecure-tls]\n        service: {labels: {kubernetes.io/cluster-service: \"true\"}}\n", 1)
		if err := os.WriteFile(c.Inventory, []byte(changed), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, _, code := c.Run(t, "up", "--dry-run")
		if code != 0 || !strings.Contains(stdout, "would upgrade") || !strings.Contains(stdout, "+    kubernetes.io/cluster-service: \"true\"") {
			t.Errorf("up --dry-run (exit %d) shows no upgrade with the values' diff:\n%s", code, stdout)
		}
		c.Up(t)
		if got := revisions(addonsList(t, c)); got != "flannel=1 local-path=1 metrics-server=2 extras=1" {
			t.Fatalf("after a changed value: %s", got)
		}
		if got := c.MustK(t, "get", "service", "-n", "kube-system", "metrics-server", "-o", "jsonpath={.metadata.labels.kubernetes\\.io/cluster-service}"); got != "true" {
			t.Errorf("the changed value is not on the Service: label %q", got)
		}
	})

	t.Run("an add-on taken out of the inventory is uninstalled, the others stay", func(t *testing.T) {
		data, _ := os.ReadFile(c.Inventory)
		i := strings.Index(string(data), "    - name: extras\n")
		j := strings.Index(string(data), "      namespace: extras\n")
		if i < 0 || j < 0 {
			t.Fatal("no extras add-on in the inventory")
		}
		if err := os.WriteFile(c.Inventory, []byte(string(data)[:i]+string(data)[j+len("      namespace: extras\n"):]), 0o644); err != nil {
			t.Fatal(err)
		}
		c.Up(t)
		list := addonsList(t, c)
		if _, ok := list["extras"]; ok || revisions(list) != "flannel=1 local-path=1 metrics-server=2" {
			t.Fatalf("after taking extras out: %v", list)
		}
		if _, err := c.K(t, "", "get", "configmap", "-n", "extras", "extras"); err == nil || !strings.Contains(err.Error(), "NotFound") {
			t.Errorf("the manifests add-on's ConfigMap is still there: %v", err)
		}
	})

	t.Run("a release of the same name installed by hand is refused", func(t *testing.T) {
		flags := genericclioptions.NewConfigFlags(false)
		kubeconfig, ns := c.Admin(), "handmade"
		flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
		cfg := action.NewConfiguration()
		if err := cfg.Init(flags, ns, "secret"); err != nil {
			t.Fatal(err)
		}
		c.MustK(t, "create", "namespace", ns)
		inst := action.NewInstall(cfg)
		inst.ReleaseName, inst.Namespace, inst.WaitStrategy = "handmade", ns, kube.HookOnlyStrategy
		own := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "handmade", Version: "0.1.0"},
			Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: handmade\ndata: {owner: someone}\n")}}}
		if _, err := inst.Run(own, nil); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "mine")
		if err := os.MkdirAll(filepath.Join(dir, "templates"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: mine\nversion: 1.0.0\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "templates", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: handmade\ndata: {owner: clusterctl}\n"), 0o644)
		data, _ := os.ReadFile(c.Inventory)
		withMine := strings.Replace(string(data), "  addons:\n", "  addons:\n    - name: handmade\n      path: "+dir+"\n      namespace: handmade\n", 1)
		if err := os.WriteFile(c.Inventory, []byte(withMine), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, code := c.Run(t, "up")
		if code != 1 || !strings.Contains(stdout+stderr, "clusterctl did not install") {
			t.Fatalf("up with a release of someone else's of the add-on's name: exit %d\n%s", code, tail(stdout+stderr, 20))
		}
		if got := c.MustK(t, "get", "configmap", "-n", ns, "handmade", "-o", "jsonpath={.data.owner}"); got != "someone" {
			t.Errorf("someone else's release was changed: owner %q", got)
		}
	})
}
