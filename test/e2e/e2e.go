// Package e2e holds the end-to-end tests: clusterctl, built from this checkout, brings up real clusters on
// lab hosts with the lab's Kubernetes artifacts, and the tests check them with kubectl and client-go as a
// user would.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/test/lab"
	"github.com/clusterctl/clusterctl/test/lab/image"
	"github.com/clusterctl/clusterctl/test/lab/mirror"
	"github.com/clusterctl/clusterctl/transport"
)

// root is the module's directory.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Clusterctl builds bin/clusterctl from this checkout once per test binary.
func Clusterctl(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "clusterctl-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "clusterctl")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/clusterctl")
		cmd.Dir = root()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building clusterctl: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// LongEnv, when set (make test-long), has tests run their cases too long for make test in place of the
// shorter ones (a CA rotation in place of a leaf rotation).
const LongEnv = "CLUSTERCTL_E2E_LONG"

// longOnly skips a test make test leaves to make test-long, saying what make test covers of it instead.
func longOnly(t *testing.T, covered string) {
	t.Helper()
	if os.Getenv(LongEnv) == "" {
		t.Skipf("make test-long runs it (%s=1); make test covers %s", LongEnv, covered)
	}
}

// FaultsEnv, when set (make faults), runs the fault-injection and leak tests: whole commands on a lab
// cluster with faults injected, and commands repeated in one process.
const FaultsEnv = "CLUSTERCTL_E2E_FAULTS"

// Cluster is a lab whose inventory names the artifacts directory, and the tools to reach it.
type Cluster struct {
	Lab       *lab.Lab
	Inventory string
	Bin       string
	Kubectl   string
	StateDir  string
	// Mirror serves the lab's artifacts in the upstream layouts (bare clusters: their artifacts were
	// pulled from it).
	Mirror *mirror.Mirror
	// Version is the Kubernetes version.
	Version string
}

// NewCluster starts a lab of hosts (controlPlanes of them control-plane) and writes its inventory for an
// air-gapped install from the lab's artifacts. It skips when the machine cannot run a lab or has no
// artifacts.
func NewCluster(t *testing.T, hosts, controlPlanes int) *Cluster {
	t.Helper()
	return NewClusterWith(t, hosts, controlPlanes, "")
}

// NewClusterWith is NewCluster with more settings of the inventory's cluster section (YAML lines indented
// by two spaces).
func NewClusterWith(t *testing.T, hosts, controlPlanes int, settings string) *Cluster {
	t.Helper()
	artDir, m := lab.Artifacts(t)
	return newCluster(t, lab.Options{Hosts: hosts, ControlPlanes: controlPlanes}, artDir, m.KubernetesVersion, settings)
}

// NewBareCluster starts bare lab hosts (nothing but systemd, OpenSSH, sudo, iproute2 and iptables: no
// runtime), serves the lab's artifacts in the upstream download layouts (lab mirror), and pulls them with
// `clusterctl artifacts pull -i` into the directory the inventory names: the path of a user with fresh VMs
// (the inventory's settings choose what is pulled beyond the defaults: the pod network's images).
func NewBareCluster(t *testing.T, opts lab.Options, settings string) *Cluster {
	t.Helper()
	labDir, m := lab.Artifacts(t)
	mir, err := mirror.Start(context.Background(), labDir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mir.Close() })
	pulled := filepath.Join(t.TempDir(), "artifacts")
	opts.Bare = true
	c := newCluster(t, opts, pulled, m.KubernetesVersion, settings)
	c.Mirror = mir
	if _, stderr, code := RunClusterctl(t, append([]string{"artifacts", "pull", "-i", c.Inventory, "--dir", pulled}, mir.Flags()...)...); code != 0 {
		t.Fatalf("artifacts pull -i from the lab mirror: exit %d\n%s", code, stderr)
	}
	return c
}

