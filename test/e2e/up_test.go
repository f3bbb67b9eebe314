package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/clusterctl/clusterctl/tasks/apiclient"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/test/lab"
)

// TestUp brings up one control-plane node and two workers from bare lab hosts (no runtime: clusterctl
// installs containerd, runc, the CNI plugins from artifacts pulled from the lab's mirror of the upstream
// layouts), then checks what a user of the cluster relies on (among it the focused part of Kubernetes' own
// [Conformance] tests), and that reset leaves the hosts bare again.
func TestUp(t *testing.T) {
	// Leaf certificates of 30 days, so that check-expiration has something expiring soon to report.
	c := NewBareCluster(t, lab.Options{Hosts: 3, ControlPlanes: 1}, "  certificates:\n    validity: 30d\n  etcd:\n    snapshots: {keep: 2}\n")
	if out := c.Lab.Run(t, "w1", "command -v containerd runc crictl kubelet haproxy; test -e /opt/cni/bin && echo /opt/cni/bin; true"); strings.TrimSpace(out) != "" {
		t.Fatalf("the bare host w1 has a runtime before up:\n%s", out)
	}
	sysctls := map[string]string{"cp1": Sysctls(t, c, "cp1"), "w1": Sysctls(t, c, "w1")}
	appendFile(t, c.Inventory, upHooks)
	res := c.Up(t)

	t.Run("the inventory's hooks ran where and when they say, with their environment", func(t *testing.T) {
		for h, want := range map[string]string{"cp1": "up.before cp1 0", "w1": "up.before w1 0\nup.after w1 0", "w2": "up.before w2 0\nup.after w2 0"} {
			if got := strings.TrimSpace(c.Lab.Run(t, h, "cat "+hookLog)); got != want {
				t.Errorf("%s's hook log:\n%s\nwant:\n%s", h, got, want)
			}
		}
		// A failing hook stops the command, naming the host, the hook and its stderr, before anything is
		// pushed (an inventory of the same cluster with one more hook).
		failing := filepath.Join(filepath.Dir(c.Inventory), "failing-hook.yaml")
		appendFile(t, failing, string(readFile(t, c.Inventory))+"      - {run: \"echo no disk >&2; exit 3\", roles: [worker]}\n")
		_, stderr, code := RunClusterctl(t, "up", "-i", failing)
		if code != 1 || !strings.Contains(stderr, `hook up.before "echo no disk >&2; exit 3" failed: exit status 3: no disk`) || !strings.Contains(stderr, "hooks up.before") {
			t.Errorf("up with a failing hook: exit %d, want 1 naming the hook and its stderr\n%s", code, tail(stderr, 30))
		}
		for _, h := range []string{"cp1", "w1"} {
			c.Lab.Run(t, h, "rm -f "+hookLog)
		}
	})

	t.Run("kubeconfig user: a certificate of the cluster CA, its group's RBAC and nothing more", func(t *testing.T) {
		conf := filepath.Join(t.TempDir(), "alice.conf")
		if _, stderr, code := c.Run(t, "kubeconfig", "user", "alice", "--group", "e2e-viewers", "--ttl", "1h", "--out", conf); code != 0 {
			t.Fatalf("kubeconfig user: exit %d\n%s", code, stderr)
		}
		c.MustK(t, "create", "clusterrolebinding", "e2e-viewers", "--clusterrole", "view", "--group", "e2e-viewers")
		alice := func(args ...string) (string, error) {
			out, err := exec.Command(c.Kubectl, append([]string{"--kubeconfig", conf, "--request-timeout", "30s"}, args...)...).CombinedOutput()
			return string(out), err
		}
		if out, err := alice("auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}"); err != nil || !strings.HasPrefix(out, "alice ") || !strings.Contains(out, "e2e-viewers") {
			t.Errorf("auth whoami as alice: %v\n%s", err, out)
		}
		if out, err := alice("get", "pods", "-n", "kube-system", "-o", "name"); err != nil || !strings.Contains(out, "pod/") {
			t.Errorf("alice cannot view: %v\n%s", err, out)
		}
		if out, err := alice("create", "namespace", "alice-was-here"); err == nil || !strings.Contains(out, "forbidden") {
			t.Errorf("alice could create a namespace: %v\n%s", err, out)
		}
		if out, _, code := c.Run(t, "kubeconfig", "user", "list"); code != 0 || !strings.Contains(out, "alice") || !strings.Contains(out, "e2e-viewers") {
			t.Errorf("kubeconfig user list: exit %d\n%s", code, out)
		}
		// Without cluster.kubeadmJoin, no binding lets a kubeadm token's node client request be approved.
		if out, err := c.K(t, "", "get", "clusterrolebinding", "kubeadm:node-autoapprove-bootstrap", "-o", "name"); err == nil || !strings.Contains(err.Error(), "NotFound") {
			t.Errorf("kubeadm's auto-approval is bound by default: %v %s", err, out)
		}
	})

	t.Run("the runtime clusterctl installed runs the Pods", func(t *testing.T) {
		out := c.Lab.Run(t, "w1", "containerd --version; crictl ps --name kube-proxy -q | grep -c .; systemctl show -p FragmentPath containerd")
		if !strings.Contains(out, "containerd/v2 2.") || !strings.Contains(out, "\n1\n") || !strings.Contains(out, "FragmentPath=/etc/systemd/system/containerd.service") {
			t.Errorf("w1's runtime:\n%s", out)
		}
		// Every kube-system Pod (static Pods and add-ons) names its image by tag and digest, and runs that
		// digest: the image imported from the verified archive, nothing else under its tag.
		pods := c.MustK(t, "get", "pods", "-n", "kube-system", "-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.containers[0].image} {.status.containerStatuses[0].imageID}{"\n"}{end}`)
		n := 0
		for _, line := range strings.Split(strings.TrimSpace(pods), "\n") {
			f := strings.Fields(line)
			if len(f) != 3 {
				continue // not started yet
			}
			n++
			_, digest, pinned := strings.Cut(f[1], "@")
			if !pinned || !strings.HasSuffix(f[2], "@"+digest) {
				t.Errorf("%s runs %s (image %s): want name:tag@sha256:... and that digest", f[0], f[2], f[1])
			}
		}
		if n < 5 {
			t.Errorf("%d kube-system Pods with a container status:\n%s", n, pods)
		}
	})

	t.Run("a corrupted mirror file is refused and nothing of it is kept", func(t *testing.T) {
		file := filepath.Join(c.Mirror.Root, "release", c.Version, "bin", "linux", runtime.GOARCH, "kubelet")
		good := readFile(t, file)
		bad := append([]byte(nil), good...)
		bad[len(bad)/2] ^= 0xff
		replace := func(data []byte) {
			if err := os.WriteFile(file+".new", data, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(file+".new", file); err != nil {
				t.Fatal(err)
			}
		}
		replace(bad)
		defer replace(good)
		out := filepath.Join(t.TempDir(), "artifacts")
		_, stderr, code := RunClusterctl(t, append([]string{"artifacts", "pull", "--kubernetes-version", c.Version, "--dir", out}, c.Mirror.Flags()...)...)
		wantSum, gotSum := sha256.Sum256(good), sha256.Sum256(bad)
		for _, want := range []string{"bin/linux-" + runtime.GOARCH + "/kubelet", c.Mirror.URL + "/release/" + c.Version + "/bin/linux/" + runtime.GOARCH + "/kubelet",
			hex.EncodeToString(wantSum[:]), hex.EncodeToString(gotSum[:]), "checksum mismatch"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("the error does not name %q:\n%s", want, stderr)
			}
		}
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		for _, f := range []string{"bin/linux-" + runtime.GOARCH + "/kubelet", "bin/linux-" + runtime.GOARCH + "/kubelet.part", "manifest.json"} {
			if _, err := os.Stat(filepath.Join(out, f)); err == nil {
				t.Errorf("%s was kept", f)
			}
		}
	})

	t.Run("all nodes Ready", func(t *testing.T) {
		if len(res.Nodes) != 3 {
			t.Fatalf("up reports %d nodes, want 3: %+v", len(res.Nodes), res.Nodes)
		}
		for _, n := range res.Nodes {
			if !n.Ready {
				t.Errorf("node %s is not Ready", n.Name)
			}
		}
		out := c.MustK(t, "get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.taints[*].key}{\"\\n\"}{end}")
		if !strings.Contains(out, "cp1 node-role.kubernetes.io/control-plane") {
			t.Errorf("the control-plane node is not tainted:\n%s", out)
		}
	})

	t.Run("workers hold no CA key", func(t *testing.T) {
		for _, h := range []string{"w1", "w2"} {
			out := c.Lab.Run(t, h, "ls /etc/kubernetes/pki; find /etc/kubernetes /var/lib/kubelet -name '*.key'")
			if strings.TrimSpace(out) != "ca.crt" {
				t.Errorf("%s holds more than the CA certificate:\n%s", h, out)
			}
		}
	})

	t.Run("bootstrap token deleted, and the workers' bootstrap kubeconfig", func(t *testing.T) {
		out := c.MustK(t, "get", "secrets", "-n", "kube-system", "--field-selector", "type=bootstrap.kubernetes.io/token", "-o", "name")
		if strings.TrimSpace(out) != "" {
			t.Errorf("bootstrap tokens left: %s", out)
		}
		for _, h := range []string{"w1", "w2"} {
			if out := c.Lab.Run(t, h, "ls /etc/kubernetes"); strings.Contains(out, "bootstrap-kubelet.conf") || !strings.Contains(out, "kubelet.conf") {
				t.Errorf("%s: /etc/kubernetes holds %q, want kubelet.conf and no bootstrap-kubelet.conf (kubeadm's join removes it)", h, out)
			}
		}
	})

	t.Run("anonymous access only to cluster-info", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.Admin())
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(cfg.CAData)
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		for path, want := range map[string]int{
			"/api/v1/namespaces/kube-public/configmaps/cluster-info": 200,
			"/api/v1/namespaces": 403,
			"/api/v1/namespaces/kube-system/configmaps/kubeadm-config": 403,
			"/api/v1/namespaces/kube-system/secrets":                   403,
		} {
			resp, err := client.Get(cfg.Host + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("anonymous GET %s: %d, want %d", path, resp.StatusCode, want)
			}
		}
	})

	t.Run("pods on both workers reach each other, a Service and DNS; logs and exec work", func(t *testing.T) {
		c.LoadProbe(t, "w1", "w2")
		_, err := c.K(t, probeManifest, "apply", "-f", "-")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.K(t, "", "rollout", "status", "deployment/probe", "--timeout", "120s"); err != nil {
			out, _ := c.K(t, "", "get", "pods", "-o", "wide")
			t.Fatalf("%v\n%s", err, out)
		}
		out := c.MustK(t, "get", "pods", "-l", "app=probe", "-o", "jsonpath={range .items[*]}{.metadata.name} {.status.podIP} {.spec.nodeName}{\"\\n\"}{end}")
		type pod struct{ name, ip, node string }
		var pods []pod
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			if len(f) == 3 {
				pods = append(pods, pod{f[0], f[1], f[2]})
			}
		}
		if len(pods) != 2 || pods[0].node == pods[1].node {
			t.Fatalf("want one probe pod on each worker, got:\n%s", out)
		}
		exec := func(p pod, args ...string) (string, error) {
			out, err := c.K(t, "", append([]string{"exec", p.name, "--", "/probe"}, args...)...)
			return strings.TrimSpace(out), err
		}
		for i, p := range pods {
			other := pods[1-i]
			got, err := exec(p, "get", fmt.Sprintf("http://%s/", net.JoinHostPort(other.ip, "8080")))
			if err != nil || got != other.name {
				t.Errorf("pod on %s -> pod on %s: %q, %v", p.node, other.node, got, err)
			}
		}
		// Service rules follow the endpoints by a sync period of kube-proxy: a request made just after the
		// rollout may be retried, as a client would; every request must then succeed.
		names := []string{pods[0].name, pods[1].name}
		for i := 0; i < 4; i++ {
			var got string
			var err error
			for attempt := 0; attempt < 3; attempt++ {
				if got, err = exec(pods[i%2], "get", "http://probe.default.svc.cluster.local/"); err == nil {
					break
				}
				t.Logf("pod -> Service probe, attempt %d: %v", attempt+1, err)
				time.Sleep(time.Second)
			}
			if err != nil || !slices.Contains(names, got) {
				t.Errorf("pod -> Service probe: %q, %v", got, err)
			}
		}
		got, err := exec(pods[0], "resolve", "kubernetes.default")
		if err != nil || got != "10.96.0.1" {
			t.Errorf("kubernetes.default resolves to %q (%v), want 10.96.0.1", got, err)
		}
		logs := c.MustK(t, "logs", pods[1].name)
		if !strings.Contains(logs, "serving on :8080") {
			t.Errorf("kubectl logs: %q", logs)
		}
	})

	t.Run("check-expiration reads the hosts, matches the local PKI, fails within a window", func(t *testing.T) {
		stdout, stderr, code := c.Run(t, "certs", "check-expiration", "--output", "json")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		var report struct {
			Certificates []struct {
				Host, Path, State, Issuer string
				Residual                  time.Duration
			} `json:"certificates"`
		}
		if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &report); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		seen := map[string]bool{}
		for _, cert := range report.Certificates {
			seen[cert.Host+":"+cert.Path] = true
			if cert.State == "differs" {
				t.Errorf("%s %s differs from the state directory", cert.Host, cert.Path)
			}
			if strings.HasPrefix(cert.Path, "/etc/kubernetes/pki/") && cert.State != "match" {
				t.Errorf("%s %s: state %q, want match", cert.Host, cert.Path, cert.State)
			}
		}
		for _, want := range []string{"cp1:/etc/kubernetes/pki/apiserver.crt", "cp1:/etc/kubernetes/pki/etcd/server.crt", "cp1:/etc/kubernetes/admin.conf",
			"cp1:/etc/kubernetes/super-admin.conf", "cp1:/etc/kubernetes/pki/kubelet-serving-ca.crt", "w1:/etc/kubernetes/pki/ca.crt", "w1:/var/lib/kubelet/pki/kubelet-client-current.pem",
			"w2:/var/lib/kubelet/pki/kubelet-server-current.pem"} {
			if !seen[want] {
				t.Errorf("not reported: %s", want)
			}
		}
		if _, stderr, code := c.Run(t, "certs", "check-expiration", "--fail-within", "60d"); code != 1 || !strings.Contains(stderr, "apiserver.crt") {
			t.Errorf("--fail-within 60d with 30-day leaves: exit %d, want 1 naming apiserver.crt\n%s", code, stderr)
		}
		if _, stderr, code := c.Run(t, "certs", "check-expiration", "--fail-within", "20d"); code != 0 {
			t.Errorf("--fail-within 20d: exit %d\n%s", code, stderr)
		}
	})

	t.Run("certs rotate renews the control plane's certificates; a second run changes nothing", func(t *testing.T) {
		serial := func() map[string]string {
			stdout, stderr, code := c.Run(t, "certs", "check-expiration", "--output", "json")
			if code != 0 {
				t.Fatalf("certs check-expiration: exit %d\n%s", code, tail(stderr, 20))
			}
			var report struct {
				Certificates []struct{ Host, Path, State, NotAfter string } `json:"certificates"`
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &report); err != nil {
				t.Fatalf("certs check-expiration: %v\n%s", err, stdout)
			}
			out := map[string]string{}
			for _, c := range report.Certificates {
				out[c.Host+":"+c.Path] = c.NotAfter + " " + c.State
			}
			return out
		}
		before := serial()
		// etcd's running container as its mirror Pod reports it (the kubelet may not have reported it yet).
		etcdContainer := func() string {
			deadline := time.Now().Add(time.Minute)
			for {
				id, err := c.K(t, "", "-n", "kube-system", "get", "pod", "etcd-cp1", "-o", "jsonpath={.status.containerStatuses[0].containerID}")
				if err == nil && id != "" {
					return id
				}
				if time.Now().After(deadline) {
					t.Fatalf("etcd-cp1's container: %q, %v", id, err)
				}
				time.Sleep(time.Second)
			}
		}
		etcdBefore := etcdContainer()
		// A client of the single API server during the rotation: its restart is unavoidable here; measure it.
		cfg, err := clientcmd.BuildConfigFromFlags("", c.Admin())
		if err != nil {
			t.Fatal(err)
		}
		cfg.Timeout = 2 * time.Second
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		done := make(chan [3]int64)
		go func() {
			var ok, failed int64
			var gapStart time.Time
			var longestGap time.Duration
			for {
				select {
				case <-stop:
					done <- [3]int64{ok, failed, int64(longestGap)}
					return
				default:
				}
				_, err := kube.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{})
				if err == nil {
					ok++
					if !gapStart.IsZero() {
						if d := time.Since(gapStart); d > longestGap {
							longestGap = d
						}
						gapStart = time.Time{}
					}
				} else {
					failed++
					if gapStart.IsZero() {
						gapStart = time.Now()
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		// One mutating run at a time: while it runs, a second one here and an up from another
		// workstation are refused at once, naming it.
		other := c.OtherWorkstation(t)
		rotation := c.Background(t, "certs", "rotate", "--yes", "--fresh", "0s")
		CheckHeld(t, c, other, "certs rotate", "certs", "rotate", "--yes", "--fresh", "0s")
		stderr, code := rotation()
		close(stop)
		stats := <-done
		if code != 0 {
			t.Fatalf("certs rotate: exit %d\n%s", code, tail(stderr, 30))
		}
		t.Logf("during the rotation of the single control-plane node: %d requests ok, %d failed, longest outage %s",
			stats[0], stats[1], time.Duration(stats[2]).Round(10*time.Millisecond))
		after := serial()
		for k, v := range after {
			if strings.Contains(k, "cp1:/etc/kubernetes/pki/apiserver.crt") && v == before[k] {
				t.Errorf("%s not renewed: %s", k, v)
			}
			if strings.HasSuffix(v, " differs") {
				t.Errorf("%s differs from the state directory after rotation", k)
			}
		}
		if ready := c.MustK(t, "get", "nodes", "-o", "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{end}"); ready != "TrueTrueTrue" {
			t.Errorf("nodes Ready after rotation: %q", ready)
		}
		// etcd was not restarted (its keys kept: it reads its certificates at each connection); what every
		// server presents now is the renewed file.
		if after := etcdContainer(); after != etcdBefore {
			t.Errorf("etcd restarted by a rotation that kept its keys: container %s, then %s", etcdBefore, after)
		}
		for port, file := range map[int]string{2379: "etcd/server.crt", 2380: "etcd/peer.crt", 6443: "apiserver.crt"} {
			onDisk, err := pki.ParseCert([]byte(c.Lab.Run(t, "cp1", "cat /etc/kubernetes/pki/"+file)))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Presented(t, "cp1", port); !got.Equal(onDisk) {
				t.Errorf("cp1 port %d presents a certificate issued %s, not its renewed %s (issued %s)", port, got.NotBefore, file, onDisk.NotBefore)
			}
		}
		stdout, stderr, code := c.Run(t, "certs", "rotate", "--yes")
		if code != 0 || !strings.Contains(stdout, "nothing to do") {
			t.Errorf("second rotation: exit %d\n%s\n%s", code, stdout, tail(stderr, 10))
		}
	})

	t.Run("a killed run's lock: refused from another workstation until its Lease expires, then taken over", func(t *testing.T) {
		CheckTakeover(t, c)
	})
	t.Run("status reports every Node Ready and the cluster healthy", func(t *testing.T) {
		CheckStatus(t, c, "cp1", "w1", "w2")
	})
	t.Run("commands in a row share each host's login; with --ssh-persist 0 each logs in", func(t *testing.T) {
		CheckKeptConnections(t, c, "w2")
	})
	t.Run("diff: nothing on the settled cluster, a worker's hand-edited kubelet configuration, nothing after up", func(t *testing.T) {
		CheckDiff(t, c, "w1")
	})
	t.Run("the pod routes come back after networkd reconfigures a node's interface; one deleted by hand: diff names it, up puts it back", func(t *testing.T) {
		out := c.MustK(t, "get", "pods", "-l", "app=probe", "-o", "jsonpath={range .items[*]}{.metadata.name} {.status.podIP} {.spec.nodeName}{\"\\n\"}{end}")
		var f [][]string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f = append(f, strings.Fields(line))
		}
		if len(f) != 2 || len(f[0]) != 3 || len(f[1]) != 3 || f[0][2] == f[1][2] {
			t.Fatalf("want one probe Pod on each worker, got:\n%s", out)
		}
		CheckRoutesComeBack(t, c, f[0][2], f[0][0], f[1][2], f[1][1])
	})
	t.Run("manifests apply: a CRD and its custom resource in one stream, then unchanged", func(t *testing.T) {
		// What cni.plugin: manifests does with the user's files.
		kubeconfig, err := os.ReadFile(c.Admin())
		if err != nil {
			t.Fatal(err)
		}
		client, err := apiclient.New(kubeconfig, nil)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := apiclient.Decode([]byte(crdManifest))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		first, err := client.Apply(ctx, objs...)
		if err != nil {
			t.Fatal(err)
		}
		// The API server records who manages a Namespace's admission-set fields on the first re-apply (a
		// one-time managedFields update); from then on an unchanged apply must change nothing.
		var second []apiclient.Applied
		for i := 0; i < 2; i++ {
			objs, _ = apiclient.Decode([]byte(crdManifest))
			if second, err = client.Apply(ctx, objs...); err != nil {
				t.Fatal(err)
			}
		}
		if len(first) != 3 || !first[0].Changed || !first[2].Changed {
			t.Errorf("first apply: %+v", first)
		}
		for _, a := range second {
			if a.Changed {
				t.Errorf("second apply changed %s", a)
			}
		}
		if out := c.MustK(t, "get", "widgets.e2e.clusterctl.dev", "w1", "-n", "e2e", "-o", "jsonpath={.spec.size}"); out != "3" {
			t.Errorf("widget size %q", out)
		}
	})

	t.Run("a serving CSR naming an address that is not the node's is left unapproved", func(t *testing.T) {
		// A request made with w1's own kubelet credentials, for w1, but also naming 192.0.2.1.
		pemData := c.Lab.Run(t, "w1", "cat /var/lib/kubelet/pki/kubelet-client-current.pem")
		cfg, err := clientcmd.BuildConfigFromFlags("", c.Admin())
		if err != nil {
			t.Fatal(err)
		}
		nodeCfg := &rest.Config{Host: cfg.Host, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData,
			CertData: []byte(pemData), KeyData: []byte(pemData)}}
		kube, err := kubernetes.NewForConfig(nodeCfg)
		if err != nil {
			t.Fatal(err)
		}
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
			Subject:     pkix.Name{CommonName: "system:node:w1", Organization: []string{"system:nodes"}},
			DNSNames:    []string{"w1"},
			IPAddresses: []net.IP{net.ParseIP(c.Lab.Hosts[1].Address), net.ParseIP("192.0.2.1")},
		}, key)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		req, err := kube.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-foreign-san-"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
				SignerName: certificatesv1.KubeletServingSignerName,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating a CSR as node w1: %v", err)
		}
		// up again: the cluster is healthy, so it only looks at what is pending.
		again := c.Up(t)
		if why := again.Unapproved[req.Name]; !strings.Contains(why, "192.0.2.1") {
			t.Errorf("up did not report %s as left unapproved for its foreign address: %q (all: %v)", req.Name, why, again.Unapproved)
		}
		cond := c.MustK(t, "get", "csr", req.Name, "-o", "jsonpath={.status.conditions[*].type}")
		if cond != "" {
			t.Errorf("CSR %s has conditions %q, want none (pending)", req.Name, cond)
		}
	})

	t.Run("Kubernetes' own tests: the focused part of [Conformance]", func(t *testing.T) {
		RunConformance(t, c, ", from bare hosts")
	})

	t.Run("a scheduled etcd snapshot, a namespace deleted, restore from cp1:latest: it is back, every node Ready", func(t *testing.T) {
		snapshotRestore(t, c, []string{"cp1"}, []string{"w1", "w2"}, true)
	})

	t.Run("hardened by default: encryption at rest, audit log, Pod Security, profiling off; the key rotated (after the restore: a snapshot holds the old key's)", func(t *testing.T) { checkHardened(t, c, "cp1", "w1") })

	t.Run("dry runs of remove-node, certs rotate, etcd restore and reset say what they would do and change nothing", func(t *testing.T) {
		pkiBefore := dirDigest(t, filepath.Join(c.StateDir, "pki"))
		nodesBefore := c.MustK(t, "get", "nodes", "-o", "jsonpath={.items[*].spec.unschedulable}")
		for _, tc := range []struct {
			args []string
			want []string
		}{
			{[]string{"remove-node", "w2", "--dry-run"}, []string{"cordon w2", "drain: evict", "delete Node w2", "reset: remove /var/lib/kubelet", "dry run:"}},
			{[]string{"certs", "rotate", "--dry-run", "--fresh", "0"}, []string{"would renew", "cp1:", "dry run:"}},
			{[]string{"etcd", "restore", "--from", c.Snapshot(t), "--dry-run"}, []string{"can be restored onto cp1", "nothing was changed"}},
			{[]string{"reset", "--dry-run"}, []string{"run hook reset.before", "remove /var/lib/etcd", "dry run:"}},
		} {
			stdout, stderr, code := c.Run(t, tc.args...)
			for _, w := range tc.want {
				if code != 0 || !strings.Contains(stdout, w) {
					t.Errorf("%v: exit %d, stdout lacks %q\n%s\n%s", tc.args, code, w, stdout, tail(stderr, 20))
					break
				}
			}
		}
		if after := dirDigest(t, filepath.Join(c.StateDir, "pki")); after != pkiBefore {
			t.Error("a dry run changed the state directory's PKI")
		}
		if left, _ := filepath.Glob(filepath.Join(c.StateDir, ".dry-run-*")); len(left) > 0 {
			t.Errorf("certs rotate --dry-run left %v", left)
		}
		if after := c.MustK(t, "get", "nodes", "-o", "jsonpath={.items[*].spec.unschedulable}"); after != nodesBefore {
			t.Errorf("a dry run cordoned a node: %q, was %q", after, nodesBefore)
		}
		if out := c.Lab.Run(t, "cp1", "systemctl is-active kubelet; grep reset "+hookLog+"; true"); strings.TrimSpace(out) != "active" {
			t.Errorf("after the dry runs, cp1: %s", out)
		}
	})

	t.Run("reset leaves the hosts bare again", func(t *testing.T) {
		if _, stderr, code := c.Run(t, "reset", "--yes", "--remove-snapshots"); code != 0 {
			t.Fatalf("reset: exit %d\n%s", code, stderr)
		} else if !strings.Contains(stderr, "onFailure: continue") {
			t.Errorf("reset does not report its failed continue hook:\n%s", tail(stderr, 30))
		}
		for _, h := range []string{"cp1", "w1"} {
			// (up's re-runs ran its hooks again before)
			if got := strings.TrimSpace(c.Lab.Run(t, h, "cat "+hookLog+"; rm -f "+hookLog)); !strings.HasSuffix(got, "\nreset.before "+h+"\nreset.after "+h) {
				t.Errorf("%s's hook log after reset:\n%s", h, got)
			}
		}
		for _, h := range []string{"cp1", "w1"} {
			out := c.Lab.Run(t, h, "ls -A /usr/local/bin /opt /var/lib/containerd; ls -d /etc/containerd /etc/kubernetes /etc/cni /var/lib/kubelet /var/lib/etcd.before-restore /var/lib/clusterctl /etc/crictl.yaml /etc/systemd/system/containerd.service /etc/systemd/system/kubelet.service /var/lib/etcd-snapshots /usr/local/lib/clusterctl /etc/systemd/system/clusterctl-etcd-snapshot.timer 2>/dev/null; systemctl is-active containerd kubelet; true")
			if strings.TrimSpace(out) != "/opt:\n\n/usr/local/bin:\n\n/var/lib/containerd:\ninactive\ninactive" {
				t.Errorf("%s after reset:\n%s", h, out)
			}
			if left := ResetLeftovers(t, c, h, sysctls[h]); left != "" {
				t.Errorf("%s after reset:\n%s", h, left)
			}
		}
	})
}

