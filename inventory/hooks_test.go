package inventory

import (
	"strings"
	"testing"
)

// A host's hooks at a point: the inventory's for its roles, in order, then its own.
func TestHooksFor(t *testing.T) {
	inv, diags := Parse("h.yaml", []byte(`cluster: {name: h}
hooks:
  up:
    before: [all, {run: workers, roles: [worker]}, {run: cps, roles: [control-plane, etcd]}]
  upgrade: {after: ["multi\n\tline"]}
hosts:
  - {name: cp1, address: 10.0.0.1, roles: [control-plane]}
  - name: w1
    address: 10.0.0.2
    roles: [worker]
    hooks: {up: {before: [own]}, addNode: {after: [{run: joined, onFailure: continue}]}}
`))
	if err := diags.Err(); err != nil {
		t.Fatal(err)
	}
	runs := func(host, command, when string) string {
		var out []string
		for _, h := range inv.HooksFor(inv.Host(host), command, when) {
			out = append(out, h.Run)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct{ host, command, when, want string }{
		{"cp1", HookUp, "before", "all,cps"},
		{"w1", HookUp, "before", "all,workers,own"},
		{"w1", HookUp, "after", ""},
		{"w1", HookAddNode, "after", "joined"},
		{"cp1", HookUpgrade, "after", "multi\n\tline"},
		{"cp1", "frob", "before", ""},
	} {
		if got := runs(tc.host, tc.command, tc.when); got != tc.want {
			t.Errorf("%s %s.%s: %q, want %q", tc.host, tc.command, tc.when, got, tc.want)
		}
	}
	// Written back as it was read: a plain hook as a string.
	out, err := inv.MarshalNative()
	if err != nil || !strings.Contains(string(out), "- all\n") || !strings.Contains(string(out), "onFailure: continue") {
		t.Errorf("%v\n%s", err, out)
	}
}
