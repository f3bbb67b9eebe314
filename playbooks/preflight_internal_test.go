package playbooks

import (
	"testing"
	"time"

	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/kubeadm"
	"github.com/clusterctl/clusterctl/tasks/pki"
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
