package inventory

import (
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	gotoken "go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// field is one field of hosts.yaml: its path (cluster.networking.podSubnet, hosts[].ssh.port), its Go
// type's field, and the struct it is in.
type field struct {
	path   string
	goType reflect.Type // the struct holding it
	sf     reflect.StructField
}

// fields walks the model from t, each field that hosts.yaml has (yaml tag not "-"), depth first.
func fields(t reflect.Type, prefix string, seen map[reflect.Type]bool) []field {
	var out []field
	for name, sf := range yamlFields(t) {
		path := prefix + name
		out = append(out, field{path: path, goType: sf.In, sf: sf.StructField})
		ft := sf.Value()
		suffix := ""
		if ft.Kind() == reflect.Slice && !leafTypes[ft] {
			ft, suffix = ft.Elem(), "[]"
		}
		if ft.Kind() == reflect.Struct && !leafTypes[ft] && !seen[ft] {
			seen[ft] = true
			out = append(out, fields(ft, path+suffix+".", seen)...)
			delete(seen, ft)
		}
	}
	return out
}

// modelFields are every field of hosts.yaml.
func modelFields() []field {
	return fields(reflect.TypeOf(Inventory{}), "", map[reflect.Type]bool{})
}

var indexRE = regexp.MustCompile(`\[\d+\]`)

// The complete example shows every field of hosts.yaml, written (not in a comment) with a value that
// validates: each field of each type of the model at least once (a hook's fields under one command, a
// component's extraArgs under one component).
func TestExampleShowsEveryField(t *testing.T) {
	inv, diags, err := Load("examples/hosts.yaml")
	if err != nil || diags.HasErrors() {
		t.Fatalf("%v\n%v", err, diags)
	}
	written := map[string]bool{}
	for k := range inv.pos {
		written[indexRE.ReplaceAllString(k, "[]")] = true
	}
	type key struct {
		t    reflect.Type
		name string
	}
	shown := map[key]bool{}
	paths := map[key][]string{}
	var order []key
	for _, f := range modelFields() {
		k := key{f.goType, f.sf.Name}
		if _, ok := paths[k]; !ok {
			order = append(order, k)
		}
		paths[k] = append(paths[k], f.path)
		shown[k] = shown[k] || written[f.path]
	}
	// Fields a value the example gives excludes: shown in a comment instead.
	commented := map[string]string{"CNI.Manifests": "# manifests:", "Cluster.NodeTaints": "# nodeTaints:"}
	example, err := os.ReadFile("examples/hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range order {
		if c, ok := commented[k.t.Name()+"."+k.name]; ok {
			if !strings.Contains(string(example), c) {
				t.Errorf("inventory/examples/hosts.yaml does not show %s.%s in a comment (%q)", k.t.Name(), k.name, c)
			}
			continue
		}
		if !shown[k] {
			t.Errorf("inventory/examples/hosts.yaml does not show %s.%s (at %s)", k.t.Name(), k.name, strings.Join(paths[k][:min(len(paths[k]), 2)], " or "))
		}
	}
}

// sourceDocs are the Go doc comments of the model's struct fields, by "Type.Field", from the package's
// source.
func sourceDocs(t *testing.T) map[string]string {
	t.Helper()
	fset := gotoken.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			for _, fl := range st.Fields.List {
				doc := fl.Doc.Text()
				if doc == "" {
					doc = fl.Comment.Text()
				}
				for _, n := range fl.Names {
					docs[ts.Name.Name+"."+n.Name] = strings.Join(strings.Fields(doc), " ")
				}
			}
			return false
		})
	}
	return docs
}

// mdEscape keeps a doc comment's text as it is in a Markdown table: <name> is not a tag.
var mdEscape = strings.NewReplacer("|", "\\|", "<", "&lt;", ">", "&gt;")

// plain drops the Go field name a doc comment starts with ("Port is its SSH port" is "Its SSH port").
func plain(name, doc string) string {
	for _, verb := range []string{" is ", " are ", ": ", " says ", " makes ", " lets "} {
		if rest, ok := strings.CutPrefix(doc, name+verb); ok && rest != "" {
			if verb != " is " && verb != " are " && verb != ": " {
				rest = strings.TrimSpace(verb) + " " + rest
			}
			first, _, _ := strings.Cut(rest, " ")
			if strings.ContainsAny(first, "-'") && !strings.HasPrefix(first, "Kubernetes") || slices.Contains([]string{"etcd's", "containerd's", "runc's"}, first) {
				return rest // a program's name, written as it is
			}
			return strings.ToUpper(rest[:1]) + rest[1:]
		}
	}
	return doc
}

