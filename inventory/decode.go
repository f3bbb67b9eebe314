package inventory

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// positions maps a field of the model ("hosts[1].address") to where its value was written.
type positions map[string]Pos

// at returns where the field at key was written, or where its closest written parent was, so that a missing
// value is reported at the mapping that lacks it. display is used as the path when nothing was written at
// all. A position found at a parent keeps the parent's file and line but names the field itself.
func (p positions) at(key, display string) Pos {
	for k := key; ; {
		if pos, ok := p[k]; ok {
			if k != key {
				pos.Path = display
			}
			return pos
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	if pos, ok := p[""]; ok {
		pos.Path = display
		return pos
	}
	return Pos{Path: display}
}

// decoder fills a Go value from a YAML node strictly: unknown fields, wrong kinds and bad scalars are all
// reported, each with its position, and decoding goes on so that every problem is found in one pass.
type decoder struct {
	file   string
	pos    positions
	failed map[string]bool // fields that could not be decoded; validation says nothing more of them
	diags  *Diagnostics
}

func (d *decoder) errorf(n *yaml.Node, key, display, format string, args ...any) {
	d.failed[key] = true
	d.diags.add(Error, Pos{File: d.file, Line: n.Line, Col: n.Column, Path: display}, format, args...)
}

var (
	durationType = reflect.TypeOf(Duration{})
	argsType     = reflect.TypeOf(Args{})
	hostKeysType = reflect.TypeOf(HostKeys{})
	hookType     = reflect.TypeOf(Hook{})
	valuesType   = reflect.TypeOf(Values{})
	kubeletType  = reflect.TypeOf(KubeletConfig{})
)

// decode fills v from n. key is the model path of v, display the path as the user wrote it.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, key, display string) {
	n = resolve(n)
	d.pos[key] = Pos{File: d.file, Line: n.Line, Col: n.Column, Path: display}
	if isNull(n) {
		return
	}
	if d.decodeSpecial(n, v, key, display) {
		return
	}
	switch v.Kind() {
	case reflect.String:
		if d.expect(n, yaml.ScalarNode, key, display) {
			v.SetString(n.Value)
		}
	case reflect.Int:
		if !d.expect(n, yaml.ScalarNode, key, display) {
			return
		}
		i, err := strconv.Atoi(n.Value)
		if err != nil {
			d.errorf(n, key, display, "%q is not a whole number", n.Value)
			return
		}
		v.SetInt(int64(i))
	case reflect.Bool:
		if !d.expect(n, yaml.ScalarNode, key, display) {
			return
		}
		b, ok := parseBool(n.Value)
		if !ok {
			d.errorf(n, key, display, "%q is not true or false", n.Value)
			return
		}
		v.SetBool(b)
	case reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		d.decode(n, elem.Elem(), key, display)
		v.Set(elem)
	case reflect.Slice:
		if !d.expect(n, yaml.SequenceNode, key, display) {
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", key, i), itemDisplay(display, i, item))
		}
		v.Set(s)
	case reflect.Map:
		if !d.expect(n, yaml.MappingNode, key, display) {
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := resolve(n.Content[i]), n.Content[i+1]
			elem := reflect.New(v.Type().Elem()).Elem()
			d.decode(val, elem, key+"."+k.Value, join(display, k.Value))
			m.SetMapIndex(reflect.ValueOf(k.Value), elem)
		}
		v.Set(m)
	case reflect.Struct:
		d.decodeStruct(n, v, key, display)
	default:
		panic(fmt.Sprintf("inventory: cannot decode into %s", v.Type()))
	}
}

// decodeSpecial decodes the types written otherwise than their Go shape (a duration, arguments, a host key
// pin or a hook written as a string), and reports whether v was one.
func (d *decoder) decodeSpecial(n *yaml.Node, v reflect.Value, key, display string) bool {
	switch {
	case v.Type() == durationType:
		if !d.expect(n, yaml.ScalarNode, key, display) {
			return true
		}
		dur, err := ParseDuration(n.Value)
		if err != nil {
			d.errorf(n, key, display, "%v", err)
			return true
		}
		v.Set(reflect.ValueOf(dur))
	case v.Type() == argsType:
		d.decodeArgs(n, v, key, display)
	case v.Type() == hostKeysType && n.Kind == yaml.ScalarNode:
		// One pin, written as a string; a list is decoded as any list.
		v.Set(reflect.ValueOf(HostKeys{n.Value}))
	case v.Kind() == reflect.String && n.Kind == yaml.SequenceNode && strings.HasSuffix(key, ".internalAddress"):
		// A dual-stack node's addresses, written as a list: kept as the kubelet's --node-ip spells them.
		var parts []string
		for i, item := range n.Content {
			if item = resolve(item); !d.expect(item, yaml.ScalarNode, fmt.Sprintf("%s[%d]", key, i), itemDisplay(display, i, item)) {
				return true
			}
			parts = append(parts, item.Value)
		}
		v.SetString(strings.Join(parts, ","))
	case v.Type() == kubeletType:
		// Kubelet settings: any mapping, checked field by field against KubeletConfiguration.
		if !d.expect(n, yaml.MappingNode, key, display) {
			return true
		}
		var kc KubeletConfig
		if err := n.Decode(&kc); err != nil {
			d.errorf(n, key, display, "%v", err)
			return true
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			d.pos[key+"."+k.Value] = Pos{File: d.file, Line: k.Line, Col: k.Column, Path: join(display, k.Value)}
		}
		v.Set(reflect.ValueOf(kc.normalize()))
	case v.Type() == valuesType:
		// A chart's values: any mapping, as Helm takes it.
		if !d.expect(n, yaml.MappingNode, key, display) {
			return true
		}
		var vals Values
		if err := n.Decode(&vals); err != nil {
			d.errorf(n, key, display, "%v", err)
			return true
		}
		v.Set(reflect.ValueOf(vals))
	case v.Type() == hookType && n.Kind == yaml.ScalarNode:
		// A hook with nothing but its command, written as a string.
		v.Set(reflect.ValueOf(Hook{Run: n.Value}))
		d.pos[key+".run"] = d.pos[key]
	default:
		return false
	}
	return true
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, key, display string) {
	if !d.expect(n, yaml.MappingNode, key, display) {
		return
	}
	fields := fieldsOf(v.Type())
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolve(n.Content[i]), n.Content[i+1]
		index, ok := fields[k.Value]
		if !ok {
			d.errorf(k, join(key, k.Value), join(display, k.Value), "unknown field%s", suggest(k.Value, fields))
			continue
		}
		d.decode(val, v.FieldByIndex(index), join(key, k.Value), join(display, k.Value))
	}
}

