package apidoc

import (
	"go/ast"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// internalInSignatures lists the exported signatures of the package in
// dir that name a type of an internal package: parameters and results of
// exported functions and methods, the exported fields of exported structs
// and the methods of exported interfaces. A user can call such a
// function but not name what it takes or returns. Generated files and
// tests are left out.
func internalInSignatures(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	for _, pkg := range parseOurs(t, dir) {
		if pkg.Name == "main" {
			continue
		}
		for _, f := range pkg.Files {
			internal := internalImports(f)
			if len(internal) == 0 {
				continue
			}
			check := func(where string, n ast.Node) {
				ast.Inspect(n, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok {
						if x, ok := sel.X.(*ast.Ident); ok && internal[x.Name] {
							found = append(found, where+": "+x.Name+"."+sel.Sel.Name)
						}
					}
					return true
				})
			}
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Name.IsExported() && (d.Recv == nil || exportedReceiver(d.Recv)) {
						name := d.Name.Name
						if d.Recv != nil {
							name = receiverType(d.Recv).Name + "." + name
						}
						check(pkg.Name+"."+name, d.Type)
					}
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						s, ok := spec.(*ast.TypeSpec)
						if !ok || !s.Name.IsExported() {
							continue
						}
						where := pkg.Name + "." + s.Name.Name
						switch typ := s.Type.(type) {
						case *ast.StructType:
							for _, field := range typ.Fields.List {
								for _, name := range field.Names {
									if name.IsExported() {
										check(where+"."+name.Name, field.Type)
									}
								}
							}
						case *ast.InterfaceType:
							for _, m := range typ.Methods.List {
								check(where, m.Type)
							}
						}
						// An alias of an internal type is left alone: it
						// makes the type nameable, on purpose (grpclimit
						// and connectlimit share calllimit's types so).
					}
				}
			}
		}
	}
	sort.Strings(found)
	return found
}

// knownInternalInSignatures are the exported signatures that still name
// internal types: none, and it should stay so.
var knownInternalInSignatures = map[string]bool{}

// No exported signature of a public package names a type users cannot
// name: what users never call lives in internal/, and what they call
// speaks of public types only.
func TestNoInternalTypeInAnExportedSignature(t *testing.T) {
	for _, dir := range publicPackages(t) {
		for _, s := range internalInSignatures(t, dir) {
			if !knownInternalInSignatures[s] {
				t.Error("an exported signature names an internal type: " + s)
			}
		}
	}
}

// The check itself finds what it should.
func TestInternalInSignaturesFindsInternalTypes(t *testing.T) {
	dir := t.TempDir()
	src := `package p

import (
	"example.com/m/internal/host"
	other "example.com/m/internal/rpc"
	"example.com/m/proxy"
)

type Stats = other.EndpointStats

type S struct {
	Host   *host.Host
	Caller proxy.Caller
	inner  host.Request
}

type I interface{ Deliver(req *host.Request) }

func (s *S) Deliver(req *host.Request)                 {}
func (s *S) Link(silo string) (*other.Endpoint, error) { return nil, nil }
func (s *S) deliver(req *host.Request)                 {}
func New(c proxy.Caller) *S                            { return nil }

type hidden struct{ Host *host.Host }
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got := internalInSignatures(t, dir)
	want := []string{"p.I: host.Request", "p.S.Deliver: host.Request", "p.S.Host: host.Host", "p.S.Link: other.Endpoint"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
