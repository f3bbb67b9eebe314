package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Ranges at the top of the integer range end (the loop's sum overflowed and never stopped); ranges that
// multiply past the limit are refused.
func TestRangesAreBounded(t *testing.T) {
	got, err := expandRange("node[9223372036854775806:9223372036854775807]")
	if err != nil || strings.Join(got, ",") != "node9223372036854775806,node9223372036854775807" {
		t.Errorf("got %v %v", got, err)
	}
	got, err = expandRange("n[9223372036854775800:9223372036854775807:5]")
	if err != nil || len(got) != 2 {
		t.Errorf("stepped: %v %v", got, err)
	}
	if _, err := expandRange("n[0:9999][0:9999]"); err == nil {
		t.Error("a range of 10^8 hosts was expanded")
	}
}

// What is read is bounded: a device or a file past MaxFileSize is refused, as an inventory and as a
// group_vars file.
func TestReadsAreBounded(t *testing.T) {
	if _, _, err := Load("/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("/dev/zero: %v", err)
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "hosts.ini")
	f, _ := os.Create(big)
	f.Truncate(MaxFileSize + 1)
	f.Close()
	if _, _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a file past the limit: %v", err)
	}
	inv := filepath.Join(dir, "inv.ini")
	os.WriteFile(inv, []byte("[kube_control_plane]\ncp1 ansible_host=10.0.0.1\n[kube_node]\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "group_vars"), 0o755)
	os.Symlink("/dev/zero", filepath.Join(dir, "group_vars", "all.yml"))
	_, diags, err := Load(inv)
	if err != nil || !strings.Contains(diags.Err().Error(), "not a regular file") {
		t.Errorf("group_vars linked to /dev/zero: %v %v", err, diags.Err())
	}
}

func bigINI(n int) []byte {
	var b strings.Builder
	b.WriteString("[kube_control_plane]\ncp1 ansible_host=10.1.0.1\n[kube_node]\n")
	for i := range n {
		fmt.Fprintf(&b, "n%d ansible_host=10.%d.%d.%d\n", i, 2+i/62500, (i/250)%250, i%250+1)
	}
	b.WriteString("[k8s_cluster:children]\nkube_control_plane\nkube_node\n[all:vars]\nkube_pods_subnet=10.128.0.0/9\n")
	return []byte(b.String())
}

// BenchmarkLoadINI20000 loads an INI inventory of 20,000 hosts in groups (2 min 48 s when group membership
// was computed per host and a host's group looked up by a scan; 0.44 s now).
func BenchmarkLoadINI20000(b *testing.B) {
	data := bigINI(20000)
	for b.Loop() {
		inv, diags := Parse("hosts.ini", data)
		if inv == nil || diags.HasErrors() {
			b.Fatal(diags.Err())
		}
	}
}

// `inventory validate` of 10,000 native hosts (the figure: under 1 s).
func BenchmarkValidateYAML10000(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("cluster:\n  name: big\n  controlPlaneEndpoint: 10.0.0.1:6443\n  networking:\n    podSubnet: 10.128.0.0/9\nhosts:\n")
	for i := range 10000 {
		role := "worker"
		if i < 3 {
			role = "control-plane"
		}
		fmt.Fprintf(&sb, "  - name: n%d\n    address: 10.%d.%d.%d\n    roles: [%s]\n", i, (i>>16)&255, (i>>8)&255, i&255, role)
	}
	data := []byte(sb.String())
	for b.Loop() {
		inv, diags := Parse("hosts.yaml", data)
		if inv == nil || diags.HasErrors() || len(inv.Hosts) != 10000 {
			b.Fatal(diags.Err())
		}
	}
}
