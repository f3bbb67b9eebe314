package inventory

import (
	"bytes"
	"fmt"
	"iter"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MarshalFull is MarshalNative with every field of the model: each under a comment (the first sentence of
// its documentation, as docs/inventory.md gives it), a value the file did not write marked as the
// default, and a field with no value written as a comment. It is a valid hosts.yaml itself.
func (inv *Inventory) MarshalFull() ([]byte, error) {
	data, err := inv.MarshalNative()
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("inventory %s: nothing to show", inv.Source)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# clusterctl inventory, every field, normalized from %s (%s): each field under its documentation;\n", inv.Source, inv.Format)
	b.WriteString("# \"# default\" marks a value the file does not write; a field written as a comment is not set.\n")
	w := fullWriter{b: &b, pos: inv.pos}
	if err := w.mapping(doc.Content[0], reflect.TypeOf(Inventory{}), "", 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// leafTypes are written as one value (a scalar, a list of scalars, a mapping of names to values), not
// as fields of their own.
var leafTypes = map[reflect.Type]bool{durationType: true, argsType: true, hostKeysType: true}

type fullWriter struct {
	b   *bytes.Buffer
	pos positions
}

// yamlFields are the fields of struct type t that hosts.yaml has, in order, with their keys: exported,
// their yaml tag not "-", those of an embedded struct without a key in its place. Each comes with the
// struct that declares it.
func yamlFields(t reflect.Type) iter.Seq2[string, yamlField] {
	return func(yield func(string, yamlField) bool) {
		for i := range t.NumField() {
			sf := t.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			switch {
			case name == "-" || !sf.IsExported():
			case sf.Anonymous && name == "":
				for n, f := range yamlFields(sf.Type) {
					if !yield(n, f) {
						return
					}
				}
			case !yield(name, yamlField{In: t, StructField: sf}):
				return
			}
		}
	}
}

// yamlField is a field of hosts.yaml: the struct that declares it, and the field.
type yamlField struct {
	In reflect.Type
	reflect.StructField
}

// Value is the field's type without its pointers.
func (f yamlField) Value() reflect.Type {
	t := f.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// mapping writes the fields of struct type t, with their values from n (a mapping node, or nil).
func (w fullWriter) mapping(n *yaml.Node, t reflect.Type, path string, indent int) error {
	pad := strings.Repeat(" ", indent)
	for name, sf := range yamlFields(t) {
		key := path + name
		if doc := firstSentence(fieldDocs[sf.In.Name()+"."+sf.Name]); doc != "" {
			fmt.Fprintf(w.b, "%s# %s\n", pad, doc)
		}
		val := valueOf(n, name)
		ft := sf.Value()
		switch {
		case val == nil:
			fmt.Fprintf(w.b, "%s# %s:\n", pad, name)
		case ft.Kind() == reflect.Struct && !leafTypes[ft] && val.Kind == yaml.MappingNode:
			fmt.Fprintf(w.b, "%s%s:\n", pad, name)
			if err := w.mapping(val, ft, key+".", indent+2); err != nil {
				return err
			}
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && !leafTypes[ft] && val.Kind == yaml.SequenceNode && len(val.Content) > 0:
			fmt.Fprintf(w.b, "%s%s:\n", pad, name)
			for j, item := range val.Content {
				if item.Kind != yaml.MappingNode { // written short (a hook that is only its command)
					out, err := yaml.Marshal(&yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{item}})
					if err != nil {
						return err
					}
					for _, l := range strings.SplitAfter(strings.TrimSuffix(string(out), "\n"), "\n") {
						fmt.Fprintf(w.b, "%s  %s", pad, l)
					}
					w.b.WriteByte('\n')
					continue
				}
				fmt.Fprintf(w.b, "%s  -\n", pad)
				if err := w.mapping(item, ft.Elem(), fmt.Sprintf("%s[%d].", key, j), indent+4); err != nil {
					return err
				}
			}
		default:
			if err := w.leaf(name, val, pad, w.written(key)); err != nil {
				return err
			}
		}
	}
	return nil
}

// leaf writes key: value as YAML at pad, marked as the default when the file did not write it.
func (w fullWriter) leaf(name string, val *yaml.Node, pad string, written bool) error {
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: name}, val}}); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	for i, l := range lines {
		w.b.WriteString(pad + l)
		if i == 0 && !written {
			if len(lines) == 1 {
				w.b.WriteString("  # default")
			} else {
				w.b.WriteString(" # default")
			}
		}
		w.b.WriteByte('\n')
	}
	return nil
}

// written reports whether the file wrote the field (or a field under it).
func (w fullWriter) written(key string) bool {
	if _, ok := w.pos[key]; ok {
		return true
	}
	for k := range w.pos {
		if strings.HasPrefix(k, key+".") || strings.HasPrefix(k, key+"[") {
			return true
		}
	}
	return false
}

// valueOf is the value of key in a mapping node, or nil.
func valueOf(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// firstSentence is a doc comment's first sentence.
func firstSentence(doc string) string {
	for i := 0; i+1 < len(doc); i++ {
		if doc[i] == '.' && doc[i+1] == ' ' {
			return doc[:i+1]
		}
	}
	return doc
}