func (d *decoder) decodeArgs(n *yaml.Node, v reflect.Value, key, display string) {
	if !d.expect(n, yaml.MappingNode, key, display) {
		return
	}
	args := make(Args, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolve(n.Content[i]), resolve(n.Content[i+1])
		name := k.Value
		path := join(display, name)
		d.pos[key+"."+name] = Pos{File: d.file, Line: k.Line, Col: k.Column, Path: path}
		if strings.HasPrefix(name, "-") {
			d.errorf(k, key+"."+name, path, "write the flag without leading dashes: %q", strings.TrimLeft(name, "-"))
			continue
		}
		if val.Kind != yaml.ScalarNode {
			d.errorf(val, key+"."+name, path, "expected a single value, got %s", kindName(val))
			continue
		}
		args = append(args, Arg{Name: name, Value: val.Value})
	}
	v.Set(reflect.ValueOf(args))
}

func (d *decoder) expect(n *yaml.Node, kind yaml.Kind, key, display string) bool {
	if n.Kind == kind {
		return true
	}
	d.errorf(n, key, display, "expected %s, got %s", kindName(&yaml.Node{Kind: kind}), kindName(n))
	return false
}

// fieldsOf maps YAML field names of a struct type to field indexes, following inline structs.
func fieldsOf(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(opts, "inline") {
			for k, idx := range fieldsOf(f.Type) {
				out[k] = append([]int{i}, idx...)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = []int{i}
	}
	return out
}

// checkDuplicateKeys reports every mapping key written twice in the same mapping (yaml.v3 accepts them in a
// node tree and the last would silently win).
func checkDuplicateKeys(file string, n *yaml.Node, display string, diags *Diagnostics) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			checkDuplicateKeys(file, c, display, diags)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			checkDuplicateKeys(file, c, itemDisplay(display, i, c), diags)
		}
	case yaml.MappingNode:
		seen := map[string]*yaml.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			path := join(display, k.Value)
			if first, ok := seen[k.Value]; ok {
				diags.add(Error, Pos{File: file, Line: k.Line, Col: k.Column, Path: path},
					"duplicate key %q (first at line %d, column %d)", k.Value, first.Line, first.Column)
			} else {
				seen[k.Value] = k
			}
			checkDuplicateKeys(file, n.Content[i+1], path, diags)
		}
	}
}

