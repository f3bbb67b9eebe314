// Command xrefs counts, in one Go package directory, the references between its files: for each pair of
// non-test files, whether one uses a top-level name (function, type, variable, constant, method) the
// other declares. It prints the pairs that refer to each other both ways, and the totals.
//
//	go run ./test/xrefs playbooks
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: xrefs DIR")
		os.Exit(2)
	}
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(os.Args[1], "*.go"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// name -> the files declaring it (a method name may be declared on several types: a use of it counts
	// as a reference to each of those files)
	declared := map[string]map[string]bool{}
	declare := func(name, file string) {
		if declared[name] == nil {
			declared[name] = map[string]bool{}
		}
		declared[name][file] = true
	}
	uses := map[string]map[string]bool{}
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		{
			file := filepath.Base(path)
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					declare(d.Name.Name, file)
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							declare(s.Name.Name, file)
						case *ast.ValueSpec:
							for _, n := range s.Names {
								declare(n.Name, file)
							}
						}
					}
				}
			}
			used := map[string]bool{}
			ast.Inspect(f, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok {
					used[id.Name] = true
				}
				return true
			})
			uses[file] = used
		}
	}
	refs := map[[2]string]bool{} // from file -> to file
	for file, used := range uses {
		for name := range used {
			for to := range declared[name] {
				if to != file {
					refs[[2]string{file, to}] = true
				}
			}
		}
	}
	var both []string
	for r := range refs {
		if r[0] < r[1] && refs[[2]string{r[1], r[0]}] {
			both = append(both, r[0]+" <-> "+r[1])
		}
	}
	sort.Strings(both)
	for _, b := range both {
		fmt.Println(b)
	}
	fmt.Printf("%d files, %d file-to-file references, %d pairs referring to each other both ways\n", len(uses), len(refs), len(both))
}
