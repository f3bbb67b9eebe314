package bridge

import (
	"strings"
	"testing"

	"github.com/clusterctl/clusterctl/tasks/facts"
	"github.com/clusterctl/clusterctl/tasks/network"
)

func TestCheckOneSegment(t *testing.T) {
	node := func(host, ip, cidr string) network.Node {
		return network.Node{Host: host, IP: ip, Facts: &facts.Facts{Addresses: []facts.Address{
			{Iface: "lo", CIDR: "127.0.0.1/8"}, {Iface: "eth0", CIDR: cidr}}}}
	}
	one := []network.Node{node("cp1", "10.0.0.10", "10.0.0.10/24"), node("w1", "10.0.0.11", "10.0.0.11/24")}
	if f := (Plugin{}).Check(one); len(f) != 0 {
		t.Errorf("one segment: %v", f)
	}
	routed := []network.Node{one[0], one[1], node("w2", "10.1.0.12", "10.1.0.12/24")}
	f := (Plugin{}).Check(routed)
	if len(f) != 2 {
		t.Fatalf("w2 on another subnet: want one finding per pair with it, got %+v", f)
	}
	for _, x := range f {
		if x.Check != network.CheckName || !strings.Contains(x.Message, "w2") || !strings.Contains(x.Message, "cni.plugin: flannel") {
			t.Errorf("finding %+v", x)
		}
	}
	// A node of the inventory outside the run (no facts) is checked from the run's nodes.
	routed[2].Facts = nil
	if f := (Plugin{}).Check(routed); len(f) != 2 {
		t.Errorf("w2 without facts: %+v", f)
	}
}
