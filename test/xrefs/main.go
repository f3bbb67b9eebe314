// Command xrefs counts, in one Go package, the references between its files: for each pair of non-test
// files, whether one uses something the other declares (a function, type, variable, constant, method or
// field, resolved by the type checker: a local variable that shares a name is not a reference). It prints
// the pairs that refer to each other both ways, and the totals.
//
//	go run ./test/xrefs [-v | -steps] ./playbooks
//
// -v names, for each such pair, what each file uses of the other. -steps prints instead, for the playbooks
// package, each playbook's steps and the parts of the run's plan each reads (kept in
// playbooks/testdata/steps.golden).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	verbose := flag.Bool("v", false, "name what each file of a pair uses of the other")
	steps := flag.Bool("steps", false, "print instead each playbook's steps and what of the run's plan each reads (playbooks only)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: xrefs [-v | -steps] PACKAGE_DIR")
		os.Exit(2)
	}
	if *steps {
		out, err := stepReads(flag.Arg(0))
		if err != nil {
			fmt.Fprintln(os.Stderr, "xrefs:", err)
			os.Exit(1)
		}
		fmt.Print(out)
		return
	}
	refs, files, err := references(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "xrefs:", err)
		os.Exit(1)
	}
	var both []string
	for r := range refs {
		if _, back := refs[[2]string{r[1], r[0]}]; r[0] < r[1] && back {
			both = append(both, r[0]+" <-> "+r[1])
		}
	}
	sort.Strings(both)
	for _, b := range both {
		fmt.Println(b)
		if *verbose {
			a, c, _ := strings.Cut(b, " <-> ")
			fmt.Printf("\t%s uses %s\n\t%s uses %s\n", a, names(refs[[2]string{a, c}]), c, names(refs[[2]string{c, a}]))
		}
	}
	fmt.Printf("%d files, %d file-to-file references, %d pairs referring to each other both ways\n", files, len(refs), len(both))
}

// pkg is a type-checked package: its non-test files and what the type checker found.
type pkg struct {
	fset  *token.FileSet
	files []*ast.File
	info  *types.Info
	types *types.Package
}

// load type-checks the package in dir, its imports from the build's export data.
func load(dir string) (*pkg, error) {
	exports, err := exportData(dir)
	if err != nil {
		return nil, err
	}
	p := &pkg{fset: token.NewFileSet(), info: &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{}, Types: map[ast.Expr]types.TypeAndValue{}}}
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(p.fset, path, nil, 0)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, f)
	}
	lookup := func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	}
	conf := types.Config{Importer: importer.ForCompiler(p.fset, "gc", lookup)}
	p.types, err = conf.Check(p.files[0].Name.Name, p.fset, p.files, p.info)
	return p, err
}

// references returns which of the package's files (in dir) refer to which (from, to), with the names
// used, and how many files it has.
func references(dir string) (map[[2]string]map[string]bool, int, error) {
	p, err := load(dir)
	if err != nil {
		return nil, 0, err
	}
	refs := map[[2]string]map[string]bool{}
	for id, obj := range p.info.Uses {
		// The package's own top-level names, methods and fields; not locals, not other packages'.
		if obj.Pkg() != p.types || (obj.Parent() != nil && obj.Parent() != p.types.Scope()) {
			continue
		}
		from := filepath.Base(p.fset.Position(id.Pos()).Filename)
		to := filepath.Base(p.fset.Position(obj.Pos()).Filename)
		if k := [2]string{from, to}; from != to {
			if refs[k] == nil {
				refs[k] = map[string]bool{}
			}
			refs[k][obj.Name()] = true
		}
	}
	return refs, len(p.files), nil
}

// names lists a set's names, sorted.
func names(set map[string]bool) string {
	var out []string
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// exportData maps the import path of each package dir depends on to its compiled export data.
func exportData(dir string) (map[string]string, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", "./"+filepath.Clean(dir))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, export, ok := strings.Cut(sc.Text(), "\t"); ok {
			m[path] = export
		}
	}
	return m, sc.Err()
}
