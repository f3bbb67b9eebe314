package inventory

import (
	"strings"
	"testing"
)

// A file written before apiVersion gets it (and kind) after its leading comments, the rest byte for byte;
// a current file is left as it is; an unknown version and an Ansible inventory are refused.
func TestMigrate(t *testing.T) {
	old := "# our cluster\n---\ncluster:\n  name: prod   # the name\nhosts:\n  - {name: cp1, address: 10.0.0.1, roles: [control-plane]}\n"
	out, m, err := Migrate("hosts.yaml", []byte(old))
	want := "# our cluster\n---\napiVersion: clusterctl/v1\nkind: Inventory\ncluster:\n  name: prod   # the name\nhosts:\n  - {name: cp1, address: 10.0.0.1, roles: [control-plane]}\n"
	if err != nil || string(out) != want || m.From != "" || !m.Changed() || m.Steps[0] != APIVersion {
		t.Fatalf("%q %+v %v", out, m, err)
	}
	if _, diags := Parse("hosts.yaml", out); diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	again, m, err := Migrate("hosts.yaml", out)
	if err != nil || string(again) != want || m.Changed() || m.From != APIVersion {
		t.Errorf("a current file: %q %+v %v", again, m, err)
	}
	if _, _, err := Migrate("hosts.yaml", []byte("apiVersion: clusterctl/v9\nhosts: []\n")); err == nil || !strings.Contains(err.Error(), `"clusterctl/v9" is not a version`) {
		t.Errorf("an unknown version: %v", err)
	}
	if _, _, err := Migrate("hosts.ini", []byte("[kube_control_plane]\ncp1\n")); err == nil || !strings.Contains(err.Error(), "Ansible inventory has no schema version") {
		t.Errorf("an Ansible inventory: %v", err)
	}
}

// inventory show --full is a valid inventory that reads back as the same one, every field of the model in
// it (set or commented), each under its documentation.
func TestMarshalFull(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	for _, file := range []string{"examples/hosts.yaml", "testdata/good/minimal.yaml", "testdata/good/kubespray-node-settings.yaml"} {
		inv, diags, err := Load(file)
		if err != nil || diags.HasErrors() {
			t.Fatal(file, err, diags.Err())
		}
		full, err := inv.MarshalFull()
		if err != nil {
			t.Fatal(err)
		}
		back, diags := Parse("full.yaml", full)
		if diags.HasErrors() {
			t.Fatalf("%s: the full output does not read back:\n%v\n%s", file, diags.Err(), full)
		}
		a, _ := inv.MarshalNative()
		b, _ := back.MarshalNative()
		if strings.SplitN(string(a), "\n", 2)[1] != strings.SplitN(string(b), "\n", 2)[1] {
			t.Errorf("%s: the full output reads back as another inventory:\n%s", file, full)
		}
		for _, want := range []string{"# The version of the file's schema, clusterctl/v1.\napiVersion: clusterctl/v1", "  # oidc:\n", "podSubnet: 10.244.0.0/16"} {
			if file == "examples/hosts.yaml" && want == "  # oidc:\n" {
				continue
			}
			if !strings.Contains(string(full), want) {
				t.Errorf("%s: the full output lacks %q:\n%s", file, want, full)
			}
		}
	}
}
