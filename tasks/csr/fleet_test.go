package csr

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/clusterctl/clusterctl/inventory"
)

// dualStack is a dual-stack cluster whose inventory gives each host one IPv4 address (the IPv6 ones are
// learned from the hosts), and a worker named by DNS.
func dualStack() *inventory.Inventory {
	inv := &inventory.Inventory{Hosts: []inventory.Host{
		{Name: "cp1", NodeName: "cp1", Address: "10.0.0.1", Roles: []inventory.Role{inventory.RoleControlPlane}},
		{Name: "cp2", NodeName: "cp2", Address: "10.0.0.2", Roles: []inventory.Role{inventory.RoleControlPlane}},
		{Name: "w3", NodeName: "w3", Address: "10.0.0.13", Roles: []inventory.Role{inventory.RoleWorker}},
		{Name: "w4", NodeName: "w4", Address: "w4.example.com", Roles: []inventory.Role{inventory.RoleWorker}},
	}}
	inv.Cluster.Networking.ServiceSubnet = "10.96.0.0/12,fd01::/108"
	inv.Cluster.Networking.DNSDomain = "cluster.local"
	return inv
}

func servingRequest(t *testing.T, node string, ips ...string) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "csr-" + node}, Spec: certificatesv1.CertificateSigningRequestSpec{
		SignerName: certificatesv1.KubeletServingSignerName, Username: "system:node:" + node,
		Groups: []string{"system:nodes", "system:authenticated"}, Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		Request: request(t, "system:node:"+node, []string{"system:nodes"}, []string{node}, ips, nil),
	}}
}

// An address is approved for a host only when no other host of the cluster has it: the inventory's
// addresses first, whatever the hosts' order; then what earlier runs learned (the state directory's
// record); an address two hosts report is neither's.
func TestFleetLearnedAddresses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		learned  map[string]string
		recorded Learned
		node     string
		ips      []string
		refused  string // what the refusal names ("" when approved)
	}{
		{"own learned IPv6", map[string]string{"w3": "10.0.0.13,fd00::13"}, nil, "w3", []string{"10.0.0.13", "fd00::13"}, ""},
		{"add-node: a joining host claims a recorded host's IPv6", map[string]string{"w3": "10.0.0.13,fd00::2"},
			Learned{"cp2": {"fd00::2"}}, "w3", []string{"10.0.0.13", "fd00::2"}, "host cp2's (learned from it at an earlier run)"},
		{"the recorded host keeps it", map[string]string{"w3": "10.0.0.13,fd00::2"},
			Learned{"cp2": {"fd00::2"}}, "cp2", []string{"10.0.0.2", "fd00::2"}, ""},
		{"full run: two hosts report one address", map[string]string{"cp1": "10.0.0.1,fd00::2", "cp2": "10.0.0.2,fd00::2"},
			nil, "cp1", []string{"fd00::2"}, "learned from both host cp1 and host cp2"},
		{"full run: the other one is refused too", map[string]string{"cp1": "10.0.0.1,fd00::2", "cp2": "10.0.0.2,fd00::2"},
			nil, "cp2", []string{"fd00::2"}, "learned from both"},
		{"the first-listed host claims a later host's inventory address", map[string]string{"cp1": "10.0.0.2", "cp2": "10.0.0.2"},
			nil, "cp1", []string{"10.0.0.2"}, "host cp2's"},
		{"the later host keeps its inventory address", map[string]string{"cp1": "10.0.0.2", "cp2": "10.0.0.2"},
			nil, "cp2", []string{"10.0.0.2"}, ""},
		{"a DNS-named host claims a recorded address", map[string]string{"w4": "10.0.0.13"},
			nil, "w4", []string{"10.0.0.13"}, "host w3's"},
		{"a DNS-named host claims another's learned address", map[string]string{"w4": "fd00::1"},
			Learned{"cp1": {"fd00::1"}}, "w4", []string{"fd00::1"}, "host cp1's (learned from it at an earlier run)"},
		{"a DNS-named host's own learned address", map[string]string{"w4": "10.0.0.14"}, nil, "w4", []string{"10.0.0.14"}, ""},
		{"a learned address that is the kubernetes Service's", map[string]string{"w3": "10.0.0.13,fd01::1"},
			nil, "w3", []string{"fd01::1"}, "the kubernetes Service's address"},
		{"an IPv4-mapped form of another host's address", map[string]string{"w3": "::ffff:10.0.0.2"},
			nil, "w3", []string{"::ffff:10.0.0.2"}, "host cp2's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes, reserved := Fleet(dualStack(), parsed(tc.learned), tc.recorded)
			why := CheckServing(servingRequest(t, tc.node, tc.ips...), nodes, reserved)
			switch {
			case tc.refused == "" && why != "":
				t.Errorf("refused: %s", why)
			case tc.refused != "" && !strings.Contains(why, tc.refused):
				t.Errorf("got %q, want a refusal naming %q", why, tc.refused)
			}
		})
	}
}

