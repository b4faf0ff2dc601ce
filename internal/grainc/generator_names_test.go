package grainc

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests type-check generated code as the compiler would, against the
// export data of the packages it imports, so that they catch code that
// parses but does not compile.

// exportData maps import paths to their compiled export data, so that the
// generated code can be type-checked as the compiler would check it.
var exportData = sync.OnceValues(func() (map[string]string, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}",
		"github.com/granary-go/granary/proxy",
		"github.com/granary-go/granary/actor",
		"github.com/granary-go/granary/proxy/wirecodec",
		"github.com/granary-go/granary/proxy/granarypb",
		"google.golang.org/protobuf/proto",
		"google.golang.org/protobuf/reflect/protoreflect",
		"google.golang.org/protobuf/runtime/protoimpl",
		"google.golang.org/protobuf/encoding/protowire",
		"unicode/utf8", "context", "reflect", "sync", "unsafe",
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	m := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if p, file, ok := strings.Cut(sc.Text(), "="); ok && file != "" {
			m[p] = file
		}
	}
	return m, sc.Err()
})

// exportImporter serves the packages generated in the test from source and
// every other package from its export data.
type exportImporter struct {
	gc    types.Importer
	local map[string]*types.Package
}

func (i *exportImporter) Import(p string) (*types.Package, error) {
	if pkg, ok := i.local[p]; ok {
		return pkg, nil
	}
	return i.gc.Import(p)
}

// typeCheckGenerated generates the given in-memory protos and type-checks
// every generated Go package (pkgs lists their go_package import paths in
// dependency order; each proto's go_package's last element is its Go
// package name). It returns the type errors of all packages.
func typeCheckGenerated(t *testing.T, sources map[string]string, pkgs []string, files ...string) []string {
	t.Helper()
	out, err := Generate(inMemory(sources, files...))
	require.NoError(t, err, "the generator accepted the contract, so its output must compile")

	exports, err := exportData()
	require.NoError(t, err)
	fset := token.NewFileSet()
	imp := &exportImporter{
		gc: importer.ForCompiler(fset, "gc", func(p string) (io.ReadCloser, error) {
			f, ok := exports[p]
			if !ok {
				return nil, fmt.Errorf("no export data for %s", p)
			}
			return os.Open(f)
		}),
		local: make(map[string]*types.Package),
	}
	var errs []string
	for _, pkgPath := range pkgs {
		var parsed []*ast.File
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for k := range out {
				if !yield(k) {
					return
				}
			}
		}) {
			f, err := parser.ParseFile(fset, name, out[name], 0)
			require.NoError(t, err)
			if f.Name.Name == path.Base(pkgPath) {
				parsed = append(parsed, f)
			}
		}
		require.NotEmpty(t, parsed, "no generated file for %s", pkgPath)
		conf := types.Config{Importer: imp, Error: func(err error) { errs = append(errs, err.Error()) }}
		pkg, _ := conf.Check(pkgPath, fset, parsed, nil)
		imp.local[pkgPath] = pkg
	}
	return errs
}

// The counter example is the control: its generated code type-checks with
// this harness.
func TestTypeCheckHarnessAcceptsCounter(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "examples", "counter", "counter.proto"))
	require.NoError(t, err)
	errs := typeCheckGenerated(t, map[string]string{"counter.proto": string(src)},
		[]string{"github.com/granary-go/granary/examples/counter"}, "counter.proto")
	require.Empty(t, errs)
}

