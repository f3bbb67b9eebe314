package readiness

import (
	"errors"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
)

func pod(ns, name, node string, labels map[string]string, owner string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: owner, Name: "x"}}
	}
	return p
}

func pdb(ns, name string, sel *metav1.LabelSelector, allowed int32) policyv1.PodDisruptionBudget {
	return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: policyv1.PodDisruptionBudgetSpec{Selector: sel},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, CurrentHealthy: 1, DesiredHealthy: 1}}
}

func objects(r Report) string {
	var out []string
	for _, f := range r.Sorted() {
		out = append(out, f.Severity+" "+f.Object)
	}
	return strings.Join(out, "; ")
}

// A budget that allows no disruption blocks when it covers a Pod on a node the run drains; not when its
// Pods are elsewhere, are DaemonSet Pods (not evicted), are in another namespace, or when it allows one.
func TestPDBs(t *testing.T) {
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	pods := []corev1.Pod{
		pod("default", "web-1", "w1", map[string]string{"app": "web"}, "ReplicaSet"),
		pod("default", "agent-1", "w1", map[string]string{"app": "agent"}, "DaemonSet"),
		pod("other", "web-1", "w1", map[string]string{"app": "web"}, "ReplicaSet"),
		pod("default", "db-1", "w2", map[string]string{"app": "db"}, "StatefulSet"),
	}
	drained := map[string]bool{"w1": true}
	r := PDBs([]policyv1.PodDisruptionBudget{
		pdb("default", "web", web, 0),
		pdb("default", "web-lenient", web, 1),
		pdb("default", "agent", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}, 0),
		pdb("default", "db", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, 0),
		pdb("default", "none", nil, 0),
		pdb("other", "all", &metav1.LabelSelector{}, 0),
	}, pods, drained)
	if got, want := objects(r), "blocker PodDisruptionBudget default/web; blocker PodDisruptionBudget other/all"; got != want {
		t.Fatalf("findings: %s, want %s", got, want)
	}
	if m := r[0].Message; !strings.Contains(m, "Pod web-1 on w1") || !strings.Contains(m, "--force") || r[0].Check != CheckPDB {
		t.Errorf("message: %s", m)
	}
}

func node(name string, ready, cordoned bool) corev1.Node {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: cordoned},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "KubeletNotReady", Message: "container runtime is down"}}}}
}

// A Node not Ready blocks, unless the run left it mid-way; one cordoned by someone else is a warning, one
// the run cordoned is nothing.
func TestNodes(t *testing.T) {
	r := Nodes([]corev1.Node{node("cp1", true, false), node("w1", false, false), node("w2", false, true), node("w3", true, true), node("w4", true, true)},
		map[string]bool{"w2": true}, map[string]bool{"w4": true})
	if got, want := objects(r), "blocker Node w1; warning Node w2; warning Node w3"; got != want {
		t.Fatalf("findings: %s, want %s", got, want)
	}
	if !strings.Contains(r.Sorted()[0].Message, "container runtime is down") {
		t.Errorf("the reason is not named: %s", r.Sorted()[0].Message)
	}
}

// Only requests neither approved nor denied are pending.
func TestCSRs(t *testing.T) {
	now := time.Now()
	csr := func(name string, cond certificatesv1.RequestConditionType) certificatesv1.CertificateSigningRequest {
		c := certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Hour))},
			Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: "kubernetes.io/kubelet-serving", Username: "system:node:w1"}}
		if cond != "" {
			c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: cond}}
		}
		return c
	}
	r := CSRs([]certificatesv1.CertificateSigningRequest{csr("a", ""), csr("b", certificatesv1.CertificateApproved), csr("c", certificatesv1.CertificateDenied)}, now)
	if got := objects(r); got != "warning CertificateSigningRequest a" || !strings.Contains(r[0].Message, "pending for 2h0m0s") {
		t.Errorf("findings: %s (%v)", got, r)
	}
}

