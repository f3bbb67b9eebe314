package templates

import "testing"

func TestUnitArg(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"--name=etcd1", "--name=etcd1"},
		{"--initial-cluster=a=https://10.0.0.1:2380,b=https://[fd00::1]:2380", `"--initial-cluster=a=https://10.0.0.1:2380,b=https://[fd00::1]:2380"`},
		{"50%", "50%%"},
		{"$HOME", "$$HOME"},
		{`a "b" \c`, `"a \"b\" \\c"`},
		{"", `""`},
	} {
		got, err := UnitArg(c.in)
		if err != nil || got != c.want {
			t.Errorf("UnitArg(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := UnitArg("a\nExecStartPre=/bin/evil"); err == nil {
		t.Error("a newline was accepted")
	}
	got, err := UnitArgs([]string{"/usr/local/bin/etcd", "--data-dir=/var/lib/etcd", "--x=a b"})
	if want := `/usr/local/bin/etcd --data-dir=/var/lib/etcd "--x=a b"`; err != nil || got != want {
		t.Errorf("UnitArgs = %q, %v; want %q", got, err, want)
	}
}
