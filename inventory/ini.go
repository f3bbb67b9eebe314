package inventory

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// parseAnsibleINI reads an Ansible INI inventory: [group] sections of host lines with inline key=value
// variables, [group:children] and [group:vars] sections, host ranges such as node[01:20], and hosts before any
// section (group ungrouped).
func parseAnsibleINI(file string, data []byte, dir string, diags *Diagnostics) *Inventory {
	a := newAnsible(file, diags)
	if strings.TrimSpace(string(data)) == "" {
		diags.add(Error, Pos{File: file, Line: 1, Col: 1}, "the file is empty")
		return nil
	}
	group, kind := a.group("ungrouped", Pos{File: file, Line: 1, Col: 1, Path: "ungrouped"}), ""
	a.groups["ungrouped"].defined = true
	a.groups["all"].addChild("ungrouped", a.groups["ungrouped"].pos)
	for i, raw := range strings.Split(string(data), "\n") {
		line := strings.TrimRight(raw, "\r")
		text := strings.TrimSpace(line)
		if text == "" || text[0] == '#' || text[0] == ';' {
			continue
		}
		at := Pos{File: file, Line: i + 1, Col: strings.Index(line, text) + 1}
		if text[0] == '[' {
			end := strings.IndexByte(text, ']')
			if end < 0 {
				diags.add(Error, at, "section header %q has no closing ']'", text)
				group, kind = nil, ""
				continue
			}
			if rest := strings.TrimSpace(text[end+1:]); rest != "" && rest[0] != '#' && rest[0] != ';' {
				diags.add(Error, at, "unexpected %q after the section header", rest)
			}
			name, suffix, _ := strings.Cut(text[1:end], ":")
			if name == "" || strings.ContainsAny(name, " \t") {
				diags.add(Error, at, "%q is not a group name", name)
				group, kind = nil, ""
				continue
			}
			switch suffix {
			case "", "children", "vars":
			default:
				diags.add(Error, at, "unknown section type %q (expected [%s], [%s:children] or [%s:vars])", ":"+suffix, name, name, name)
				group, kind = nil, ""
				continue
			}
			at.Path = text[:end+1]
			group, kind = a.group(name, at), suffix
			switch {
			case suffix != "vars":
				group.defined = true
			case group.varsAt == nil:
				vat := at
				group.varsAt = &vat
			}
			if name != "all" && name != "ungrouped" && suffix != "vars" {
				a.groups["all"].addChild(name, at)
			}
			continue
		}
		if group == nil {
			continue // the section header was reported
		}
		switch kind {
		case "":
			a.iniHost(group, line, at)
		case "children":
			child := strings.Fields(text)[0]
			cat := Pos{File: file, Line: at.Line, Col: at.Col, Path: group.name + ":children." + child}
			a.group(child, cat)
			group.addChild(child, cat)
		case "vars":
			name, value, ok := strings.Cut(text, "=")
			name = strings.TrimSpace(name)
			if !ok || name == "" {
				diags.add(Error, at, "expected NAME=VALUE in [%s:vars], got %q", group.name, text)
				continue
			}
			at.Path = group.name + ":vars." + name
			group.vars = append(group.vars, avar{name: name, value: iniValue(stripComment(strings.TrimSpace(value)), at), pos: at})
		}
	}
	a.checkGroups()
	a.readVarDirs(dir)
	return a.build(FormatAnsibleINI)
}

func (a *ansible) iniHost(g *agroup, line string, at Pos) {
	tokens, err := splitTokens(line)
	if err != nil {
		a.diags.add(Error, at, "%v", err)
		return
	}
	if len(tokens) == 0 {
		return
	}
	names, err := expandRange(tokens[0].text)
	if err != nil {
		a.diags.add(Error, Pos{File: at.File, Line: at.Line, Col: tokens[0].col}, "%v", err)
		return
	}
	for _, name := range names {
		h := a.host(name, Pos{File: at.File, Line: at.Line, Col: tokens[0].col, Path: g.name + "." + name})
		g.addHost(name)
		for _, tok := range tokens[1:] {
			p := Pos{File: at.File, Line: at.Line, Col: tok.col}
			k, v, ok := strings.Cut(tok.text, "=")
			if !ok || k == "" {
				a.diags.add(Error, p, "expected NAME=VALUE after the host name, got %q", tok.text)
				continue
			}
			p.Path = g.name + "." + name + "." + k
			h.vars = append(h.vars, avar{name: k, value: iniValue(v, p), pos: p})
		}
	}
}

