package inventory

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds the loaders arbitrary text under each kind of name. They must never panic, and whatever
// they accept must survive a round trip through the normalized YAML.
//
//	go test ./inventory -run '^$' -fuzz FuzzParse -fuzztime 5m
func FuzzParse(f *testing.F) {
	for _, pat := range []string{"testdata/*/*.yaml", "testdata/*/*.ini", "testdata/good/*/hosts.yaml", "examples/*.yaml", "examples/*/*"} {
		files, _ := filepath.Glob(pat)
		for _, file := range files {
			if st, err := os.Stat(file); err == nil && st.IsDir() {
				continue
			}
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data, uint8(0))
			f.Add(data, uint8(1))
			f.Add(data, uint8(2))
		}
	}
	names := []string{"hosts.yaml", "hosts.ini", "hosts"}
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		inv, diags := Parse(names[int(which)%len(names)], data)
		for _, d := range diags {
			_ = d.String()
		}
		if inv == nil || diags.HasErrors() {
			return
		}
		out, err := inv.MarshalNative()
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if _, back := Parse("normalized.yaml", out); back.HasErrors() {
			t.Fatalf("accepted input does not round-trip:\n%v\n%s", back.Err(), out)
		}
	})
}
