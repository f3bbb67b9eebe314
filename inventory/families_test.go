package inventory

import (
	"slices"
	"testing"
)

// A dual-stack node's addresses are picked per family: internalAddress first, then the SSH address when it
// is an IP of the family, then what the host shows; the primary family's comes first whatever the order
// they were written or learned in.
func TestNodeIPs(t *testing.T) {
	inv, diags := Parse("hosts.yaml", []byte(`cluster:
  networking:
    podSubnet: 10.244.0.0/16,fd00:10:244::/56
    serviceSubnet: 10.96.0.0/12,fd00:10:96::/112
hosts:
  - {name: cp1, address: 10.0.0.1, roles: [control-plane]}
  - {name: w1, address: w1.example.com, internalAddress: ["fd00::2", 10.0.0.2], roles: [worker]}
  - {name: w2, address: "fd00::3", roles: [worker]}
`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	for _, c := range []struct {
		host, learned string
		want          []string
		missing       []Family
	}{
		{"cp1", "", []string{"10.0.0.1"}, []Family{IPv6}},
		{"cp1", "10.0.0.9,fd00::1", []string{"10.0.0.1", "fd00::1"}, nil},
		{"w1", "10.0.0.9,fd00::9", []string{"10.0.0.2", "fd00::2"}, nil},
		{"w2", "", []string{"fd00::3"}, []Family{IPv4}},
		{"w2", "fd00::9,10.0.0.3", []string{"10.0.0.3", "fd00::3"}, nil},
	} {
		h := inv.Host(c.host)
		if got := h.NodeIPs(ParseNodeAddrs(c.learned)); !slices.Equal(got.Strings(), c.want) {
			t.Errorf("%s.NodeIPs(%q) = %q, want %q", c.host, c.learned, got, c.want)
		}
		if got := h.MissingFamilies(ParseNodeAddrs(c.learned)); !slices.Equal(got, c.missing) {
			t.Errorf("%s.MissingFamilies(%q) = %v, want %v", c.host, c.learned, got, c.missing)
		}
	}
	// Without its primary family's address, a node has no primary address at all.
	if got := inv.Host("w2").NodeIP(nil); got.IsValid() {
		t.Errorf("w2.NodeIP with no IPv4 address = %q, want none", got)
	}
	if got := inv.Host("w2").NodeIP(ParseNodeAddrs("10.0.0.3")); got.String() != "10.0.0.3" {
		t.Errorf("w2.NodeIP = %q, want 10.0.0.3", got)
	}
}