// hookLog is where TestUp's hooks write.
const hookLog = "/var/tmp/clusterctl-e2e-hooks.log"

// upHooks are TestUp's inventory hooks: each writes its point, host and uid; one reset hook fails and goes
// on. hooks.up.before is the last list: failing-hook.yaml adds to it.
const upHooks = `hooks:
  reset:
    before:
      - {run: "echo cannot deregister >&2; exit 1", onFailure: continue}
      - echo "$CLUSTERCTL_COMMAND.$CLUSTERCTL_HOOK $CLUSTERCTL_HOST" >>` + hookLog + `
    after: ['echo "reset.after $CLUSTERCTL_HOST" >>` + hookLog + `']
  up:
    after:
      - {run: "echo \"$CLUSTERCTL_COMMAND.$CLUSTERCTL_HOOK $CLUSTERCTL_HOST $(id -u)\" >>` + hookLog + `", roles: [worker]}
    before:
      - echo "$CLUSTERCTL_COMMAND.$CLUSTERCTL_HOOK $CLUSTERCTL_HOST $(id -u)" >>` + hookLog + `
`

const crdManifest = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.e2e.clusterctl.dev
spec:
  group: e2e.clusterctl.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
---
apiVersion: v1
kind: Namespace
metadata:
  name: e2e
---
apiVersion: e2e.clusterctl.dev/v1
kind: Widget
metadata:
  name: w1
  namespace: e2e
spec:
  size: 3
`

const probeManifest = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: probe
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels: {app: probe}
  template:
    metadata:
      labels: {app: probe}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - labelSelector:
                matchLabels: {app: probe}
              topologyKey: kubernetes.io/hostname
      containers:
        - name: probe
          image: ` + ProbeImage + `
          imagePullPolicy: Never
          args: [serve]
          ports: [{containerPort: 8080}]
          readinessProbe:
            httpGet: {path: /, port: 8080}
            periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: probe
  namespace: default
spec:
  selector: {app: probe}
  ports:
    - port: 80
      targetPort: 8080
`
