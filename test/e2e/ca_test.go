package e2e

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// RotateCAKilled replaces the CAs of a cluster of one control-plane node (cp1) and workers while a workload
// runs with one replica on each of two workers and a client uses its service-account token throughout;
// the rotation is killed in the middle and resumed (TestOperateUp's cluster, in make test).
func RotateCAKilled(t *testing.T, c *Cluster, hosts []string) {
	workers := hosts[1:]
	c.LoadProbe(t, workers...)
	// The workload's replicas are Ready by a readiness probe, which a restarted kubelet reports NotReady
	// until its first probe (upstream's kubernetes/kubernetes#100277): the rotation restarts the workers'
	// kubelets one at a time, each node's Pods Ready again before the next, so the Service keeps an
	// endpoint throughout. One replica per worker, kept so by the rolling update the trust stage makes
	// (one replica replaced at a time, never a third beside them).
	startClients(t, c, "", `affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}]}}`,
		`strategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}`)
	oldCA := readFile(t, filepath.Join(c.StateDir, "pki", "ca.crt"))

	t.Run("killed during the reissue stage, the rotation resumes and finishes", func(t *testing.T) {
		c.RunKilled(t, "ca-reissue", 5*time.Second, "certs", "rotate", "--ca", "--yes")
		var st struct {
			Kind          string
			Done, Current []string
		}
		if err := json.Unmarshal(readFile(t, filepath.Join(c.StateDir, "runs", "ca-rotation.json")), &st); err != nil {
			t.Fatal(err)
		}
		if st.Kind != "ca-rotation" || !slices.Equal(st.Done, []string{"ca-generate", "ca-trust"}) || !slices.Equal(st.Current, []string{"ca-reissue"}) {
			t.Fatalf("journal %+v; want the reissue stage under way after generate and trust", st)
		}
		stdout, stderr, code := c.Run(t, "certs", "rotate", "--ca", "--yes", "--output", "json")
		if code != 0 {
			t.Fatalf("certs rotate --ca: exit %d\n%s\n%s", code, tail(stderr, 30), tail(stdout, 30))
		}
		var res struct {
			Type      string
			Resumed   int
			Restarted []string
			Stages    []struct{ Name string }
		}
		if err := json.Unmarshal([]byte(lastLine(stdout)), &res); err != nil {
			t.Fatalf("%v: %s", err, stdout)
		}
		if res.Type != "ca_rotate_result" || res.Resumed != 3 || len(res.Stages) != 3 {
			t.Errorf("result: %+v", res)
		}
		// The kubelets restart in turn, each node's Pods Ready again before the next (--max-unavailable 1);
		// the control-plane node's too, in the last stage's roll of the control plane, before the workers'
		// (its Pods but the static ones: kube-proxy's, CoreDNS's when it runs there).
		cpBack := false
		for _, line := range strings.Split(stdout, "\n") {
			var ev struct{ Play, Message string }
			if strings.Contains(line, "kubelet of ") && json.Unmarshal([]byte(line), &ev) == nil {
				t.Logf("%s: %s", ev.Play, ev.Message)
				cpBack = cpBack || ev.Play == "ca-finish" && strings.HasPrefix(ev.Message, "kubelet of "+hosts[0]+" restarted: its Node and the")
			}
		}
		if !cpBack {
			t.Errorf("the last stage does not say %s's restarted kubelet had its Node and Pods Ready again before the workers'", hosts[0])
		}
		restartedInTurn(t, "the resumed rotation", stdout, workers)
		if !strings.Contains(stdout, "a run of this state directory that is gone, taken over") {
			t.Errorf("the resumed run does not say it took over the killed run's lock:\n%s", tail(stdout, 20))
		}
		t.Logf("resumed: %s", lastLine(stdout))
	})

	t.Run("the new CA everywhere, the old one nowhere", func(t *testing.T) {
		for _, p := range []string{filepath.Join(c.StateDir, "pki", "rotation"), filepath.Join(c.StateDir, "runs", "ca-rotation.json")} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("the rotation's state is still there: %v", err)
			}
		}
		CheckNewCA(t, c, oldCA, hosts...)
	})

	t.Run("the workload and the token client kept working", func(t *testing.T) {
		time.Sleep(5 * time.Second)
		o := ClientOutcomes(t, c, workers...)
		t.Logf("token client during the rotation: %d ok (%d retries), %d failed; outages %v at %v (one control-plane node: its API server restarts)",
			o.OK, o.Retried, len(o.Failed), o.Outages, o.Spans)
		if o.OK == 0 {
			t.Fatal("no request of the token client succeeded")
		}
		for i, f := range o.Failed {
			if i < 40 {
				t.Logf("failed: %s", f)
			} else if i == 40 {
				t.Logf("and %d more failed", len(o.Failed)-40)
			}
			// With one API server its restarts are outages; a token refused, a certificate not trusted or
			// the workload unreachable are failures of the rotation.
			if rotationFailure(f) {
				t.Errorf("token client: %s", f)
			}
		}
		// After the failures' lines, so that the end of the test's output (all make test reports) shows it.
		for i, d := range o.Outages {
			if d > maxSingleAPIServerOutage {
				t.Errorf("an outage of %s (%s), longer than %s", d.Round(100*time.Millisecond), o.Spans[i], maxSingleAPIServerOutage)
			}
		}
		if out := c.MustK(t, "get", "nodes", "-o", "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{end}"); out != strings.Repeat("True", len(hosts)) {
			t.Errorf("nodes Ready: %q", out)
		}
		// A kubelet restarted by the rotation answers for its Pods' logs once it knows them again (until then
		// "NotFound ... pods/log", seen once 5 s after the rotation): tried for 30 s. A certificate the API
		// server does not trust fails all that time.
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Second) {
			if _, err = c.K(t, "", "logs", "deploy/sa-client", "--tail=1"); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Errorf("logs through the kubelet's new serving certificate: %v", err)
		}
	})
}

