package cni

import (
	"encoding/json"
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
			Type string `json:"type"`
			IPAM struct {
				Ranges [][]struct {
					Subnet string `json:"subnet"`
				} `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, data)
	}
	if conf.Plugins[0].Type != "bridge" || conf.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.244.1.0/24" {
		t.Errorf("unexpected configuration:\n%s", data)
	}
	if _, err := Config("10.244.1.0"); err == nil {
		t.Error("a range without prefix length was accepted")
	}
}

func TestRoutesUnit(t *testing.T) {
	nodes := []Node{{"cp1", "10.244.0.0/24", "10.0.0.10"}, {"w2", "10.244.2.0/24", "10.0.0.12"},
		{"w1", "10.244.1.0/24", "10.0.0.11"}, {"w3", "", "10.0.0.13"}}
	data, err := RoutesUnit("w1", nodes)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	want := "ExecStart=/bin/sh -c 'ip route replace 10.244.0.0/24 via 10.0.0.10'\nExecStart=/bin/sh -c 'ip route replace 10.244.2.0/24 via 10.0.0.12'\n"
	if !strings.Contains(s, want) || strings.Contains(s, "10.244.1.0") || strings.Contains(s, "10.0.0.13") {
		t.Errorf("unit:\n%s", s)
	}
	if data, _ := RoutesUnit("cp1", nodes[:1]); !strings.Contains(string(data), "ExecStart=/bin/true") {
		t.Errorf("a lone node's unit has no command:\n%s", data)
	}
	if _, err := RoutesUnit("w1", []Node{{"x", "10.244.3.0/24", "10.0.0.1; reboot"}}); err == nil {
		t.Error("an address that is not one was accepted")
	}
}
