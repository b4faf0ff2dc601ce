package apidoc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// internalAssignments lists the assignments in the package in dir to a
// variable of an internal package (internal.Hook = ...), as the hooks a
// public package sets in its init() for internal code to call. Generated
// files and tests are left out.
func internalAssignments(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	for _, pkg := range parseOurs(t, dir) {
		for name, f := range pkg.Files {
			internal := internalImports(f)
			if len(internal) == 0 {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				as, ok := n.(*ast.AssignStmt)
				if !ok {
					return true
				}
				for _, lhs := range as.Lhs {
					if sel, ok := lhs.(*ast.SelectorExpr); ok {
						if x, ok := sel.X.(*ast.Ident); ok && internal[x.Name] && x.Obj == nil {
							found = append(found, filepath.Base(name)+": "+x.Name+"."+sel.Sel.Name)
						}
					}
				}
				return true
			})
		}
	}
	sort.Strings(found)
	return found
}

// parseOurs parses the package in dir, leaving out tests and generated
// files: their code is not the package's API.
func parseOurs(t *testing.T, dir string) map[string]*ast.Package {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi os.FileInfo) bool {
		n := fi.Name()
		return !strings.HasSuffix(n, "_test.go") && !strings.HasSuffix(n, ".pb.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// internalImports returns the names under which f imports internal
// packages.
func internalImports(f *ast.File) map[string]bool {
	internal := map[string]bool{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if !strings.Contains("/"+p+"/", "/internal/") {
			continue
		}
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		internal[name] = true
	}
	return internal
}

// No public package sets a variable of an internal package: what internal
// code needs of a public package reaches it typed, through what it is
// given (grainrt's handles, silohooks), not through a hook set in init().
func TestNoPublicPackageSetsAnInternalVariable(t *testing.T) {
	for _, dir := range publicPackages(t) {
		for _, s := range internalAssignments(t, dir) {
			t.Errorf("%s sets a variable of an internal package: %s", dir, s)
		}
	}
}

// The check itself finds what it should, and leaves alone a local value
// that shares an import's name.
func TestInternalAssignmentsFindsHooks(t *testing.T) {
	dir := t.TempDir()
	src := `package p

import (
	"example.com/m/internal/grainrt"
	rt "example.com/m/internal/other"
	"example.com/m/proxy"
)

func init() {
	grainrt.NewContext = func(x any) any { return x }
	rt.Hook, proxy.Default = nil, nil
}

func f() {
	var grainrt struct{ NewContext int }
	grainrt.NewContext = 1
}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got := internalAssignments(t, dir)
	want := []string{"p.go: grainrt.NewContext", "p.go: rt.Hook"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