// RunClusterctl runs clusterctl with args and returns stdout, stderr and the exit code.
func RunClusterctl(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(Clusterctl(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	t.Logf("clusterctl %s: exit %d in %s", strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond))
	return stdout.String(), stderr.String(), code
}

func newCluster(t *testing.T, opts lab.Options, artDir, version, settings string) *Cluster {
	t.Helper()
	l := lab.Start(t, opts)
	data, err := os.ReadFile(l.Inventory())
	if err != nil {
		t.Fatal(err)
	}
	inv := strings.Replace(string(data), "\n  name: "+l.Name+"\n", fmt.Sprintf("\n  name: %s\n  kubernetesVersion: %s\n  artifacts: %s\n%s",
		l.Name, version, artDir, settings), 1)
	path := filepath.Join(l.Dir, "cluster.yaml")
	if err := os.WriteFile(path, []byte(inv), 0o644); err != nil {
		t.Fatal(err)
	}
	return &Cluster{Lab: l, Inventory: path, Bin: Clusterctl(t), Kubectl: filepath.Join(artDir, "bin", "linux-"+runtime.GOARCH, "kubectl"),
		StateDir: filepath.Join(l.Dir, ".clusterctl", l.Name), Version: version}
}

// AddSettings adds lines (YAML indented by two spaces) to the cluster section of the inventory.
func (c *Cluster) AddSettings(t testing.TB, settings string) {
	t.Helper()
	data, err := os.ReadFile(c.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	inv := strings.Replace(string(data), "\n  artifacts: ", "\n"+settings+"  artifacts: ", 1)
	if inv == string(data) {
		t.Fatal("the inventory has no artifacts line to add settings before")
	}
	if err := os.WriteFile(c.Inventory, []byte(inv), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Admin is the admin kubeconfig up leaves in the state directory.
func (c *Cluster) Admin() string { return filepath.Join(c.StateDir, "admin.conf") }

// Run runs clusterctl with args (the inventory added) and returns stdout, stderr and the exit code.
func (c *Cluster) Run(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	return RunClusterctl(t, append(args, "-i", c.Inventory)...)
}

// NodeResult is one Node in up's result line.
type NodeResult struct {
	Name    string   `json:"name"`
	Roles   []string `json:"roles"`
	Ready   bool     `json:"ready"`
	Version string   `json:"version"`
}

// UpResult is the last line of `up --output json`.
type UpResult struct {
	Type            string            `json:"type"`
	Status          string            `json:"status"`
	Error           string            `json:"error"`
	Endpoint        string            `json:"endpoint"`
	AdminKubeconfig string            `json:"adminKubeconfig"`
	Unapproved      map[string]string `json:"unapprovedCSRs"`
	Nodes           []NodeResult      `json:"nodes"`
	Phases          []struct {
		Name       string `json:"name"`
		DurationMS int64  `json:"duration_ms"`
	} `json:"phases"`
	DurationMS int64 `json:"duration_ms"`
}

// Up runs `clusterctl up --output json`, checks that every line is a JSON object, and returns the result.
func (c *Cluster) Up(t testing.TB, args ...string) *UpResult {
	t.Helper()
	stdout, stderr, code := c.Run(t, append([]string{"up", "--output", "json"}, args...)...)
	var res *UpResult
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var probe map[string]any
		if err := json.Unmarshal(sc.Bytes(), &probe); err != nil {
			t.Fatalf("up --output json printed a line that is not JSON: %v\n%s", err, sc.Text())
		}
		if probe["play"] == "settled" && probe["message"] != nil {
			// Whether the run found anything to do, and if so why: what a re-run that changed files says.
			t.Logf("up: settled: %v", probe["message"])
		}
		if probe["type"] == "up_result" {
			res = &UpResult{}
			if err := json.Unmarshal(sc.Bytes(), res); err != nil {
				t.Fatal(err)
			}
		}
	}
	if res == nil || code != 0 || res.Status != "ok" {
		t.Fatalf("up failed (exit %d)\nstderr:\n%s\nlast output:\n%s", code, stderr, tail(stdout, 30))
	}
	var phases []string
	for _, p := range res.Phases {
		phases = append(phases, fmt.Sprintf("%s=%.1fs", p.Name, float64(p.DurationMS)/1000))
	}
	t.Logf("up: %.1fs (%s)", float64(res.DurationMS)/1000, strings.Join(phases, " "))
	return res
}

// K runs kubectl as the cluster's admin.
func (c *Cluster) K(t testing.TB, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(c.Kubectl, append([]string{"--kubeconfig", c.Admin(), "--request-timeout", "30s"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// MustK runs kubectl and fails the test on error.
func (c *Cluster) MustK(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.K(t, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// MustWait waits up to timeout for obj (kind/name) to exist and then for the condition (kubectl wait's --for)
// to hold. kubectl wait alone fails at once on an object not created yet, such as the Node of a kubelet that
// has its client certificate but has not registered.
func (c *Cluster) MustWait(t testing.TB, obj, cond string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		_, err := c.K(t, "", "get", obj, "-o", "name")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not there after %s: %v", obj, timeout, err)
		}
		time.Sleep(time.Second)
	}
	left := max(time.Until(deadline), time.Second).Round(time.Second)
	c.MustK(t, "wait", "--for="+cond, obj, "--timeout="+left.String())
}

// ProbeImage is the reference of the test workload's image.
const ProbeImage = "clusterctl.local/e2e/probe:1"

var (
	probeOnce sync.Once
	probeTar  string
	probeErr  error
)

// LoadProbe imports the probe's image (testdata/probe packed as an image, built once per test binary,
// beside its clusterctl) into containerd on hosts.
func (c *Cluster) LoadProbe(t testing.TB, hosts ...string) {
	t.Helper()
	start := time.Now()
	dir := filepath.Dir(Clusterctl(t))
	probeOnce.Do(func() {
		bin := filepath.Join(dir, "probe")
		build := exec.Command("go", "build", "-trimpath", "-o", bin, "./test/e2e/testdata/probe")
		build.Dir = root()
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			probeErr = fmt.Errorf("building probe: %w\n%s", err, out)
			return
		}
		tar := filepath.Join(dir, "probe.tar")
		if _, err := image.Write(tar, ProbeImage, []image.File{{Path: "/probe", Source: bin}},
			image.Config{Entrypoint: []string{"/probe"}, Arch: runtime.GOARCH}); err != nil {
			probeErr = err
			return
		}
		probeTar = tar
	})
	if probeErr != nil {
		t.Fatal(probeErr)
	}
	built := time.Now()
	c.ImportImage(t, probeTar, hosts...)
	t.Logf("the probe's image ready in %s, imported on %s in %s", built.Sub(start).Round(100*time.Millisecond),
		strings.Join(hosts, ", "), time.Since(built).Round(100*time.Millisecond))
}

// ImportImage imports an image archive into containerd (the Kubernetes namespace) on hosts.
func (c *Cluster) ImportImage(t testing.TB, tar string, hosts ...string) {
	t.Helper()
	for _, h := range hosts {
		f, err := os.Open(tar)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("ssh", "-F", c.Lab.SSHConfig(), h, "ctr -n k8s.io images import - >/dev/null")
		cmd.Stdin = f
		out, err := cmd.CombinedOutput()
		f.Close()
		if err != nil {
			t.Fatalf("importing %s on %s: %v\n%s", filepath.Base(tar), h, err, out)
		}
	}
}

// Put copies a local file to dst (mode 0755) on each host, written beside it and renamed into place.
func (c *Cluster) Put(t testing.TB, src, dst string, hosts ...string) {
	t.Helper()
	for _, h := range hosts {
		f, err := os.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		q := "'" + strings.ReplaceAll(dst, "'", `'\''`) + "'"
		cmd := exec.Command("ssh", "-F", c.Lab.SSHConfig(), h, "cat >"+q+".tmp && chmod 755 "+q+".tmp && mv "+q+".tmp "+q)
		cmd.Stdin = f
		out, err := cmd.CombinedOutput()
		f.Close()
		if err != nil {
			t.Fatalf("copying %s to %s:%s: %v\n%s", src, h, dst, err, out)
		}
	}
}

// ProbePodOn runs the probe (LoadProbe put its image on the node's host) as Pod name in default, labelled
// app=name, on the named node, and waits until it is Ready.
func (c *Cluster) ProbePodOn(t testing.TB, name, node string) {
	t.Helper()
	if _, err := c.K(t, `apiVersion: v1
kind: Pod
metadata: {name: `+name+`, namespace: default, labels: {app: `+name+`}}
spec:
  nodeName: `+node+`
  containers: [{name: probe, image: `+ProbeImage+`, imagePullPolicy: Never, args: [serve]}]
`, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	// 2 min: on the CI machine the -race unit tests share the 2 cores with the hosts.
	start := time.Now()
	if _, err := c.K(t, "", "wait", "--for=condition=Ready", "pod/"+name, "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	t.Logf("Pod %s Ready on %s in %s", name, node, time.Since(start).Round(100*time.Millisecond))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Hash is a digest of every regular file's path and content under /etc and /var/lib on a host, leaving out
// what a running cluster writes by itself (etcd's data, the kubelet's Pod state and certificates, CNI
// address allocations, systemd's timers) but keeping the kubelet's configuration, which clusterctl writes.
// One file system each (find -xdev): the containerd store, a separate mount, is left out.
func (c *Cluster) Hash(t testing.TB, host string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(c.Files(t, host)))
	return hex.EncodeToString(sum[:])
}

// Files lists the files Hash digests, a line each ("digest  path"), leaving out also the directories
// under /etc and /var/lib in prune.
func (c *Cluster) Files(t testing.TB, host string, prune ...string) string {
	t.Helper()
	expr := ""
	for _, p := range append([]string{"/var/lib/etcd", "/var/lib/kubelet", "/var/lib/cni", "/var/lib/systemd"}, prune...) {
		expr += " -o -path " + transport.ShellQuote(p)
	}
	return c.Lab.Run(t, host, `{ find /etc /var/lib -xdev \( `+strings.TrimPrefix(expr, " -o ")+` \) -prune -o -type f -print0; `+
		`for f in /var/lib/kubelet/config.yaml /var/lib/kubelet/kubeadm-flags.env; do if [ -e "$f" ]; then printf '%s\0' "$f"; fi; done; } | sort -z | xargs -0 -r sha256sum`)
}

// Subset writes an inventory beside the cluster's with only the named hosts (same cluster, same state
// directory) and returns a Cluster that uses it.
func (c *Cluster) Subset(t testing.TB, name string, hosts ...string) *Cluster {
	t.Helper()
	data, err := os.ReadFile(c.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	head, list, ok := strings.Cut(string(data), "\nhosts:\n")
	if !ok {
		t.Fatal("the inventory has no hosts list")
	}
	var keep []string
	for _, item := range strings.Split(list, "  - name: ")[1:] {
		h, _, _ := strings.Cut(item, "\n")
		for _, want := range hosts {
			if h == want {
				keep = append(keep, "  - name: "+item)
			}
		}
	}
	path := filepath.Join(filepath.Dir(c.Inventory), name+".yaml")
	if err := os.WriteFile(path, []byte(head+"\nhosts:\n"+strings.Join(keep, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := *c
	sub.Inventory = path
	return &sub
}

// Presented is the certificate a lab host serves on a port: the first of the handshake's chain (no client
// certificate is offered, so a server that asks for one ends the handshake after showing its own), to
// compare with the file the server was given.
func (c *Cluster) Presented(t testing.TB, host string, port int) *x509.Certificate {
	t.Helper()
	var addr string
	for _, h := range c.Lab.Hosts {
		if h.Name == host {
			addr = h.Address
		}
	}
	var got *x509.Certificate
	conf := &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // nothing is sent: the certificate is read, then compared
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) > 0 {
				got, _ = x509.ParseCertificate(raw[0])
			}
			return nil
		},
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort(addr, strconv.Itoa(port)), conf)
	if err == nil {
		conn.Close()
	}
	if got == nil {
		t.Fatalf("%s (%s) port %d presented no certificate: %v", host, addr, port, err)
	}
	return got
}

// Etcdctl runs etcdctl on a control-plane host against its local member.
func (c *Cluster) Etcdctl(t testing.TB, host, args string) string {
	t.Helper()
	lo := "127.0.0.1" // etcd's loopback client URL is of its node address's family
	for _, h := range c.Lab.Hosts {
		if h.Name == host && strings.Contains(h.Address, ":") {
			lo = "[::1]"
		}
	}
	return c.Lab.Run(t, host, "etcdctl --endpoints https://"+lo+":2379 --cacert /etc/kubernetes/pki/etcd/ca.crt "+
		"--cert /etc/kubernetes/pki/apiserver-etcd-client.crt --key /etc/kubernetes/pki/apiserver-etcd-client.key "+args)
}

// proxyClientTimeout bounds each request of StartProxyClient. It was 5 s: in TestUpgrade one request in
// about 1,500 timed out in several runs, in the last before the node it went to was touched, while w1's
// haproxy marked that API server DOWN with "Layer7 timeout, check duration: 5455ms" (its /readyz, etcd's
// included, unanswered for about 10 s, just after the images step had imported ~300 MB on four lab hosts
// that share this machine's one disk and two cores). A backend stalled by the lab's load is not the proxy
// failing over; refusals, resets and errors still fail at once, and a black hole still fails at 15 s.
// Then 30 s: in a make test run where every lab test took 2-2.5 times its usual time (TestDualStack 251 s
// against 77-105 s), one GET of ~780 through w1's proxy in TestGrowAndShrink's rotation of three
// control-plane nodes went unanswered for 15 s. Each stop of the client now logs its slowest request, and
// on a failure the proxy's log (which says which backend it marked down, and when).
const proxyClientTimeout = 30 * time.Second

// lastLine is the last line of a command's output (its result line with --output json).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func readFile(t testing.TB, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
