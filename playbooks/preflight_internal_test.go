package playbooks

import (
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/inventory"
	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/pki"
	"github.com/clusterctl/clusterctl/tasks/preflight"
)

// A node kubeadm joined has no clusterctl mark: its CA certificate gives the mark, and only when it is a CA
// and the node has a kubelet kubeconfig.
func TestMarkOf(t *testing.T) {
	is := &pki.Issuer{Algorithm: pki.Algorithm("ECDSA-P256"), Validity: time.Hour, CAValidity: time.Hour}
	ca, err := is.NewCA(pki.CAs()[0])
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := is.NewLeaf(pki.Spec{Name: "x", CommonName: "x"}, ca, nil)
	if err != nil {
		t.Fatal(err)
	}
	joined := map[string]bool{kubeadm.KubeletKubeconfig: true}
	want := MemberMark("lab", pki.CAHash(ca.Cert))
	for _, c := range []struct {
		name   string
		facts  *facts.Facts
		mark   string
		joined bool
	}{
		{"no facts", nil, "", false},
		{"clusterctl's mark", &facts.Facts{Member: "cluster=lab ca=sha256:1", CACert: string(pki.EncodeCert(ca.Cert)), Files: joined}, "cluster=lab ca=sha256:1", false},
		{"kubeadm join", &facts.Facts{CACert: string(pki.EncodeCert(ca.Cert)), Files: joined}, want, true},
		{"a CA but no kubelet kubeconfig", &facts.Facts{CACert: string(pki.EncodeCert(ca.Cert)), Files: map[string]bool{}}, "", false},
		{"not a CA", &facts.Facts{CACert: string(pki.EncodeCert(leaf.Cert)), Files: joined}, "", false},
		{"not a certificate", &facts.Facts{CACert: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", Files: joined}, "", false},
	} {
		mark, j := markOf("lab", c.facts)
		if mark != c.mark || j != c.joined {
			t.Errorf("%s: mark %q joined %v, want %q %v", c.name, mark, j, c.mark, c.joined)
		}
	}
}

// A node whose facts show an established connection to the first control-plane node's API port (a joined
// kubelet's) reaches it: preflight probes it no more (here, a probe would need connections the Env has not).
func TestReachabilityTakesConnections(t *testing.T) {
	inv := &inventory.Inventory{}
	inv.Cluster.APIServer.BindPort = 6443
	inv.Hosts = []inventory.Host{
		{Name: "cp1", Address: "10.0.0.10", Roles: []inventory.Role{inventory.RoleControlPlane}},
		{Name: "w1", Address: "10.0.0.11", Roles: []inventory.Role{inventory.RoleWorker}},
		{Name: "w2", Address: "10.0.0.12", Roles: []inventory.Role{inventory.RoleWorker}},
	}
	hosts := []*inventory.Host{&inv.Hosts[0], &inv.Hosts[1], &inv.Hosts[2]}
	byHost := map[string]*PreflightHost{
		"cp1": {Name: "cp1", Facts: &facts.Facts{Listening: []facts.Listener{{Addr: "0.0.0.0", Port: 6443}}}},
		"w1":  {Name: "w1", Facts: &facts.Facts{Connections: []facts.Listener{{Addr: "10.0.0.10", Port: 6443}}}},
		"w2":  {Name: "w2", Facts: &facts.Facts{Connections: []facts.Listener{{Addr: "::ffff:10.0.0.10", Port: 6443}}}},
	}
	if p := reachProbes(inv, hosts, func(string) bool { return true }); len(p) != 1 || len(p[0].from) != 2 {
		t.Fatalf("probes %+v: want the API port from w1 and w2", p)
	}
	var found []preflight.Finding
	add := func(f ...preflight.Finding) { found = append(found, f...) }
	if err := reachability(t.Context(), &Env{EnvConfig: EnvConfig{Inv: inv, Hosts: hosts}}, hosts, byHost, add); err != nil || len(found) > 0 {
		t.Errorf("reachability: %v, findings %v", err, found)
	}
}