// maxSingleAPIServerOutage bounds each outage of a client of the kubernetes Service while the only API
// server restarts: its shutdown, etcd restarted alone, the new API server ready, kube-proxy restarted in
// place on every node (9.7–59 s measured in make test, and once over 90 s on CI, when kube-proxy's Pods
// were replaced after the new controller-manager and scheduler). Longer means a wait crept back in: a mirror Pod left stale, or
// kube-proxy reconnecting under its back-off (outages of 62–131 s before those were fixed).
const maxSingleAPIServerOutage = 90 * time.Second

// rotationFailure reports whether a failed outcome of the token client ("HOST HH:MM:SS.mmm fail api|web: ...")
// is one a CA rotation must not cause: the workload unreachable, a token refused, a certificate not trusted.
// Only the outcome is read: a stamp's milliseconds can read "401".
func rotationFailure(failed string) bool {
	fields := strings.SplitN(failed, " ", 3)
	if len(fields) < 3 {
		return true
	}
	outcome := fields[2]
	return strings.HasPrefix(outcome, "fail web") || strings.HasPrefix(outcome, "fail api: 401 ") ||
		strings.Contains(outcome, "Unauthorized") || strings.Contains(outcome, "x509") || strings.Contains(outcome, "certificate")
}

// StartClients runs, on node, a workload (Deployment web, two replicas, behind a Service) and a client of the
// API server that uses its service-account token (Deployment sa-client, see probe api); each outcome is a
// line in /var/log/probe on the node. It returns when the client has succeeded, with the log emptied.
func StartClients(t testing.TB, c *Cluster, node string) {
	t.Helper()
	startClients(t, c, "nodeSelector: {kubernetes.io/hostname: "+node+"}", "", "")
}

// Outcomes are what the token client saw: requests that succeeded (some after a retry, as client-go
// retries a GET whose connection a server going away closed), failures, and outages (each stretch from a
// failure to the next success, per client Pod).
type Outcomes struct {
	OK, Retried int
	Failed      []string
	Outages     []time.Duration
	// Spans say where and when each outage was: "HOST FROM-TO" (the failure, the success).
	Spans []string
}

// ClientOutcomes reads the token client's logs on hosts.
func ClientOutcomes(t testing.TB, c *Cluster, hosts ...string) Outcomes {
	t.Helper()
	var o Outcomes
	for _, h := range hosts {
		for _, file := range strings.Fields(c.Lab.Run(t, h, "ls /var/log/probe/*.log 2>/dev/null; true")) {
			var down time.Time
			for _, line := range strings.Split(c.Lab.Run(t, h, "cat "+file), "\n") {
				stamp, outcome, _ := strings.Cut(line, " ")
				at, err := time.Parse("15:04:05.000", stamp)
				switch {
				case err != nil:
					continue
				case strings.HasPrefix(outcome, "retried"):
					o.Retried++
				case outcome == "ok":
					o.OK++
					if !down.IsZero() {
						o.Outages = append(o.Outages, at.Sub(down))
						o.Spans = append(o.Spans, h+" "+down.Format("15:04:05.000")+"-"+stamp)
						down = time.Time{}
					}
				default:
					o.Failed = append(o.Failed, h+" "+line)
					if down.IsZero() {
						down = at
					}
				}
			}
		}
	}
	return o
}

