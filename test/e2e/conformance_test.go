package e2e

import (
	"bufio"
	"cmp"
	"encoding/xml"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/tasks/artifacts"
	"github.com/clusterctl/clusterctl/test/lab"
	"github.com/clusterctl/clusterctl/test/lab/mirror"
)

// The [Conformance] tests of DNS and Services: in both parts below.
const (
	conformanceDNS      = `\[sig-network\] DNS `
	conformanceServices = `\[sig-network\] Services should (serve|be able to (create|change)|find|delete|complete)`
)

// conformanceNetwork is the networking part of the [Conformance] suite (DNS, Services, the pod network's
// granular checks): what a pod network installed as an add-on must pass (TestAddons in make test-long).
var conformanceNetwork = []string{conformanceDNS, conformanceServices, `\[sig-network\] Networking Granular Checks`}

// conformanceFocused is the part of the [Conformance] suite make test runs: DNS and Services, RBAC and
// service accounts, the kubelet, API machinery, and one admission webhook (the API server calling a
// Service in the pod network). make conformance runs the rest, among them the other 21 webhook tests (a
// third of this part's time, the API server's own code), the four of Services' session affinity (each
// waits out affinity timeouts: a sixth of it) and the pod network's granular checks (netserver Pods on
// every node: 85 of its 400 test-seconds; make test's probe Pods check every pair of nodes over TCP and
// UDP, TestAddons and TestGrowAndShrink).
var conformanceFocused = []string{
	conformanceDNS,
	conformanceServices,
	`\[sig-auth\] ServiceAccounts `,
	`\[sig-node\] Kubelet `,
	`\[sig-api-machinery\] AdmissionWebhook \[Privileged:ClusterAdmin\] should be able to deny pod and configmap creation`,
	`\[sig-api-machinery\] Namespaces `,
}

// TestConformance brings up a cluster with clusterctl (one control-plane node and two workers; with
// CONTROL_PLANES=3, three behind the node-local proxy) and runs Kubernetes' own tests against it, built for
// the cluster's version (test/lab/conformance.sh): CLUSTERCTL_E2E_CONFORMANCE=full the whole [Conformance]
// suite (make conformance); CLUSTERCTL_E2E_CONFORMANCE=netpol the suite's [Feature:NetworkPolicy] tests in
// its place (make netpol: on flannel with cni.networkPolicy); CONFORMANCE_FOCUS=REGEXP the [Conformance]
// tests whose names match; CLUSTERCTL_E2E_CONFORMANCE=dualstack the suite's [Feature:IPv6DualStack] tests
// on a dual-stack cluster (make conformance-dualstack). CLUSTERCTL_E2E_CNI names the cluster's pod network
// (make conformance CNI=flannel; default the bridge) and, with netpol, the policy controller runs beside it;
// CLUSTERCTL_E2E_IP the hosts' and cluster's families (make conformance IP=dual: lab.sh up --ip), and
// CLUSTERCTL_E2E_PROXY kube-proxy's mode (PROXY=nftables). Without any of
// these it is skipped: make test runs the focused part on TestUp's cluster (RunConformance).
func TestConformance(t *testing.T) {
	mode := os.Getenv("CLUSTERCTL_E2E_CONFORMANCE")
	run := ConformanceRun{Name: "focused", Label: "Conformance", Focus: conformanceFocused}
	switch {
	case mode == "netpol":
		run = ConformanceRun{Name: "netpol", Label: "Feature:NetworkPolicy", Focus: []string{""}, Full: true}
	case mode == "dualstack":
		run = ConformanceRun{Name: "dualstack", Label: "Feature:IPv6DualStack", Focus: []string{""}, Full: true}
	case mode == "full":
		run = ConformanceRun{Name: "full", Label: "Conformance", Focus: []string{""}, Full: true}
	case os.Getenv("CONFORMANCE_FOCUS") != "":
		run.Name, run.Focus = "chosen", []string{os.Getenv("CONFORMANCE_FOCUS")}
	default:
		t.Skip("make test runs the focused [Conformance] part on TestUp's cluster; CLUSTERCTL_E2E_CONFORMANCE=full|netpol or CONFORMANCE_FOCUS=REGEXP runs this test (make conformance, make netpol)")
	}
	settings := ""
	cni := cmp.Or(os.Getenv("CLUSTERCTL_E2E_CNI"), "bridge")
	if os.Getenv("CLUSTERCTL_E2E_CNI") != "" || mode == "netpol" {
		settings, run.Network = "  cni:\n    plugin: "+cni+"\n", ", cni.plugin "+cni
	}
	if mode == "netpol" {
		settings, run.Network = settings+"    networkPolicy: true\n", run.Network+" with cni.networkPolicy"
	}
	ip := os.Getenv("CLUSTERCTL_E2E_IP")
	if mode == "dualstack" {
		ip = "dual"
	}
	if ip != "" {
		run.Network += ", hosts and cluster IP " + ip
	}
	if proxy := os.Getenv("CLUSTERCTL_E2E_PROXY"); proxy != "" {
		settings, run.Network = settings+"  kubeProxy:\n    mode: "+proxy+"\n", run.Network+", kube-proxy "+proxy
	}
	controlPlanes := 1
	if os.Getenv("CONTROL_PLANES") != "" {
		n, err := strconv.Atoi(os.Getenv("CONTROL_PLANES"))
		if err != nil || n < 1 {
			t.Fatalf("CONTROL_PLANES=%q", os.Getenv("CONTROL_PLANES"))
		}
		controlPlanes = n
	}
	dir, m := lab.Artifacts(t)
	c := newCluster(t, lab.Options{Hosts: controlPlanes + 2, ControlPlanes: controlPlanes, IP: ip}, dir, m.KubernetesVersion, settings)
	c.Up(t)
	run.Run(t, c)
}

