package inventory

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// render is what a golden file holds: every diagnostic, then the normalized inventory when it is valid.
func render(t *testing.T, inv *Inventory, diags Diagnostics) string {
	t.Helper()
	var b strings.Builder
	for _, d := range diags {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	if inv != nil && !diags.HasErrors() {
		out, err := inv.MarshalNative()
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(out)
	}
	return b.String()
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./inventory -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test ./inventory -update rewrites it)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func inputs(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"*.yaml", "*.ini", "*/hosts.yaml", "*/*.ini"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	if len(out) == 0 {
		t.Fatalf("no inputs in %s", dir)
	}
	return out
}

func TestGoodInventories(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // the keys the inventories name are nowhere: the same warnings on every machine
	files := append(inputs(t, "testdata/good"), inputs(t, "examples")...)
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			inv, diags, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			if diags.HasErrors() {
				t.Errorf("unexpected errors:\n%v", diags.Err())
			}
			g := file + ".golden"
			if strings.HasPrefix(file, "examples") {
				g = filepath.Join("testdata", "examples", strings.ReplaceAll(strings.TrimPrefix(file, "examples/"), "/", "-")+".golden")
			}
			golden(t, g, render(t, inv, diags))
			roundTrip(t, inv)
		})
	}
}

// roundTrip checks that the normalized YAML of an inventory reads back into the same model.
func roundTrip(t *testing.T, inv *Inventory) {
	t.Helper()
	out, err := inv.MarshalNative()
	if err != nil {
		t.Fatal(err)
	}
	back, diags := Parse("normalized.yaml", out)
	if diags.HasErrors() {
		t.Fatalf("normalized output does not validate:\n%v\n%s", diags.Err(), out)
	}
	for _, f := range []struct {
		name      string
		got, want any
	}{{"cluster", back.Cluster, inv.Cluster}, {"ssh", back.SSH, inv.SSH}, {"hosts", back.Hosts, inv.Hosts}} {
		if !reflect.DeepEqual(f.got, f.want) {
			t.Errorf("%s changed in the round trip:\n got %+v\nwant %+v", f.name, f.got, f.want)
		}
	}
}

func TestBadInventories(t *testing.T) {
	for _, file := range inputs(t, "testdata/bad") {
		t.Run(file, func(t *testing.T) {
			inv, diags, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			if !diags.HasErrors() {
				t.Fatalf("no error reported; diagnostics: %v", diags)
			}
			for _, d := range diags.Filter(Error) {
				if d.Pos.File != file || d.Pos.Line == 0 {
					t.Errorf("error without a position in %s: %s", file, d)
				}
			}
			golden(t, file+".golden", render(t, inv, diags))
		})
	}
}