// A certificate that ends before the run could, with the margin, blocks unless the run renews it (a CA
// always blocks); one its kubelet rotates is a warning.
func TestCertificates(t *testing.T) {
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	soon, later := now.Add(3*time.Hour), now.Add(48*time.Hour)
	r := Certificates([]Cert{
		{Host: "cp1", Path: "/etc/kubernetes/pki/ca.crt", Subject: "kubernetes", NotAfter: soon, CA: true, Renewed: true},
		{Host: "cp1", Path: "/etc/kubernetes/pki/apiserver.crt", Subject: "kube-apiserver", NotAfter: soon, Renewed: true},
		{Host: "cp1", Path: "/etc/kubernetes/pki/front-proxy-client.crt", Subject: "front-proxy-client", NotAfter: soon},
		{Host: "w1", Path: "/var/lib/kubelet/pki/kubelet-client-current.pem", Subject: "system:node:w1", NotAfter: soon, Rotated: true},
		{Host: "w1", Path: "/etc/kubernetes/pki/ca.crt", Subject: "kubernetes", NotAfter: later, CA: true},
	}, now, 2*time.Hour, 24*time.Hour)
	want := "blocker certificate /etc/kubernetes/pki/ca.crt on cp1 (kubernetes); blocker certificate /etc/kubernetes/pki/front-proxy-client.crt on cp1 (front-proxy-client); warning certificate /var/lib/kubelet/pki/kubelet-client-current.pem on w1 (system:node:w1)"
	if got := objects(r); got != want {
		t.Fatalf("findings:\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(r.Sorted()[0].Message, "certs rotate --ca") {
		t.Errorf("CA: %s", r.Sorted()[0].Message)
	}
}

// A member that does not answer or reports an alarm blocks.
func TestEtcd(t *testing.T) {
	r := Etcd([]Member{{Host: "cp1"}, {Host: "cp2", Err: errors.New("connection refused")}, {Host: "cp3", Errors: []string{"alarm:NOSPACE"}}})
	if got := objects(r); got != "blocker etcd member on cp2; blocker etcd member on cp3" || !strings.Contains(r[1].Message, "NOSPACE") {
		t.Errorf("findings: %s %v", got, r)
	}
}

// The API server's metric: series parsed with their escapes, only those requested (1) kept; those the
// target removes block, those removed later do not.
func TestRemovedAPIs(t *testing.T) {
	text := `# HELP apiserver_requested_deprecated_apis [STABLE] Gauge of deprecated APIs that have been requested, broken out by API group, version, resource, subresource, and removed_release.
# TYPE apiserver_requested_deprecated_apis gauge
apiserver_requested_deprecated_apis{group="flowcontrol.apiserver.k8s.io",removed_release="1.32",resource="flowschemas",subresource="",version="v1beta3"} 1
apiserver_requested_deprecated_apis{group="example.com",removed_release="1.40",resource="widgets",subresource="status",version="v1alpha1"} 1
apiserver_requested_deprecated_apis{group="",removed_release="1.37",resource="odd\"name\\x",subresource="",version="v1"} 1
apiserver_requested_deprecated_apis{group="batch",removed_release="1.25",resource="cronjobs",subresource="",version="v1beta1"} 0
apiserver_requested_deprecated_apis{group="extra.io",removed_release="",resource="things",subresource="",version="v1beta1"} 1
apiserver_request_total{code="200",verb="GET"} 12345
`
	apis, err := ParseDeprecated(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(apis) != 4 || apis[1].String() != "widgets/status.v1alpha1.example.com" || apis[2].Resource != `odd"name\x` {
		t.Fatalf("parsed: %+v", apis)
	}
	r := RemovedAPIs("cp1", apis, version.MustParseSemantic("v1.37.2"))
	if got := objects(r); got != `blocker API flowschemas.v1beta3.flowcontrol.apiserver.k8s.io; blocker API odd"name\x.v1` {
		t.Errorf("findings: %s", got)
	}
	if !strings.Contains(r[0].Message, "removed in Kubernetes 1.32") || !strings.Contains(r[0].Message, "on cp1") {
		t.Errorf("message: %s", r[0].Message)
	}
	for _, bad := range []string{
		`apiserver_requested_deprecated_apis{group="a} 1`,
		`apiserver_requested_deprecated_apis{group="a"} one`,
		`apiserver_requested_deprecated_apis{group} 1`,
	} {
		if _, err := ParseDeprecated(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: parsed", bad)
		}
	}
}

// The report: blockers first; the checks --force would override.
func TestReport(t *testing.T) {
	r := Report{warning(CheckCSR, "CertificateSigningRequest a", "x"), blocker(CheckSkew, "versions", "y"), blocker(CheckPDB, "PodDisruptionBudget d/w", "z")}
	if got := objects(r); got != "blocker PodDisruptionBudget d/w; blocker versions; warning CertificateSigningRequest a" {
		t.Errorf("sorted: %s", got)
	}
	if got := strings.Join(r.Blockers().Checks(), ","); got != "pdb,skew" {
		t.Errorf("checks: %s", got)
	}
}
