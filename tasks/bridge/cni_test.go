package bridge

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestConfig(t *testing.T) {
	data, err := Config("10.244.1.0/24")
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		CNIVersion string `json:"cniVersion"`
		Plugins    []struct {
			Type   string `json:"type"`
			Bridge string `json:"bridge"`
			IPAM   struct {
				Ranges [][]struct {
					Subnet string `json:"subnet"`
				} `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, data)
	}
	// The bridge is the one the Service rule of the routes file matches (Bridge).
	if conf.Plugins[0].Type != "bridge" || conf.Plugins[0].Bridge != "cni0" || conf.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.244.1.0/24" {
		t.Errorf("unexpected configuration:\n%s", data)
	}
	if _, err := Config("10.244.1.0"); err == nil {
		t.Error("a range without prefix length was accepted")
	}
}

func TestRoutes(t *testing.T) {
	nodes := []Node{{"cp1", "10.244.0.0/24", "10.0.0.10"}, {"w2", "10.244.2.0/24", "10.0.0.12"},
		{"w1", "10.244.1.0/24", "10.0.0.11"}, {"w3", "", "10.0.0.13"}}
	nr, err := Routes("w1", nodes, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := string(nr.Routes)
	want := "route replace 10.244.0.0/24 via 10.0.0.10\nroute replace 10.244.2.0/24 via 10.0.0.12\nrule flush priority 32700\n"
	if !strings.HasSuffix(s, "\n"+want) || strings.Contains(s, "10.244.1.0") || strings.Contains(s, "10.0.0.13") {
		t.Errorf("routes:\n%s", s)
	}
	// networkd's drop-in has the same routes, each a section of its own.
	wantNetworkd := "\n\n[Route]\nDestination=10.244.0.0/24\nGateway=10.0.0.10\n\n[Route]\nDestination=10.244.2.0/24\nGateway=10.0.0.12\n"
	if !strings.HasSuffix(string(nr.Networkd), wantNetworkd) || strings.Count(string(nr.Networkd), "[Route]") != 2 {
		t.Errorf("networkd's routes:\n%s\nwant:%s", nr.Networkd, wantNetworkd)
	}
	if lone, _ := Routes("cp1", nodes[:1], nil, nil); strings.Contains(string(lone.Routes), "route replace") || strings.Contains(string(lone.Networkd), "[Route]") {
		t.Errorf("a lone node has routes:\n%s\n%s", lone.Routes, lone.Networkd)
	}
	for _, line := range strings.Split(s, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "route replace ") && line != "rule flush priority 32700" {
			t.Errorf("a command other than route replace and the rule's flush: %s", line)
		}
	}
	for _, bad := range []Node{
		{"x", "10.244.3.0/24", "10.0.0.1; reboot"},
		{"x", "10.244.3.0/24", "fe80::1%;touch${IFS}/x"}, // a zone: netip accepts any characters in it
		{"x", "10.244.3.0/24", "fe80::1%eth0"},
		{"x", "10.244.3.0/24", "::ffff:10.0.0.1"}, // not canonical
		{"x", "10.244.3.0/24", "0.0.0.0"},
		{"x", "10.244.3.1/24", "10.0.0.1"}, // not a network address
		{"x", "10.244.3.0/24\nroute flush all", "10.0.0.1"},
	} {
		if nr, err := Routes("w1", []Node{bad}, nil, nil); err == nil {
			t.Errorf("%q via %q accepted:\n%s", bad.PodCIDR, bad.IP, nr.Routes)
		}
	}
}

// The unit is the same on every node, whatever its routes: it runs the routes file, nothing else.
func TestRoutesUnit(t *testing.T) {
	for _, ipv6 := range []bool{false, true} {
		s := string(RoutesUnit(ipv6))
		var exec []string
		for _, line := range strings.Split(s, "\n") {
			if strings.HasPrefix(line, "Exec") {
				exec = append(exec, line)
			}
		}
		want := []string{"ExecStart=ip -force -batch " + RoutesPath}
		if ipv6 {
			want = []string{"ExecStartPre=-ip link add cni0 type bridge", "ExecStartPre=-sysctl -qw net.ipv6.conf.cni0.accept_dad=0",
				want[0], "ExecStart=ip -6 -force -batch " + Rules6Path}
		}
		if !slices.Equal(exec, want) || !strings.Contains(s, "ConditionPathExists="+RoutesPath+"\n") {
			t.Errorf("unit (IPv6 %v):\n%s\nwant its commands: %q", ipv6, s, want)
		}
	}
}

// A host with no default route gets the Service range out of its interface; nothing else is written.
func TestRoutesServiceRange(t *testing.T) {
	nodes := []Node{{"cp1", "10.244.0.0/24", "10.0.0.10"}, {"w1", "10.244.1.0/24", "10.0.0.11"}}
	nr, err := Routes("w1", nodes, []ServiceRoute{{CIDR: "10.96.0.0/12", Dev: "host0"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "\nroute replace 10.96.0.0/12 dev host0\nroute replace 10.244.0.0/24 via 10.0.0.10\nrule flush priority 32700\n"
	if !strings.HasSuffix(string(nr.Routes), want) {
		t.Errorf("routes:\n%s\nwant:\n%s", nr.Routes, want)
	}
	wantNetworkd := "\n\n[Route]\nDestination=10.96.0.0/12\nScope=link\n\n[Route]\nDestination=10.244.0.0/24\nGateway=10.0.0.10\n"
	if !strings.HasSuffix(string(nr.Networkd), wantNetworkd) {
		t.Errorf("networkd's routes:\n%s\nwant:%s", nr.Networkd, wantNetworkd)
	}
	for _, bad := range []ServiceRoute{
		{CIDR: "10.96.0.0/12", Dev: "eth0; reboot"},
		{CIDR: "10.96.0.0/12", Dev: "eth0\nroute flush all"},
		{CIDR: "10.96.0.0/12", Dev: ".."},
		{CIDR: "10.96.0.0/12", Dev: "a-name-over-15-chars"},
		{CIDR: "10.96.0.0/12", Dev: ""},
		{CIDR: "10.96.0.1/12", Dev: "eth0"},
		{CIDR: "10.96.0.0/12 via 1.2.3.4", Dev: "eth0"},
	} {
		if nr, err := Routes("w1", nodes, []ServiceRoute{bad}, nil); err == nil {
			t.Errorf("%+v accepted:\n%s", bad, nr.Routes)
		}
	}
}

// A Pod's untranslated packets to a Service range are refused: the rule is flushed, then added once per
// range; an IPv6 range's rule goes in the IPv6 rules file (ip -batch takes a rule's family from its
// options), with the IPv6 routes in the routes file; a range that is not one is refused.
func TestRoutesRefuseServices(t *testing.T) {
	nodes := []Node{{"cp1", "10.244.0.0/24", "10.0.0.10"}, {"cp1", "fd00:10:244::/64", "fd00::10"}, {"w1", "10.244.1.0/24", "10.0.0.11"}}
	nr, err := Routes("w1", nodes, nil, []string{"10.96.0.0/12", "fd00:96::/108"})
	if err != nil {
		t.Fatal(err)
	}
	data, rules6 := nr.Routes, nr.Rules6
	want := "\nroute replace 10.244.0.0/24 via 10.0.0.10\nroute replace fd00:10:244::/64 via fd00::10\nrule flush priority 32700\nrule add priority 32700 iif cni0 to 10.96.0.0/12 unreachable\n"
	if !strings.HasSuffix(string(data), want) {
		t.Errorf("routes:\n%s\nwant:\n%s", data, want)
	}
	want6 := "\nrule flush priority 32700\nrule add priority 32700 iif cni0 to fd00:96::/108 unreachable\n"
	if !strings.HasSuffix(string(rules6), want6) || strings.Contains(string(rules6), "route replace") {
		t.Errorf("IPv6 rules:\n%s\nwant:\n%s", rules6, want6)
	}
	if v4, _ := Routes("w1", nodes, nil, []string{"10.96.0.0/12"}); v4.Rules6 != nil {
		t.Errorf("an IPv4 cluster has IPv6 rules:\n%s", v4.Rules6)
	}
	for _, bad := range []string{"10.96.0.1/12", "10.96.0.0/12 table main", "10.96.0.0/12\nrule flush", "", "10.96.0.0"} {
		if nr, err := Routes("w1", nodes, nil, []string{bad}); err == nil {
			t.Errorf("service range %q accepted:\n%s", bad, nr.Routes)
		}
	}
}

func TestVet(t *testing.T) {
	expect := map[string]string{"cp1": "10.0.0.10", "w1": "10.0.0.11", "w2": "10.0.0.12", "w3": "10.0.0.13", "w4": "fd00::14",
		"w5": "10.0.0.15", "cp2": "10.0.0.20"}
	nodes := []Node{
		{"cp1", "10.244.0.0/24", "10.0.0.10"},
		{"w1", "10.244.1.0/24", "10.0.0.11"},
		{"w2", "10.244.2.0/24", "10.0.0.10"},        // claims cp1's address
		{"w3", "10.244.1.0/24", "10.0.0.13"},        // claims w1's range
		{"w4", "10.244.4.0/24", "fd00::14%;reboot"}, // a zone with a command
		{"intruder", "10.244.5.0/24", "10.0.0.99"},  // not in the inventory
		{"w5", "192.168.0.0/24", "10.0.0.15"},       // not in the inventory either
		{"cp2", "", "10.0.0.20"},                    // no range yet
	}
	ok, skipped := Vet(nodes, expect, "10.244.0.0/16")
	var names []string
	for _, n := range ok {
		names = append(names, n.Name)
	}
	if strings.Join(names, ",") != "cp1,w1" {
		t.Errorf("kept %v, want cp1 and w1", names)
	}
	got := strings.Join(skipped, "\n")
	for _, want := range []string{
		`node w2: no route written: its InternalIP "10.0.0.10" is not the inventory's address "10.0.0.12"`,
		"node w3: no route written: pod range 10.244.1.0/24 is also node w1's",
		`node w4: no route written: its InternalIP "fd00::14%;reboot" is not the inventory's address "fd00::14"`,
		"node intruder: no route written: not a host of the inventory",
		"node w5: no route written: pod range 192.168.0.0/24 is not inside the pod subnet 10.244.0.0/16",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if len(skipped) != 5 {
		t.Errorf("%d skipped, want 5:\n%s", len(skipped), got)
	}
}