// CheckNewCA checks that hosts trust only the state directory's (new) CA, that every kubelet's client and
// serving certificates are signed by it, and that cluster-info and kube-root-ca.crt hold it, not oldCA.
func CheckNewCA(t testing.TB, c *Cluster, oldCA []byte, hosts ...string) {
	t.Helper()
	caPEM := readFile(t, filepath.Join(c.StateDir, "pki", "ca.crt"))
	if string(caPEM) == string(oldCA) {
		t.Fatal("the state directory's CA is the old one")
	}
	ca := parseCert(t, caPEM)
	servingCA := parseCert(t, readFile(t, filepath.Join(c.StateDir, "pki", "kubelet-serving-ca.crt")))
	for _, h := range hosts {
		if got := c.Lab.Run(t, h, "cat /etc/kubernetes/pki/ca.crt"); got != string(caPEM) {
			t.Errorf("%s: ca.crt is not the new CA alone:\n%s", h, got)
		}
		// Client certificates are the new cluster CA's, serving certificates the new kubelet serving CA's.
		for f, want := range map[string]*x509.Certificate{"/var/lib/kubelet/pki/kubelet-client-current.pem": ca, "/var/lib/kubelet/pki/kubelet-server-current.pem": servingCA} {
			cert := parseCert(t, []byte(c.Lab.Run(t, h, "sed -n '/BEGIN CERTIFICATE/,/END CERTIFICATE/p' "+f)))
			if err := cert.CheckSignatureFrom(want); err != nil {
				t.Errorf("%s: %s is not signed by the new %s: %v", h, f, want.Subject.CommonName, err)
			}
		}
		if out := c.Lab.Run(t, h, "ls /etc/kubernetes/pki/ca-signer.crt /etc/kubernetes/pki/kubelet-serving-ca-signer.crt 2>/dev/null; true"); out != "" {
			t.Errorf("%s: the rotation's signer files are left: %s", h, out)
		}
	}
	info := c.MustK(t, "get", "configmap", "-n", "kube-public", "cluster-info", "-o", "jsonpath={.data.kubeconfig}")
	if strings.Count(info, "certificate-authority-data:") != 1 || strings.Contains(info, encodeB64(oldCA)) || !strings.Contains(info, encodeB64(caPEM)) {
		t.Errorf("cluster-info does not hold the new CA alone:\n%s", info)
	}
	if root := c.MustK(t, "get", "configmap", "-n", "default", "kube-root-ca.crt", "-o", "jsonpath={.data.ca\\.crt}"); root != string(caPEM) {
		t.Errorf("kube-root-ca.crt is not the new CA alone:\n%s", root)
	}
	stdout, stderr, code := c.Run(t, "certs", "check-expiration", "--output", "json")
	if code != 0 {
		t.Fatalf("check-expiration: exit %d\n%s", code, tail(stderr, 20))
	}
	var report struct {
		Certificates []struct{ Host, Path, State string }
	}
	if err := json.Unmarshal([]byte(lastLine(stdout)), &report); err != nil {
		t.Fatal(err)
	}
	for _, r := range report.Certificates {
		if r.State == "differs" {
			t.Errorf("%s %s differs from the state directory", r.Host, r.Path)
		}
	}
}

func parseCert(t testing.TB, data []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("no certificate in %q", data)
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func encodeB64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }

func TestRotationFailure(t *testing.T) {
	for line, want := range map[string]bool{
		`w1 08:48:37.401 fail api: Get "https://10.96.0.1:443/api/v1/namespaces/default/configmaps/kube-root-ca.crt": context deadline exceeded`: false,
		`w1 08:47:39.962 fail api: Get "https://10.96.0.1:443/api": dial tcp 10.96.0.1:443: connect: network is unreachable`:                     false,
		`w1 08:47:39.962 fail api: 401 Unauthorized {"kind":"Status"}`:                                                                           true,
		`w1 08:47:39.962 fail api: Get "https://10.96.0.1:443/api": tls: failed to verify certificate: x509: unknown authority`:                  true,
		`w1 08:47:39.962 fail web: Get "http://web": dial tcp: i/o timeout`:                                                                      true,
		`garbage`: true,
	} {
		if got := rotationFailure(line); got != want {
			t.Errorf("rotationFailure(%q) = %v, want %v", line, got, want)
		}
	}
}
