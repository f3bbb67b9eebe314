package inventory

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestExpandRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  string
	}{
		{in: "node1", want: []string{"node1"}},
		{in: "web[1:3]", want: []string{"web1", "web2", "web3"}},
		{in: "db[01:03].example.com", want: []string{"db01.example.com", "db02.example.com", "db03.example.com"}},
		{in: "n[0:6:3]", want: []string{"n0", "n3", "n6"}},
		{in: "x[a:c]", want: []string{"xa", "xb", "xc"}},
		{in: "r[1:2]c[1:2]", want: []string{"r1c1", "r1c2", "r2c1", "r2c2"}},
		{in: "web[1:3", err: "no closing"},
		{in: "web[3:1]", err: "bad bounds"},
		{in: "web[1]", err: "expected [START:END]"},
		{in: "web[1:z]", err: "both be numbers"},
		{in: "web[1:3:0]", err: "step"},
	} {
		got, err := expandRange(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("expandRange(%q) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("expandRange(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestSplitTokens(t *testing.T) {
	got, err := splitTokens(`  node1 ansible_host=10.0.0.1 label="a b" x='c d'  # comment`)
	if err != nil {
		t.Fatal(err)
	}
	want := []token{{"node1", 3}, {"ansible_host=10.0.0.1", 9}, {"label=a b", 31}, {"x=c d", 43}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := splitTokens(`node1 x="open`); err == nil {
		t.Error("unterminated quote accepted")
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"8760h": 8760 * time.Hour, "365d": 365 * 24 * time.Hour, "10y": 10 * 365 * 24 * time.Hour, "90m": 90 * time.Minute,
	} {
		got, err := ParseDuration(in)
		if err != nil || got.Duration != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "forever", "1.5y", "d"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
	for d, want := range map[time.Duration]string{10 * 365 * 24 * time.Hour: "10y", 30 * 24 * time.Hour: "30d", 90 * time.Minute: "1h30m0s"} {
		if got := (Duration{d}).String(); got != want {
			t.Errorf("Duration(%v).String() = %q, want %q", d, got, want)
		}
	}
}

func TestCheckAddress(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1": "", "2001:db8::1": "", "node1.example.com": "", "Node1.Example.COM.": "",
		"10.0.0.300": "not a valid IPv4", "1.2.3": "", "2001:db8:::1": "not a valid IPv6",
		"bad_name": "not an IP address or DNS name", "": "empty",
	} {
		got := checkAddress(in)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("checkAddress(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSplitHostPort(t *testing.T) {
	for _, tc := range []struct{ in, host, port, err string }{
		{in: "api.example.com:6443", host: "api.example.com", port: "6443"},
		{in: "api.example.com", host: "api.example.com"},
		{in: "[2001:db8::1]:443", host: "2001:db8::1", port: "443"},
		{in: "2001:db8::1", host: "2001:db8::1"},
		{in: "api:", err: "port is missing"},
		{in: "[2001:db8::1", err: "missing ']'"},
	} {
		host, port, err := splitHostPort(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("splitHostPort(%q) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || host != tc.host || port != tc.port {
			t.Errorf("splitHostPort(%q) = %q, %q, %v", tc.in, host, port, err)
		}
	}
}

func TestLimit(t *testing.T) {
	inv, diags := Parse("h.yaml", []byte(`
hosts:
  - {name: cp1, address: 10.0.0.1, roles: [control-plane]}
  - {name: w1, address: 10.0.0.2, roles: [worker]}
  - {name: w2, address: 10.0.0.3, roles: [worker]}
`))
	if err := diags.Err(); err != nil {
		t.Fatal(err)
	}
	hosts, err := inv.Limit([]string{"w2", "cp1"})
	if err != nil || len(hosts) != 2 || hosts[0].Name != "cp1" || hosts[1].Name != "w2" {
		t.Errorf("Limit = %v, %v; want cp1, w2 in inventory order", hosts, err)
	}
	if all, _ := inv.Limit(nil); len(all) != 3 {
		t.Errorf("Limit(nil) gave %d hosts, want 3", len(all))
	}
	if _, err := inv.Limit([]string{"w1", "nope", "gone"}); err == nil || !strings.Contains(err.Error(), "nope, gone") {
		t.Errorf("Limit with unknown names: %v", err)
	}
}

func TestSSHSettings(t *testing.T) {
	inv, diags := Parse("h.yaml", []byte(`
ssh: {user: admin}
hosts:
  - {name: cp1, address: 10.0.0.1, roles: [control-plane]}
  - {name: w1, address: 10.0.0.2, roles: [worker], ssh: {user: root, port: 2222}}
  - {name: w2, address: 10.0.0.3, roles: [worker], ssh: {become: false}}
`))
	if err := diags.Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host   string
		user   string
		port   int
		become bool
	}{{"cp1", "admin", 22, true}, {"w1", "root", 2222, false}, {"w2", "admin", 22, false}} {
		h := inv.Host(tc.host)
		if inv.User(h) != tc.user || inv.Port(h) != tc.port || inv.Become(h) != tc.become {
			t.Errorf("%s: user %s port %d become %v; want %s %d %v", tc.host, inv.User(h), inv.Port(h), inv.Become(h), tc.user, tc.port, tc.become)
		}
	}
}

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       Format
	}{
		{"hosts.yaml", "all:\n  hosts: {}\n", FormatNative},
		{"hosts.ini", "node1\n", FormatAnsibleINI},
		{"hosts", "# c\n[all]\nnode1\n", FormatAnsibleINI},
		{"hosts", "all:\n  hosts:\n    n1:\n", FormatNative},
		{"hosts", "node1 ansible_host=10.0.0.1\n", FormatAnsibleINI},
	} {
		if got := detect(tc.name, []byte(tc.data)); got != tc.want {
			t.Errorf("detect(%q, %q) = %s, want %s", tc.name, tc.data, got, tc.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	known := fieldsOf(reflect.TypeOf(Host{}))
	if got := suggest("adress", known); got != `; did you mean "address"?` { //nolint:misspell // the misspelling is the test's input
		t.Errorf("suggest(adress) = %q", got) //nolint:misspell // the misspelling is the test's input
	}
	if got := suggest("zzzzzzzz", known); !strings.HasPrefix(got, "; known fields: address,") {
		t.Errorf("suggest(zzzzzzzz) = %q", got)
	}
}

func TestExpandRangeLimit(t *testing.T) {
	if _, err := expandRange("r[1:1000]c[1:1000]"); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a million hosts accepted: %v", err)
	}
}

func BenchmarkLoadExample(b *testing.B) {
	for b.Loop() {
		if _, diags, err := Load("examples/hosts.yaml"); err != nil || diags.HasErrors() {
			b.Fatal(err, diags.Err())
		}
	}
}

func BenchmarkLoadKubesprayINI(b *testing.B) {
	for b.Loop() {
		if _, diags, err := Load("examples/kubespray/inventory.ini"); err != nil || diags.HasErrors() {
			b.Fatal(err, diags.Err())
		}
	}
}

// -i DIR: the one inventory file in a directory, or an error naming what to pass.
func TestLoadDirectory(t *testing.T) {
	inv, diags, err := Load("testdata/good/kubespray-implicit")
	if err != nil || diags.HasErrors() || len(inv.Hosts) != 5 {
		t.Fatalf("a kubespray directory: %v %v", err, diags.Err())
	}
	empty := t.TempDir()
	if _, _, err := Load(empty); err == nil || !strings.Contains(err.Error(), "without an inventory file (hosts.yaml, hosts.yml, inventory.ini") {
		t.Errorf("an empty directory: %v", err)
	}
	for _, n := range []string{"hosts.yaml", "inventory.ini"} {
		if err := os.WriteFile(filepath.Join(empty, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := Load(empty); err == nil || !strings.Contains(err.Error(), "several inventory files: pass one with -i") || !strings.Contains(err.Error(), "inventory.ini") {
		t.Errorf("two inventories: %v", err)
	}
}