// defaultOf is a field's value in an inventory that does not set it ("" when there is none to show).
func defaultOf(inv *Inventory, path string) string {
	if strings.HasPrefix(path, "hosts[]") || strings.Contains(path, "[]") {
		return ""
	}
	v := reflect.ValueOf(*inv)
	for _, part := range strings.Split(path, ".") {
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return "" // a section that is not set: its fields' defaults are in their comments
			}
			v = v.Elem()
		}
		found := false
		for i := range v.NumField() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
			if name == part {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return ""
		}
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	switch {
	case v.Kind() == reflect.Slice, v.Kind() == reflect.Map, v.Kind() == reflect.Struct && v.Type() != durationType, v.IsZero():
		return "" // what a list, a mapping or a section holds is in its own rows
	}
	if s, ok := v.Interface().(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprint(v.Interface())
}

// docs/inventory.md's field reference is every field of hosts.yaml, type by type (each with the places it
// is written), with its default and the model's doc comment; -update rewrites it.
func TestFieldReference(t *testing.T) {
	minimal, diags := Parse("minimal.yaml", []byte("hosts:\n  - {name: cp1, address: 10.0.0.11, roles: [control-plane]}\n"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	docs := sourceDocs(t)
	// The types in the order met, each with where it is written and its fields.
	type section struct {
		at     []string
		fields []field
	}
	sections := map[reflect.Type]*section{}
	var order []reflect.Type
	for _, f := range modelFields() {
		sec := sections[f.goType]
		if sec == nil {
			sec = &section{}
			sections[f.goType] = sec
			order = append(order, f.goType)
		}
		name, _, _ := strings.Cut(f.sf.Tag.Get("yaml"), ",")
		parent := strings.TrimSuffix(f.path, "."+name)
		if parent == f.path {
			parent = "" // a top-level field
		}
		if !slices.Contains(sec.at, parent) {
			sec.at = append(sec.at, parent)
		}
		if !slices.ContainsFunc(sec.fields, func(o field) bool { return o.sf.Name == f.sf.Name }) {
			sec.fields = append(sec.fields, f)
		}
	}
	var b strings.Builder
	for _, typ := range order {
		sec := sections[typ]
		where := "the top of the file"
		if sec.at[0] != "" {
			var at []string
			for _, a := range sec.at[:min(len(sec.at), 4)] {
				at = append(at, "`"+a+"`")
			}
			where = strings.Join(at, ", ")
			if n := len(sec.at) - len(at); n > 0 {
				where += fmt.Sprintf(" and %d more like them", n)
			}
		}
		fmt.Fprintf(&b, "\n#### %s\n\nAt %s.\n\n| field | default | what |\n| --- | --- | --- |\n", typ.Name(), where)
		for _, f := range sec.fields {
			name, _, _ := strings.Cut(f.sf.Tag.Get("yaml"), ",")
			def := defaultOf(minimal, f.path)
			if def != "" {
				def = "`" + def + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", name, def, mdEscape.Replace(plain(f.sf.Name, docs[typ.Name()+"."+f.sf.Name])))
		}
	}
	b.WriteString("\n")
	const begin, end = "<!-- fields: go test ./inventory -run TestFieldReference -update rewrites this table -->\n", "<!-- end of fields -->\n"
	file := filepath.Join("..", "docs", "inventory.md")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	i, j := strings.Index(string(data), begin), strings.Index(string(data), end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q markers", file, strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	got := string(data[:i]) + begin + b.String() + string(data[j:])
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		checkGeneratedDocs(t, docs)
		return
	}
	if got != string(data) {
		t.Errorf("%s's field reference is not the model's (go test ./inventory -run TestFieldReference -update rewrites it)", file)
	}
	checkGeneratedDocs(t, docs)
	for _, typ := range order {
		for _, f := range sections[typ].fields {
			if docs[typ.Name()+"."+f.sf.Name] == "" {
				t.Errorf("%s.%s (%s) has no doc comment in the model: the reference says nothing of it", typ.Name(), f.sf.Name, f.path)
			}
		}
	}
}

// checkGeneratedDocs holds fielddocs.go (what inventory show --full comments each field with) to the
// model's doc comments, the source docs/inventory.md is written from too; -update rewrites it.
func checkGeneratedDocs(t *testing.T, docs map[string]string) {
	t.Helper()
	want := map[string]string{}
	for _, f := range modelFields() {
		k := f.goType.Name() + "." + f.sf.Name
		want[k] = plain(f.sf.Name, docs[k])
	}
	var b strings.Builder
	b.WriteString("// Code generated by go test ./inventory -run TestFieldReference -update; DO NOT EDIT.\n\npackage inventory\n\n")
	b.WriteString("// fieldDocs are the model's doc comments by Type.Field, as docs/inventory.md gives them: inventory show\n// --full comments each field with its first sentence.\nvar fieldDocs = map[string]string{\n")
	for _, k := range slices.Sorted(maps.Keys(want)) {
		fmt.Fprintf(&b, "\t%q: %q,\n", k, want[k])
	}
	b.WriteString("}\n")
	src, err := format.Source([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("fielddocs.go", src, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !reflect.DeepEqual(fieldDocs, want) {
		t.Errorf("fielddocs.go is not the model's doc comments (go test ./inventory -run TestFieldReference -update rewrites it)")
	}
}
