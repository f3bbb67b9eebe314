package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
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
	err := walkGo(root, func(rel, path string) error {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
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

// The hosts' Kubernetes layout (docs/architecture.md: "a path, port or image: tasks/kubeadm or tasks/images,
// never a literal elsewhere"): no string literal of a non-test file names a path under it but in
// tasks/kubeadm, and in the layers below tasks (inventory, transport), which may not import it.
func TestHostPathsInKubeadm(t *testing.T) {
	roots := []string{"/etc/kubernetes", "/var/lib/kubelet", "/var/lib/etcd", "/var/lib/clusterctl"}
	allowed := []string{"tasks/kubeadm/", "inventory/", "transport/", "test/"}
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := walkGo(root, func(rel, path string) error {
		if slices.ContainsFunc(allowed, func(a string) bool { return strings.HasPrefix(rel, a) }) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, r := range roots {
				if s == r || strings.HasPrefix(s, r+"/") {
					t.Errorf("%s: %q: a path of the hosts' layout belongs in tasks/kubeadm", fset.Position(lit.Pos()), s)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// walkGo calls fn with every non-test Go file under root (its path relative to root, slash-separated),
// leaving out hidden directories and bin.
func walkGo(root string, fn func(rel, path string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel), path)
	})
}

// docs/architecture.md names what it describes: every file or directory it quotes exists, every make
// target and make variable it names is in the Makefile, and every Go name it quotes (`runSteps`,
// `plan.with`, `inventory.Host.NodeIPs`, a test) is declared in the code (its last part: a function,
// method, type, field, constant, variable, inventory key or check name). Spans that name what is not in the
// repository are listed in elsewhere.
func TestArchitectureNamesExist(t *testing.T) {
	// elsewhere: the example network of "Adding a network", a journal's record, client-go's interface, and
	// what the build makes.
	elsewhere := map[string]bool{"tasks/cilium": true, "STEP/HOST": true, "kubernetes.Interface": true, "bin/clusterctl": true, "bin/tools": true}
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	declared, err := declaredNames(root)
	if err != nil {
		t.Fatal(err)
	}
	goName := regexp.MustCompile(`^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(\(\))?$`)
	checked := 0
	for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(string(doc), -1) {
		span := m[1]
		switch {
		case elsewhere[span]:
			continue
		case regexp.MustCompile(`^[A-Z][A-Z_]+$`).MatchString(span):
			if !regexp.MustCompile(`\b` + span + `\b`).Match(makefile) {
				t.Errorf("`%s`: no variable %s in the Makefile", span, span)
			}
		case strings.HasPrefix(span, "make "):
			target := strings.Fields(span)[1]
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(makefile) {
				t.Errorf("`%s`: no target %s in the Makefile", span, target)
			}
		case regexp.MustCompile(`^[\w-]+\.(sh|go|md|json|ya?ml)$`).MatchString(span):
			if matches, _ := filepath.Glob(filepath.Join(root, "*", "*", span)); len(matches) == 0 {
				if matches, _ = filepath.Glob(filepath.Join(root, "*", "*", "*", span)); len(matches) == 0 {
					t.Errorf("`%s`: no such file", span)
				}
			}
		case strings.Contains(span, "/") && !strings.ContainsAny(span, " <{(") && !strings.HasPrefix(span, "/"):
			if matches, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(span, "/")))); len(matches) == 0 {
				t.Errorf("`%s`: no such file or directory", span)
			}
		case goName.MatchString(span) && (strings.Contains(span, ".") || strings.ContainsAny(span[1:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ")):
			parts := strings.Split(strings.TrimSuffix(span, "()"), ".")
			if last := parts[len(parts)-1]; !declared[last] {
				t.Errorf("`%s`: nothing named %s is declared in the code", span, last)
			}
		default:
			continue
		}
		checked++
	}
	if checked < 50 {
		t.Fatalf("only %d names checked in docs/architecture.md", checked)
	}
	t.Logf("%d names checked", checked)
}

// declaredNames are the names declared in the module's Go files, tests included: functions, methods,
// types, struct fields and their yaml keys, interface methods, constants and variables, and the values of
// string constants (check names).
func declaredNames(root string) (map[string]bool, error) {
	names := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			if d != nil && d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.FuncDecl:
				names[x.Name.Name] = true
			case *ast.TypeSpec:
				names[x.Name.Name] = true
			case *ast.ValueSpec:
				for _, id := range x.Names {
					names[id.Name] = true
				}
				for _, v := range x.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						names[s] = true
					}
				}
			case *ast.Field:
				for _, id := range x.Names {
					names[id.Name] = true
				}
				if x.Tag != nil {
					tag, _ := strconv.Unquote(x.Tag.Value)
					key, _, _ := strings.Cut(reflect.StructTag(tag).Get("yaml"), ",")
					names[key] = true
				}
			}
			return true
		})
		return nil
	})
	return names, err
}