// The record keeps each learned address for the host it was first learned from; a later claim by another
// host is not recorded but named.
func TestLearnedRecord(t *testing.T) {
	dir := t.TempDir()
	l, err := LoadLearned(dir)
	if err != nil || len(l) != 0 {
		t.Fatalf("no record: %v %v", l, err)
	}
	inv := dualStack()
	changed, conflicts := l.Learn(inv, parsed(map[string]string{"cp1": "10.0.0.1,fd00::1", "cp2": "10.0.0.2,FD00:0:0::2", "w4": "10.0.0.14"}))
	if !changed || len(conflicts) != 0 {
		t.Fatalf("first learned: changed %v, conflicts %v", changed, conflicts)
	}
	if err := l.Save(dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, LearnedFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record: %v %v", fi, err)
	}
	l, err = LoadLearned(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(l["cp2"], ","); got != "fd00::2" {
		t.Errorf("cp2 learned %q, want the canonical fd00::2 (the inventory's 10.0.0.2 is not recorded)", got)
	}
	changed, conflicts = l.Learn(inv, parsed(map[string]string{"w3": "10.0.0.13,fd00::2", "cp1": "10.0.0.1,fd00::1"}))
	if changed || len(conflicts) != 1 || !strings.Contains(conflicts[0], "host w3 reports fd00::2, which was learned from host cp2") {
		t.Errorf("a joining host claiming cp2's: changed %v, conflicts %q", changed, conflicts)
	}
	if _, conflicts = l.Learn(inv, parsed(map[string]string{"w4": "10.0.0.2"})); len(conflicts) != 1 || !strings.Contains(conflicts[0], "the inventory gives host cp2") {
		t.Errorf("a DNS-named host claiming cp2's inventory address: %q", conflicts)
	}
	if changed, conflicts = l.Learn(inv, parsed(map[string]string{"w3": "10.0.0.13,fd00::99", "w4": "fd00::99"})); changed || len(conflicts) != 2 {
		t.Errorf("two hosts reporting one new address: recorded for one (%v), conflicts %q", changed, conflicts)
	}
	if !l.Forget("cp2") || l.Forget("cp2") {
		t.Error("Forget")
	}
	for _, bad := range []string{`{"cp1": ["fd00::1%eth0"]}`, `{"cp1": ["FD00::1"]}`, `{"cp1": ["x"]}`, `[`} {
		if err := os.WriteFile(filepath.Join(dir, LearnedFile), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadLearned(dir); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// A serving request naming a learned address another registered Node reports is refused, whatever the
// state directory says (a cluster joined by an earlier clusterctl has no record); an address the
// inventory gives the requester stays its own.
func TestCheckRegistered(t *testing.T) {
	ctx := context.Background()
	nodes, reserved := Fleet(dualStack(), parsed(map[string]string{"w3": "10.0.0.13,fd00::2"}), nil)
	cp2 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp2"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}, {Type: corev1.NodeInternalIP, Address: "fd00::2"}, {Type: corev1.NodeHostName, Address: "cp2"},
	}}}
	// A Node claiming w3's inventory address does not take it from w3.
	w9 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w9"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.13"}}}}
	thief := servingRequest(t, "w3", "10.0.0.13", "fd00::2")
	if why := CheckServing(thief, nodes, reserved); why != "" {
		t.Fatalf("without the Nodes, the claim looks like w3's own learned address: %s", why)
	}
	if why := CheckRegistered(thief, []corev1.Node{*cp2, *w9}, reserved); !strings.Contains(why, "fd00::2 is Node cp2's") {
		t.Errorf("w3 claiming Node cp2's address: %q", why)
	}
	if why := CheckRegistered(servingRequest(t, "w3", "10.0.0.13"), []corev1.Node{*cp2, *w9}, reserved); why != "" {
		t.Errorf("w3's inventory address refused for what another Node reports: %s", why)
	}
	// The approver lists the Nodes and leaves the request pending.
	kube := fake.NewClientset(thief, cp2)
	a := &Approver{Kube: kube, Nodes: nodes, Reserved: reserved}
	if _, err := a.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if why := a.Unapproved()[thief.Name]; !strings.Contains(why, "Node cp2's") {
		t.Errorf("approver: %v", a.Unapproved())
	}
	if a.Approved("w3") {
		t.Error("approved")
	}
}

// parsed are learned addresses as the run resolves them, from their text.
func parsed(learned map[string]string) map[string]inventory.NodeAddrs {
	out := map[string]inventory.NodeAddrs{}
	for host, s := range learned {
		out[host] = inventory.ParseNodeAddrs(s)
	}
	return out
}
