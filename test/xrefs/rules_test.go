package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The size caps of docs/architecture.md: no non-test Go file over maxFileLines lines, no function over
// maxFuncLines (from its func keyword to its closing brace). golangci-lint's funlen holds functions to the
// same cap; this holds both without it.
const (
	maxFileLines = 600
	maxFuncLines = 80
)

func TestSizes(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	files, funcs := 0, 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			t.Errorf("%s: %d lines, more than %d: split it along what it does", rel, n, maxFileLines)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			funcs++
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
				t.Errorf("%s: %s is %d lines, more than %d: split it along what it does", fset.Position(fn.Pos()), fn.Name.Name, n, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d Go files found under %s", files, root)
	}
	t.Logf("%d files, %d functions", files, funcs)
}

// No package reaches up (docs/architecture.md): tasks never import playbooks or cmd, playbooks never
// imports cmd, and transport and inventory import none of them.
func TestPackagesLayered(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("needs the go command")
	}
	const module = "github.com/clusterctl/clusterctl"
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// above[p] are the layers p must not import.
	above := map[string][]string{
		"tasks":     {"playbooks", "cmd"},
		"playbooks": {"cmd"},
		"transport": {"tasks", "playbooks", "cmd", "inventory"},
		"inventory": {"tasks", "playbooks", "cmd", "transport"},
	}
	layer := func(path string) string {
		rest, ok := strings.CutPrefix(path, module+"/")
		if !ok {
			return ""
		}
		first, _, _ := strings.Cut(rest, "/")
		return first
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	pkgs := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs++
		for _, imp := range p.Imports {
			for _, banned := range above[layer(p.ImportPath)] {
				if layer(imp) == banned {
					t.Errorf("%s imports %s: %s is above %s", p.ImportPath, imp, banned, layer(p.ImportPath))
				}
			}
		}
	}
	if pkgs < 20 {
		t.Fatalf("go list printed %d packages", pkgs)
	}
	t.Logf("%d packages", pkgs)
}
