// Command xrefs counts, in one Go package, the references between its files: for each pair of non-test
// files, whether one uses something the other declares (a function, type, variable, constant, method or
// field, resolved by the type checker: a local variable that shares a name is not a reference). It prints
// the pairs that refer to each other both ways, and the totals.
//
//	go run ./test/xrefs [-v] ./playbooks
//
// -v names, for each such pair, what each file uses of the other.
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
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: xrefs [-v] PACKAGE_DIR")
		os.Exit(2)
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

// references type-checks the package in dir (its imports from the build's export data) and returns which
// of its files refer to which (from, to), and how many files it has.
func references(dir string) (map[[2]string]map[string]bool, int, error) {
	exports, err := exportData(dir)
	if err != nil {
		return nil, 0, err
	}
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, 0, err
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return nil, 0, err
		}
		files = append(files, f)
	}
	lookup := func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	pkg, err := conf.Check(files[0].Name.Name, fset, files, info)
	if err != nil {
		return nil, 0, err
	}
	refs := map[[2]string]map[string]bool{}
	for id, obj := range info.Uses {
		// The package's own top-level names, methods and fields; not locals, not other packages'.
		if obj.Pkg() != pkg || (obj.Parent() != nil && obj.Parent() != pkg.Scope()) {
			continue
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(obj.Pos()).Filename)
		if k := [2]string{from, to}; from != to {
			if refs[k] == nil {
				refs[k] = map[string]bool{}
			}
			refs[k][obj.Name()] = true
		}
	}
	return refs, len(files), nil
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
