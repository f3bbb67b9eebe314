package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/printer"
	"go/types"
	"slices"
	"strconv"
	"strings"
)

// stepReads lists, for the playbooks package in dir, each list of steps (a function making Steps) and,
// for each step, the fields of the run's plan (type plan, with those of the types it embeds) that its Run
// reads, directly or through the package's functions it calls.
func stepReads(dir string) (string, error) {
	p, err := load(dir)
	if err != nil {
		return "", err
	}
	fields, err := planFields(p)
	if err != nil {
		return "", err
	}
	g := &callGraph{p: p, fields: fields, bodies: map[*types.Func]*ast.FuncDecl{}, memo: map[ast.Node]map[string]bool{}}
	for _, f := range p.files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				g.bodies[p.info.Defs[fd.Name].(*types.Func)] = fd
			}
		}
	}
	var b strings.Builder
	b.WriteString("# Each playbook's steps, and the fields of the run's plan each reads (directly or through what it calls).\n")
	b.WriteString("# go test ./test/xrefs -run TestPlaybookSteps -update rewrites this file; review the diff.\n")
	for _, f := range p.files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			lines := g.steps(fd)
			if len(lines) == 0 {
				continue
			}
			fmt.Fprintf(&b, "\n%s\n%s", funcName(fd), strings.Join(lines, ""))
		}
	}
	return b.String(), nil
}

// planFields are the fields of the type plan, and of the types it embeds, by their objects.
func planFields(p *pkg) (map[*types.Var]bool, error) {
	obj, ok := p.types.Scope().Lookup("plan").(*types.TypeName)
	if !ok {
		return nil, fmt.Errorf("no type plan in %s", p.types.Path())
	}
	fields := map[*types.Var]bool{}
	var add func(st *types.Struct)
	add = func(st *types.Struct) {
		for i := range st.NumFields() {
			f := st.Field(i)
			if inner, ok := f.Type().Underlying().(*types.Struct); ok && f.Embedded() {
				add(inner)
				continue
			}
			fields[f] = true
		}
	}
	add(obj.Type().Underlying().(*types.Struct))
	return fields, nil
}

// callGraph finds what of the plan a piece of code reads, following calls to the package's functions.
type callGraph struct {
	p      *pkg
	fields map[*types.Var]bool
	bodies map[*types.Func]*ast.FuncDecl
	memo   map[ast.Node]map[string]bool
}

// reads are the plan's fields n reads, with those of the functions it calls (each followed once).
func (g *callGraph) reads(n ast.Node) map[string]bool {
	if r, ok := g.memo[n]; ok {
		return r
	}
	out := map[string]bool{}
	g.memo[n] = out // a recursive call finds what is known so far
	written := map[ast.Expr]bool{}
	ast.Inspect(n, func(x ast.Node) bool {
		if as, ok := x.(*ast.AssignStmt); ok {
			for _, l := range as.Lhs {
				written[l] = true
			}
		}
		return true
	})
	ast.Inspect(n, func(x ast.Node) bool {
		var obj types.Object
		switch x := x.(type) {
		case *ast.SelectorExpr:
			if written[x] {
				return true // a new plan's field set (in a with), not read
			}
			if sel := g.p.info.Selections[x]; sel != nil {
				obj = sel.Obj()
			} else {
				obj = g.p.info.Uses[x.Sel]
			}
		case *ast.Ident:
			obj = g.p.info.Uses[x]
		}
		switch o := obj.(type) {
		case *types.Var:
			if g.fields[o] {
				out[o.Name()] = true
			}
		case *types.Func:
			if fd := g.bodies[o]; fd != nil && !isPlanWith(o) {
				for f := range g.reads(fd.Body) {
					out[f] = true
				}
			}
		}
		return true
	})
	return out
}

// isPlanWith reports whether f is plan.with, which copies every field to make a new plan: it reads none
// for a step.
func isPlanWith(f *types.Func) bool {
	recv := f.Signature().Recv()
	if recv == nil || f.Name() != "with" {
		return false
	}
	t := recv.Type()
	if ptr, ok := t.(*types.Pointer); ok {
		t = ptr.Elem()
	}
	named, ok := t.(*types.Named)
	return ok && named.Obj().Name() == "plan"
}

// steps are the lines of the steps fd makes: each step's name, what its Run (or Plan) reads, and what the
// runner is told of it: that it makes the plan the next steps take, that it resumes host by host from the
// run's journal, that it leaves work in the background until a later step.
func (g *callGraph) steps(fd *ast.FuncDecl) []string {
	var lines []string
	ast.Inspect(fd.Body, func(x ast.Node) bool {
		lit, ok := x.(*ast.CompositeLit)
		if !ok {
			return true
		}
		if named, ok := g.p.info.Types[lit].Type.(*types.Named); !ok || named.Obj().Name() != "Step" || named.Obj().Pkg() != g.p.types {
			return true
		}
		var name, note string
		var run ast.Node
		for _, e := range lit.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			switch kv.Key.(*ast.Ident).Name {
			case "Name":
				name = g.text(kv.Value)
			case "Run":
				run = kv.Value
			case "Plan":
				run, note = kv.Value, note+"; makes the plan"
			case "Resume":
				run, note = kv.Value, note+"; resumes from the run's journal"
			case "Until":
				note += "; in the background until " + g.text(kv.Value)
			}
		}
		var read []string
		if run != nil {
			for f := range g.reads(run) {
				read = append(read, f)
			}
		}
		slices.Sort(read)
		if len(read) == 0 {
			read = []string{"-"}
		}
		lines = append(lines, fmt.Sprintf("  %-22s %s%s\n", name, strings.Join(read, ", "), note))
		return true
	})
	return lines
}

// text is a step name: a string's value, or the expression that makes it.
func (g *callGraph) text(e ast.Expr) string {
	if lit, ok := e.(*ast.BasicLit); ok {
		if s, err := strconv.Unquote(lit.Value); err == nil {
			return s
		}
	}
	var b bytes.Buffer
	_ = printer.Fprint(&b, g.p.fset, e)
	return b.String()
}

// funcName is a function's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