// parseYAML parses one YAML document; a syntax error becomes a diagnostic with its line.
func parseYAML(file string, data []byte, diags *Diagnostics) *yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := 0, strings.TrimPrefix(err.Error(), "yaml: ")
		if rest, ok := strings.CutPrefix(msg, "line "); ok {
			if num, after, ok := strings.Cut(rest, ": "); ok {
				if l, err := strconv.Atoi(num); err == nil {
					line, msg = l, after
				}
			}
		}
		if tl, tc := tabIndent(data); tl > 0 {
			diags.add(Error, Pos{File: file, Line: tl, Col: tc}, "a tab in the indentation: YAML indents with spaces only (YAML syntax: %s)", msg)
			return nil
		}
		diags.add(Error, Pos{File: file, Line: line}, "YAML syntax: %s", msg)
		return nil
	}
	if len(doc.Content) == 0 {
		diags.add(Error, Pos{File: file, Line: 1, Col: 1}, "the file is empty")
		return nil
	}
	checkDuplicateKeys(file, &doc, "", diags)
	root := resolve(doc.Content[0])
	if isNull(root) {
		diags.add(Error, Pos{File: file, Line: 1, Col: 1}, "the file is empty")
		return nil
	}
	return root
}

// tabIndent finds the first line indented with a tab (the usual cause of "found character that cannot start
// any token"): its line and the tab's column, or 0.
func tabIndent(data []byte) (int, int) {
	for i, line := range strings.Split(string(data), "\n") {
		for j := 0; j < len(line); j++ {
			if line[j] == '\t' {
				if strings.TrimSpace(line) == "" {
					break
				}
				return i + 1, j + 1
			}
			if line[j] != ' ' {
				break
			}
		}
	}
	return 0, 0
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func parseBool(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "true", "yes", "on":
		return true, true
	case "false", "no", "off":
		return false, true
	}
	return false, false
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "nothing"
		}
		return fmt.Sprintf("the value %q", n.Value)
	default:
		return "something else"
	}
}

// itemDisplay names a list item by its name field when it has one ("hosts.cp2"), else by index.
func itemDisplay(parent string, i int, item *yaml.Node) string {
	item = resolve(item)
	if item.Kind == yaml.MappingNode {
		for j := 0; j+1 < len(item.Content); j += 2 {
			if item.Content[j].Value == "name" && item.Content[j+1].Kind == yaml.ScalarNode && item.Content[j+1].Value != "" {
				return join(parent, item.Content[j+1].Value)
			}
		}
	}
	return fmt.Sprintf("%s[%d]", parent, i)
}

func join(parent, child string) string {
	if parent == "" {
		return child
	}
	return parent + "." + child
}

// suggest returns `; did you mean "x"?` for the closest known name, or the list of known names.
func suggest(got string, known map[string][]int) string {
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	sort.Strings(names)
	best, bestDist := "", 1<<30
	for _, k := range names {
		if dist := editDistance(strings.ToLower(got), strings.ToLower(k)); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	if best != "" && bestDist <= max(2, len(got)/3) {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return "; known fields: " + strings.Join(names, ", ")
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
