package apidoc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// root is the module's root, from this package's directory.
const root = "../.."

// publicPackages lists the directories of the module's public packages:
// every directory with Go files outside internal/ and testdata, and
// outside the binaries' main packages, whose names nobody imports.
func publicPackages(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "internal" || name == "testdata" || name == "cmd") {
			return filepath.SkipDir
		}
		dirs = append(dirs, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// undocumented lists the exported names of the package in dir that have no
// doc comment: top-level declarations, methods on exported types, and the
// fields of exported structs. Generated files (.pb.go) and tests are left
// out: their code is not ours to word.
func undocumented(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool {
		n := fi.Name()
		return !strings.HasSuffix(n, "_test.go") && !strings.HasSuffix(n, ".pb.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	report := func(pos token.Pos, what string) {
		missing = append(missing, fset.Position(pos).String()+": "+what)
	}
	for _, pkg := range pkgs {
		if pkg.Name == "main" {
			continue
		}
		for _, f := range pkg.Files {
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if !d.Name.IsExported() || d.Doc != nil {
						continue
					}
					if d.Recv != nil && !exportedReceiver(d.Recv) {
						continue
					}
					report(d.Pos(), d.Name.Name)
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						checkSpec(d, spec, report)
					}
				}
			}
		}
	}
	sort.Strings(missing)
	return missing
}

func exportedReceiver(recv *ast.FieldList) bool {
	id := receiverType(recv)
	return id != nil && id.IsExported()
}

// receiverType returns the name of a method's receiver type, or nil.
func receiverType(recv *ast.FieldList) *ast.Ident {
	typ := recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	id, _ := typ.(*ast.Ident)
	return id
}

func checkSpec(d *ast.GenDecl, spec ast.Spec, report func(token.Pos, string)) {
	switch s := spec.(type) {
	case *ast.TypeSpec:
		if !s.Name.IsExported() {
			return
		}
		if s.Doc == nil && d.Doc == nil {
			report(s.Pos(), s.Name.Name)
		}
		if st, ok := s.Type.(*ast.StructType); ok {
			for _, field := range st.Fields.List {
				for _, name := range field.Names {
					if name.IsExported() && field.Doc == nil && field.Comment == nil {
						report(name.Pos(), s.Name.Name+"."+name.Name)
					}
				}
			}
		}
		if it, ok := s.Type.(*ast.InterfaceType); ok {
			for _, m := range it.Methods.List {
				for _, name := range m.Names {
					if name.IsExported() && m.Doc == nil && m.Comment == nil {
						report(name.Pos(), s.Name.Name+"."+name.Name)
					}
				}
			}
		}
	case *ast.ValueSpec:
		for _, name := range s.Names {
			// A name in a documented group (const ( // Codes ... )) is
			// documented by the group's comment.
			if name.IsExported() && s.Doc == nil && s.Comment == nil && d.Doc == nil {
				report(name.Pos(), name.Name)
			}
		}
	}
}

// Every exported name of a public package says what it is: go doc and
// pkg.go.dev are the API's manual.
func TestEveryExportedNameHasADocComment(t *testing.T) {
	for _, dir := range publicPackages(t) {
		for _, m := range undocumented(t, dir) {
			t.Error("no doc comment: " + m)
		}
	}
}

// The check itself finds what it should.
func TestUndocumentedFindsMissingComments(t *testing.T) {
	dir := t.TempDir()
	src := `package p

// Documented is documented.
type Documented struct {
	// Field is documented.
	Field int
	Bare  int
	inner int
}

type Bare int

// Good is documented.
func Good() {}

func Missing() {}

func (Documented) Method() {}

func (d *Documented) unexported() {}

var Loose = 1

// Grouped values share the group's comment.
const (
	A = 1
	B = 2
)
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := undocumented(t, dir)
	var names []string
	for _, m := range got {
		names = append(names, m[strings.LastIndex(m, ": ")+2:])
	}
	want := []string{"Bare", "Documented.Bare", "Loose", "Method", "Missing"}
	sort.Strings(names)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("found %v, want %v", names, want)
	}
}