// Generated identifiers that would be declared twice in one Go package are
// refused, naming both elements of the contract they come from, rather
// than written as code that does not compile.
func TestClashingGoNamesAreRefused(t *testing.T) {
	const header = `syntax = "proto3"; package p; option go_package = "example.com/p"; `
	tests := []struct {
		name    string
		sources map[string]string
		files   []string
		want    []string // in the error, besides ErrNameCollision
	}{
		{
			name:    "underscored service and method",
			sources: map[string]string{"p.proto": header + `message M {} service A { rpc B_C(M) returns (M); } service A_B { rpc C(M) returns (M); }`},
			want:    []string{"p.proto: ", "method p.A_B/C", "method p.A/B_C", "A_B_C_Method", "example.com/p"},
		},
		{
			name:    "methods differing in case",
			sources: map[string]string{"p.proto": header + `message M {} service S { rpc get(M) returns (M); rpc Get(M) returns (M); }`},
			want:    []string{"p.proto: ", "p.S/get", "p.S/Get", "Go method Get"},
		},
		{
			name:    "message named like the reference",
			sources: map[string]string{"p.proto": header + `message M {} message SRef {} service S { rpc Get(M) returns (M); }`},
			want:    []string{"p.proto: ", "the reference type of service p.S", "message p.SRef", "be SRef"},
		},
		{
			name:    "service named like another's constructor",
			sources: map[string]string{"p.proto": header + `service S {} service NewS {}`},
			want:    []string{"the reference type of service p.NewS", "the reference constructor of service p.S", "be NewSRef"},
		},
		{
			name:    "enum value named like a method descriptor",
			sources: map[string]string{"p.proto": header + `enum S_Get { Method = 0; } message M {} service S { rpc Get(M) returns (M); }`},
			want:    []string{"method p.S/Get", "value Method of enum p.S_Get", "be S_Get_Method"},
		},
		{
			name:    "oneof wrapper named like a method descriptor",
			sources: map[string]string{"p.proto": header + `message S_Get { oneof o { int32 Method = 1; } } service S { rpc Get(S_Get) returns (S_Get); }`},
			want:    []string{"method p.S/Get", "oneof field p.S_Get.Method", "be S_Get_Method"},
		},
		{
			// Found in the .pb.go itself: any declaration of it counts.
			name: "default value constant named like a method descriptor",
			sources: map[string]string{"p.proto": `syntax = "proto2"; package p; option go_package = "example.com/p";
message M { optional int32 f_Method = 1 [default = 7]; } service Default_M { rpc F(M) returns (M); }`},
			want: []string{"method p.Default_M/F", "field p.M.f_Method", "be Default_M_F_Method"},
		},
		{
			name: "services of two files of one Go package",
			sources: map[string]string{
				"a.proto": `syntax = "proto3"; package p; option go_package = "example.com/p"; service S {}`,
				"b.proto": `syntax = "proto3"; package q; option go_package = "example.com/p"; service S {}`,
			},
			files: []string{"a.proto", "b.proto"},
			want:  []string{"b.proto: ", "service q.S", "service p.S (a.proto)", "be SGrainType"},
		},
		{
			// b.proto is not generated, but its .pb.go is in the package.
			name: "message of an imported file of the same Go package",
			sources: map[string]string{
				"a.proto": `syntax = "proto3"; package p; option go_package = "example.com/p"; import "b.proto"; service S { rpc Get(M) returns (M); }`,
				"b.proto": `syntax = "proto3"; package p; option go_package = "example.com/p"; message M {} message SGrain {}`,
			},
			want: []string{"a.proto: ", "the grain interface of service p.S", "message p.SGrain (b.proto)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := tt.files
			if files == nil {
				files = []string{"p.proto"}
				if _, ok := tt.sources["a.proto"]; ok {
					files = []string{"a.proto"}
				}
			}
			_, err := Generate(inMemory(tt.sources, files...))
			require.ErrorIs(t, err, ErrNameCollision)
			for _, want := range tt.want {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

// Neither a parameter nor a local of generated code hides an imported
// package that its function body names, whatever the package is called:
// a request type from a Go package named grain once read "grain.Req is not
// a type" in the dispatch function.
func TestImportedPackageNamesAreNotShadowed(t *testing.T) {
	for _, name := range []string{
		// Named in the reference methods, the reference constructor, the
		// registration function and the dispatch functions.
		"r", "ctx", "in", "opts", "out", "err", "c", "key", "factory", "id", "grain", "req",
		// Named like the packages the generated code imports itself.
		"proxy", "actor", "context", "proto",
	} {
		t.Run(name, func(t *testing.T) {
			pkg := "example.com/app/" + name
			errs := typeCheckGenerated(t, map[string]string{
				"types/types.proto": `syntax = "proto3"; package app.types; option go_package = "` + pkg + `";
message Req {} message Rep {}`,
				"api/api.proto": `syntax = "proto3"; package app.api; option go_package = "example.com/app/api";
import "types/types.proto";
service Svc { rpc Do(app.types.Req) returns (app.types.Rep); }`,
			}, []string{pkg, "example.com/app/api"}, "types/types.proto", "api/api.proto")
			require.Empty(t, errs, "generated code does not compile")
		})
	}
}

// A service without methods, a contract being sketched, compiles: its
// file imports only what it uses.
func TestServiceWithoutMethodsCompiles(t *testing.T) {
	errs := typeCheckGenerated(t, map[string]string{
		"p.proto": `syntax = "proto3"; package a.b.c; option go_package = "example.com/p"; service S {}`,
	}, []string{"example.com/p"}, "p.proto")
	require.Empty(t, errs, "generated code does not compile")
}

// Services of several proto files can share a Go package, and a file's
// services can use the messages of another file of its package.
func TestFilesSharingAGoPackageCompile(t *testing.T) {
	errs := typeCheckGenerated(t, map[string]string{
		"a.proto": `syntax = "proto3"; package p; option go_package = "example.com/p"; import "b.proto";
service S { rpc Get(q.M) returns (q.M); }`,
		"b.proto": `syntax = "proto3"; package q; option go_package = "example.com/p"; message M {}
service T { rpc Get(M) returns (M); rpc Put(M) returns (M); }`,
	}, []string{"example.com/p"}, "a.proto", "b.proto")
	require.Empty(t, errs, "generated code does not compile")
}