// ConformanceRun is one run of Kubernetes' own tests on a cluster: which, and how to name the run.
type ConformanceRun struct {
	// Name names the run's directory under .lab/conformance/: focused, full, netpol, chosen.
	Name string
	// Label is the tests' ginkgo label: Conformance or Feature:NetworkPolicy.
	Label string
	// Focus is the regular expressions of the tests' names to run ("" for all of the label's).
	Focus []string
	// Full says the whole label runs: the summary does not list what the focus left out.
	Full bool
	// Network says, for the summary, what pod network the cluster runs, and on what hosts.
	Network string
}

// RunConformance runs make test's focused part of the [Conformance] suite (conformanceFocused) on the
// cluster: one control-plane node and two workers, the cluster's own version.
func RunConformance(t *testing.T, c *Cluster, network string) {
	ConformanceRun{Name: "focused", Label: "Conformance", Focus: conformanceFocused, Network: network}.Run(t, c)
}

// Run runs the tests built for the cluster's version (test/lab/conformance.sh), their images served by a
// registry on the lab's bridge: the parallel tests first, then the serial ones, then the failed ones again,
// alone. The JUnit reports and a summary are kept under .lab/conformance/. Tests known not to run in the
// lab are skipped by name with the reason (testdata/conformance-skips.txt).
func (r ConformanceRun) Run(t *testing.T, c *Cluster) {
	dir, _ := lab.ArtifactsOf(t, c.Version)
	suite := lab.Conformance(t, c.Version)
	skips := conformanceSkips(t)
	repoList := serveConformanceImages(t, c, suite, dir)
	controlPlanes := c.Lab.ControlPlanes()
	out := filepath.Join(root(), ".lab", "conformance", fmt.Sprintf("%s-%s-%dcp", r.Name, c.Version, controlPlanes))
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	procs := "4"
	if p := os.Getenv("CONFORMANCE_PROCS"); p != "" {
		procs = p
	}
	var skipRes []string
	for _, s := range skips {
		skipRes = append(skipRes, s.re)
	}
	start := time.Now()
	ginkgo(t, c, suite, repoList, out, "parallel", procs, r.Label+" && !Serial", r.Focus, skipRes)
	parallel := time.Since(start)
	start = time.Now()
	ginkgo(t, c, suite, repoList, out, "serial", "1", r.Label+" && Serial", r.Focus, skipRes)
	serial := time.Since(start)

	results := mergeJUnit(t, "["+r.Label+"]", filepath.Join(out, "junit-parallel.xml"), filepath.Join(out, "junit-serial.xml"))
	// The failed tests run once more, alone: on two cores shared by every host a probe with a timeout can
	// miss it under the other processes' load. A test that passes then is reported as such, with its first
	// failure; one that fails again is a failure. Many failures are not retried: something is wrong.
	var again []string
	for _, res := range results {
		if res.status != "passed" && res.status != "skipped" {
			again = append(again, regexp.QuoteMeta(specText(res.name)))
		}
	}
	retried := ""
	if len(again) > 0 && len(again) <= maxConformanceRetries {
		start = time.Now()
		ginkgo(t, c, suite, repoList, out, "retry", "1", r.Label, again, skipRes)
		results = retryResults(results, mergeJUnit(t, "["+r.Label+"]", filepath.Join(out, "junit-retry.xml")))
		retried = fmt.Sprintf(", %d failed test(s) run again alone %v", len(again), time.Since(start).Round(time.Second))
	}
	summary := summarize(results, skips, r.Focus, r.Full)
	summary = fmt.Sprintf("Kubernetes %s, %d control-plane node(s) and %d workers made by clusterctl up%s; [%s] tests: parallel (%s procs) %v, serial %v%s\n%s",
		c.Version, controlPlanes, len(c.Lab.Hosts)-controlPlanes, r.Network, r.Label, procs, parallel.Round(time.Second), serial.Round(time.Second), retried, summary)
	if err := os.WriteFile(filepath.Join(out, "summary.txt"), []byte(summary), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("conformance summary (%s):\n%s", out, summary)
	ran := 0
	for _, res := range results {
		switch res.status {
		case "passed":
			ran++
		case "skipped":
		default: // failed, panicked, timedout, interrupted, ...
			ran++
			t.Errorf("%s: %s", strings.ToUpper(res.status), res.name)
		}
	}
	if ran == 0 {
		t.Errorf("no [%s] test ran (focus %q)", r.Label, r.Focus)
	}
}

// conformanceSkip is a test known not to run in the lab: a regular expression of its name and why.
type conformanceSkip struct{ re, reason string }

// conformanceSkips reads testdata/conformance-skips.txt: "regexp<TAB>reason" per line; every skip has a
// reason.
func conformanceSkips(t *testing.T) []conformanceSkip {
	f, err := os.Open(filepath.Join("testdata", "conformance-skips.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var skips []conformanceSkip
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		l := sc.Text()
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		re, reason, ok := strings.Cut(l, "\t")
		if _, err := regexp.Compile(re); !ok || err != nil || strings.TrimSpace(reason) == "" {
			t.Fatalf("conformance-skips.txt:%d: want a regular expression, a tab and the reason: %q", line, l)
		}
		skips = append(skips, conformanceSkip{re, strings.TrimSpace(reason)})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return skips
}

// serveConformanceImages serves the suite's images from a registry on the lab's bridge (TLS, its CA
// trusted by containerd on every host through a hosts.toml beside clusterctl's), as a registry mirror would
// in an air-gapped site, and returns the image override (KUBE_TEST_REPO_LIST) that points the suite at it:
// e2e-test-images and etcd (the aggregator test runs one beside the sample API server; the cluster's own is
// on control-plane nodes only). The registry stops with the test. A test that pulls always (the pod
// certificate one) needs it; the others pull each image once per node.
func serveConformanceImages(t *testing.T, c *Cluster, suite, artifactsDir string) string {
	bridge := net.ParseIP(c.Lab.Hosts[0].Address).To4()
	if bridge == nil {
		t.Fatalf("lab address %s", c.Lab.Hosts[0].Address)
	}
	bridge[3] = 1
	caPEM, cert, pool := registryCA(t, bridge)
	reg, err := mirror.StartImageRegistry(bridge.String(), cert, pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	start := time.Now()
	refs := conformanceImages(t, suite)
	refs = append(refs, [2]string{"registry.k8s.io/etcd:" + etcdTag(t, artifactsDir), filepath.Join(artifactsDir, "images", "linux-"+runtime.GOARCH, "etcd.tar")})
	for _, r := range refs {
		if err := reg.Push(t.Context(), r[1], r[0], reg.Addr+"/"+strings.TrimPrefix(r[0], "registry.k8s.io/")); err != nil {
			t.Fatal(err)
		}
	}
	dir := "/etc/containerd/certs.d/" + reg.Addr
	hosts := fmt.Sprintf("server = \"https://%s\"\n\n[host.\"https://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = \"%s/ca.crt\"\n", reg.Addr, reg.Addr, dir)
	for _, h := range c.Lab.Hosts {
		for file, data := range map[string]string{"ca.crt": string(caPEM), "hosts.toml": hosts} {
			cmd := exec.Command("ssh", "-F", c.Lab.SSHConfig(), h.Name, "mkdir -p '"+dir+"' && cat >'"+dir+"/"+file+"'")
			cmd.Stdin = strings.NewReader(data)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: writing %s/%s: %v\n%s", h.Name, dir, file, err, out)
			}
		}
	}
	// The registry's files go with it: they are the test's, not the cluster's (a reset leaves a host's own
	// files where it found them).
	t.Cleanup(func() {
		for _, h := range c.Lab.Hosts {
			if out, err := c.Lab.SSH("", h.Name, "rm -rf '"+dir+"'"); err != nil {
				t.Errorf("%s: removing %s: %v\n%s", h.Name, dir, err, out)
			}
		}
	})
	list := filepath.Join(t.TempDir(), "repo-list.yaml")
	if err := os.WriteFile(list, []byte(fmt.Sprintf("promoterE2eRegistry: %s/e2e-test-images\ngcEtcdRegistry: %s\n", reg.Addr, reg.Addr)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d images served by the lab registry %s (pushed in %v)", len(refs), reg.Addr, time.Since(start).Round(100*time.Millisecond))
	return list
}

// etcdTag is the tag of the etcd image in the artifacts.
func etcdTag(t *testing.T, dir string) string {
	m, err := artifacts.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		if f.Kind == artifacts.KindImage && f.Name == "etcd" {
			_, tag, _ := strings.Cut(strings.TrimPrefix(f.Image, "registry.k8s.io/"), ":")
			return tag
		}
	}
	t.Fatalf("no etcd image in %s", dir)
	return ""
}

// conformanceImages is the images conformance.sh packed (images.txt: "ref file", or "ref - reason"): each
// reference and its archive.
func conformanceImages(t *testing.T, suite string) [][2]string {
	data, err := os.ReadFile(filepath.Join(suite, "images", "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var refs [][2]string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[1] != "-" {
			refs = append(refs, [2]string{f[0], filepath.Join(suite, "images", f[1])})
		}
	}
	if len(refs) == 0 {
		t.Fatalf("no image in %s/images/images.txt", suite)
	}
	return refs
}

// ginkgo runs e2e.test under ginkgo against the cluster, the tests with the labels (e2e.test labels each
// test with its SIG, Conformance, Serial, ...) whose names match a focus and no skip, the JUnit report in
// out/junit-<name>.xml.
func ginkgo(t *testing.T, c *Cluster, suite, repoList, out, name, procs, labels string, focus, skip []string) {
	bin := filepath.Join(suite, "bin", "linux-"+runtime.GOARCH)
	args := []string{"--procs=" + procs, "--timeout=5h", "--no-color", "--output-dir=" + out,
		"--junit-report=junit-" + name + ".xml", "--silence-skips", "--label-filter=" + labels}
	for _, f := range focus {
		if f != "" {
			args = append(args, "--focus="+f)
		}
	}
	for _, s := range skip {
		args = append(args, "--skip="+s)
	}
	// --num-nodes: the schedulable nodes (the workers). Without it the skeleton provider says -1, and tests
	// that need two nodes (the dual-stack Service checks among them) skip themselves.
	args = append(args, filepath.Join(bin, "e2e.test"), "--",
		"--kubeconfig="+c.Admin(), "--kubectl-path="+c.Kubectl, "--provider=skeleton", "--report-dir="+filepath.Join(out, name),
		"--num-nodes="+strconv.Itoa(len(c.Lab.Hosts)-c.Lab.ControlPlanes()),
		"--dump-logs-on-failure=false", "--disable-log-dump")
	log, err := os.Create(filepath.Join(out, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.CommandContext(t.Context(), filepath.Join(bin, "ginkgo"), args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Admin(), "KUBE_TEST_REPO_LIST="+repoList)
	err = cmd.Run()
	t.Logf("ginkgo %s: %v (log %s)", name, err, log.Name())
	// A failed test makes ginkgo exit non-zero: the report says which. No report is a failure of the run.
	if _, statErr := os.Stat(filepath.Join(out, "junit-"+name+".xml")); statErr != nil {
		t.Fatalf("ginkgo %s wrote no report: %v; the end of its log:\n%s", name, err, tail(readLog(log.Name()), 40))
	}
}

func readLog(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

type junitCase struct {
	Name    string  `xml:"name,attr"`
	Status  string  `xml:"status,attr"`
	Time    float64 `xml:"time,attr"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
	Failure *struct {
		Message string `xml:"message,attr"`
	} `xml:"failure"`
}

type conformanceResult struct {
	name, status, message string
	seconds               float64
	// retried: the test failed (message) and passed when run again alone.
	retried bool
}

// maxConformanceRetries bounds the failed tests run again: more failures than that are not load.
const maxConformanceRetries = 10

// specText is the text ginkgo matches --focus against: a JUnit test name without its labels ("[a, b]").
func specText(name string) string {
	if i := strings.LastIndex(name, " ["); i >= 0 && strings.HasSuffix(name, "]") && strings.Contains(name[i:], ", ") {
		return name[:i]
	}
	return name
}

// retryResults marks the failed results that passed in retry as passed on their second run.
func retryResults(results, retry []conformanceResult) []conformanceResult {
	passed := map[string]bool{}
	for _, r := range retry {
		if r.status == "passed" {
			passed[r.name] = true
		}
	}
	for i, r := range results {
		if r.status != "passed" && r.status != "skipped" && passed[r.name] {
			results[i].status, results[i].retried = "passed", true
		}
	}
	return results
}

// mergeJUnit reads the reports and gives each test whose name holds tag ("[Conformance]") its result: where
// it ran, else skipped.
func mergeJUnit(t *testing.T, tag string, files ...string) []conformanceResult {
	byName := map[string]conformanceResult{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Suites []struct {
				Cases []junitCase `xml:"testcase"`
			} `xml:"testsuite"`
		}
		if err := xml.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, s := range doc.Suites {
			for _, tc := range s.Cases {
				if !strings.Contains(tc.Name, tag) {
					continue
				}
				name := strings.TrimPrefix(tc.Name, "[It] ")
				r := conformanceResult{name: name, status: tc.Status, seconds: tc.Time}
				if tc.Failure != nil {
					r.message = tc.Failure.Message
				} else if tc.Skipped != nil {
					r.message = tc.Skipped.Message
				}
				if prev, ok := byName[name]; ok && prev.status != "skipped" {
					continue
				}
				byName[name] = r
			}
		}
	}
	out := make([]conformanceResult, 0, len(byName))
	for _, r := range byName {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// summarize counts the results and lists every failure and skip with its reason.
func summarize(results []conformanceResult, skips []conformanceSkip, focus []string, full bool) string {
	counts := map[string]int{}
	var failed, skipped, retried []string
	for _, r := range results {
		if !full && !matchesAny(r.name, focus) {
			continue
		}
		counts[r.status]++
		switch r.status {
		case "passed":
			if r.retried {
				retried = append(retried, fmt.Sprintf("  %s\n    first run: %s", r.name, firstLine(r.message)))
			}
		case "skipped":
			reason := r.message
			for _, s := range skips {
				if regexp.MustCompile(s.re).MatchString(r.name) {
					reason = "lab: " + s.reason
				}
			}
			skipped = append(skipped, fmt.Sprintf("  %s\n    %s", r.name, firstLine(reason)))
		default:
			failed = append(failed, fmt.Sprintf("  %s (%.0f s)\n    %s", r.name, r.seconds, firstLine(r.message)))
		}
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tests: %d; passed %d, failed %d, skipped %d\n", total, counts["passed"], total-counts["passed"]-counts["skipped"], counts["skipped"])
	if len(retried) > 0 {
		fmt.Fprintf(&b, "passed when run again alone (%d), after failing in the run with the others:\n%s\n", len(retried), strings.Join(retried, "\n"))
	}
	if len(failed) > 0 {
		fmt.Fprintf(&b, "failed:\n%s\n", strings.Join(failed, "\n"))
	}
	if len(skipped) > 0 {
		fmt.Fprintf(&b, "skipped:\n%s\n", strings.Join(skipped, "\n"))
	}
	return b.String()
}

func matchesAny(s string, res []string) bool {
	for _, re := range res {
		if regexp.MustCompile(re).MatchString(s) {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