type token struct {
	text string
	col  int
}

// splitTokens splits a host line at blanks outside quotes, removes the quotes, and stops at a comment.
func splitTokens(line string) ([]token, error) {
	var out []token
	var cur strings.Builder
	start, quote, in := 0, byte(0), false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '"' || c == '\'':
			if !in {
				start, in = i, true
			}
			quote = c
		case c == ' ' || c == '\t':
			if in {
				out = append(out, token{cur.String(), start + 1})
				cur.Reset()
				in = false
			}
		case c == '#' && !in:
			return out, nil
		default:
			if !in {
				start, in = i, true
			}
			cur.WriteByte(c)
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote %c", quote)
	}
	if in {
		out = append(out, token{cur.String(), start + 1})
	}
	return out, nil
}

func stripComment(v string) string {
	if v != "" && (v[0] == '"' || v[0] == '\'') {
		return v
	}
	if i := strings.Index(v, " #"); i >= 0 {
		return strings.TrimSpace(v[:i])
	}
	return v
}

// iniValue reads a value as Ansible does (Python-literal-like: strings, numbers, booleans, lists, dicts),
// through YAML's flow syntax, and places every node at the variable.
func iniValue(v string, at Pos) *yaml.Node {
	var doc yaml.Node
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
	if err := yaml.Unmarshal([]byte(v), &doc); err == nil && len(doc.Content) == 1 {
		n = doc.Content[0]
	}
	var place func(*yaml.Node)
	place = func(x *yaml.Node) {
		x.Line, x.Column = at.Line, at.Col
		for _, c := range x.Content {
			place(c)
		}
	}
	place(n)
	return n
}

const maxRange = 10000

// expandRange expands Ansible host ranges: web[1:3] is web1 web2 web3, db[01:10:2] keeps the width, and
// [a:c] ranges over letters. Several ranges in one pattern multiply.
func expandRange(pattern string) ([]string, error) {
	open := strings.IndexByte(pattern, '[')
	if open < 0 {
		return []string{pattern}, nil
	}
	end := strings.IndexByte(pattern[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("host range %q has no closing ']'", pattern)
	}
	end += open
	parts := strings.Split(pattern[open+1:end], ":")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("host range %q: expected [START:END] or [START:END:STEP]", pattern)
	}
	step := 1
	if len(parts) == 3 {
		s, err := strconv.Atoi(parts[2])
		if err != nil || s < 1 {
			return nil, fmt.Errorf("host range %q: step %q is not a positive number", pattern, parts[2])
		}
		step = s
	}
	var items []string
	lo, errLo := strconv.Atoi(parts[0])
	hi, errHi := strconv.Atoi(parts[1])
	switch {
	case errLo == nil && errHi == nil:
		if hi < lo || hi-lo >= maxRange {
			return nil, fmt.Errorf("host range %q: bad bounds", pattern)
		}
		width := 0
		if len(parts[0]) > 1 && parts[0][0] == '0' {
			width = len(parts[0])
		}
		// hi-i >= step rather than i+step <= hi: the sum can overflow at the top of the int range.
		for i := lo; ; i += step {
			items = append(items, fmt.Sprintf("%0*d", width, i))
			if hi-i < step {
				break
			}
		}
	case isLetter(parts[0]) && isLetter(parts[1]) && parts[0] <= parts[1]:
		for c := parts[0][0]; c <= parts[1][0]; c += byte(step) {
			items = append(items, string(c))
			if int(c)+step > 255 {
				break
			}
		}
	default:
		return nil, fmt.Errorf("host range %q: bounds must both be numbers or both single letters", pattern)
	}
	rest, err := expandRange(pattern[end+1:])
	if err != nil {
		return nil, err
	}
	if len(items)*len(rest) > maxRange {
		return nil, fmt.Errorf("host range %q expands to more than %d hosts", pattern, maxRange)
	}
	var out []string
	for _, it := range items {
		for _, r := range rest {
			out = append(out, pattern[:open]+it+r)
		}
	}
	return out, nil
}

func isLetter(s string) bool {
	return len(s) == 1 && (s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z')
}
