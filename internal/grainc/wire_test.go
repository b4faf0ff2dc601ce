package grainc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The generated codecs themselves are tested against protobuf in package
// wiretest; these tests cover which messages get one.

// codecTypes parses a generated wire file and returns the types that got
// both codec methods, sorted.
func codecTypes(t *testing.T, src []byte) []string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "wire.pb.go", src, 0)
	require.NoError(t, err)
	methods := make(map[string]int)
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Recv == nil {
			continue
		}
		if fn.Name.Name == appendMethod || fn.Name.Name == mergeMethod {
			recv := fn.Recv.List[0].Type.(*ast.StarExpr).X.(*ast.Ident).Name
			methods[recv]++
		}
	}
	var types []string
	for typ, n := range methods {
		assert.Equal(t, 2, n, "%s has one codec method without the other", typ)
		types = append(types, typ)
	}
	slices.Sort(types)
	return types
}

func TestWhichMessagesGetCodecs(t *testing.T) {
	tests := []struct {
		name      string
		source    string
		parameter string
		want      []string // nil: no wire file
	}{
		{
			name: "supported fields",
			source: `syntax = "proto3";
message A { int32 a = 1; repeated string b = 2; A c = 3; repeated E d = 4; bytes e = 5; repeated double f = 6 [packed = false]; }
message Empty {}
enum E { E_ZERO = 0; }`,
			want: []string{"A", "Empty"},
		},
		{
			name: "nested messages",
			source: `syntax = "proto3";
message Outer { message Inner { int32 x = 1; message Deepest { Outer o = 1; } } Inner i = 1; }`,
			want: []string{"Outer", "Outer_Inner", "Outer_Inner_Deepest"},
		},
		{
			name: "oneof, map and optional",
			source: `syntax = "proto3";
message Oneof { oneof o { int32 a = 1; } }
message Map { map<string, int32> m = 1; }
message Optional { optional int32 x = 1; }
message Fine { Oneof o = 1; repeated Map m = 2; Optional p = 3; }`,
			want: []string{"Fine"},
		},
		{
			name: "field hiding a method",
			source: `syntax = "proto3";
message Append { int32 append_granary_wire = 1; }
message Merge { string merge_granary_wire = 1; }
message Getter { int32 granary_wire = 1; }`,
			want: []string{"Getter"},
		},
		{
			name: "lazy message field",
			source: `syntax = "proto3";
message M { M m = 1 [lazy = true]; }
message U { U u = 1 [unverified_lazy = true]; }`,
		},
		{
			name:   "proto2",
			source: `syntax = "proto2"; message M { optional int32 x = 1; repeated int32 y = 2; }`,
		},
		{
			name:   "editions",
			source: `edition = "2023"; message M { int32 x = 1 [features.field_presence = IMPLICIT]; }`,
		},
		{
			name:      "hybrid API",
			source:    `syntax = "proto3"; message M { int32 x = 1; }`,
			parameter: "default_api_level=API_HYBRID",
		},
		{
			name:      "opaque API",
			source:    `syntax = "proto3"; message M { int32 x = 1; }`,
			parameter: "default_api_level=API_OPAQUE",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := inMemory(map[string]string{
				"w/w.proto": tt.source + "\noption go_package = \"example.com/w\";\n",
			}, "w/w.proto")
			if tt.parameter != "" {
				opts.Parameter += "," + tt.parameter
			}
			out, err := Generate(opts)
			require.NoError(t, err)
			require.Contains(t, out, filepath.Join("w", "w.pb.go"))
			wire, ok := out[filepath.Join("w", "w_wire.pb.go")]
			if tt.want == nil {
				assert.False(t, ok, "a wire file was written:\n%s", wire)
				return
			}
			require.True(t, ok, "no wire file was written")
			assert.Equal(t, tt.want, codecTypes(t, wire))
		})
	}
}

func TestCodecsReachingRequiredFieldsAreSkipped(t *testing.T) {
	out, err := Generate(inMemory(map[string]string{
		"old/old.proto": `syntax = "proto2"; package old; option go_package = "example.com/old";
message Required { required int32 x = 1; }
message Holder { optional Required r = 1; }
message Extendable { extensions 100 to 200; }
message Plain { optional int32 x = 1; }`,
		"new/new.proto": `syntax = "proto3"; package nu; option go_package = "example.com/new";
import "old/old.proto";
message Direct { old.Required r = 1; }
message Indirect { repeated old.Holder h = 1; }
message Extensions { old.Extendable e = 1; }
message Fine { old.Plain p = 1; }
message Recursive { Recursive r = 1; Direct d = 2; }`,
	}, "old/old.proto", "new/new.proto"))
	require.NoError(t, err)
	assert.NotContains(t, out, filepath.Join("old", "old_wire.pb.go"))
	wire := out[filepath.Join("new", "new_wire.pb.go")]
	require.NotNil(t, wire)
	assert.Equal(t, []string{"Fine"}, codecTypes(t, wire))
	// A message of another package is encoded through proto.
	assert.Contains(t, string(wire), "(proto.MarshalOptions{}).MarshalAppend(b, m.P)")
}

func TestCodecsCallEachOtherWithinAPackage(t *testing.T) {
	out, err := Generate(inMemory(map[string]string{
		"p/a.proto": `syntax = "proto3"; package p; option go_package = "example.com/p";
message A { int32 x = 1; }`,
		"p/b.proto": `syntax = "proto3"; package p; option go_package = "example.com/p";
import "p/a.proto";
import "q/c.proto";
message B { A a = 1; q.C c = 2; }`,
		"q/c.proto": `syntax = "proto3"; package q; option go_package = "example.com/q";
message C { int32 x = 1; }`,
	}, "p/a.proto", "p/b.proto", "q/c.proto"))
	require.NoError(t, err)
	wire := string(out[filepath.Join("p", "b_wire.pb.go")])
	assert.Contains(t, wire, "m.A.mergeGranaryWire(v, depth)", "same package: called with the depth")
	assert.Contains(t, wire, "(proto.UnmarshalOptions{Merge: true, RecursionLimit: depth}).Unmarshal(v, m.C)",
		"another package: through proto")
	assert.Contains(t, out, filepath.Join("q", "c_wire.pb.go"))
}

func TestFileWithoutServicesGetsWireFile(t *testing.T) {
	out, err := Generate(inMemory(map[string]string{
		"m.proto": `syntax = "proto3"; package m; option go_package = "example.com/m"; message M { int32 x = 1; }`,
	}, "m.proto"))
	require.NoError(t, err)
	assert.Len(t, out, 2)
	assert.Contains(t, out, "m.pb.go")
	assert.Equal(t, []string{"M"}, codecTypes(t, out["m_wire.pb.go"]))
}

func TestCodecsNeverNameAShadowedPackage(t *testing.T) {
	out, err := Generate(inMemory(map[string]string{
		"m/m.proto": `syntax = "proto3"; package m; option go_package = "example.com/m";
message M { int32 x = 1; }
enum E { E_ZERO = 0; }`,
		"mm/mm.proto": `syntax = "proto3"; package mm; option go_package = "example.com/mm";
message M { int32 x = 1; }`,
		"p/p.proto": `syntax = "proto3"; package p; option go_package = "example.com/p";
import "m/m.proto";
import "mm/mm.proto";
message UsesMessage { m.M m = 1; }
message UsesEnum { repeated m.E e = 1; }
message Fine { mm.M m = 1; }`,
	}, "m/m.proto", "mm/mm.proto", "p/p.proto"))
	require.NoError(t, err)
	assert.Equal(t, []string{"Fine"}, codecTypes(t, out[filepath.Join("p", "p_wire.pb.go")]))
}

// TestWireLocalsListsEveryDeclaredName keeps wireLocals, which
// shadowedType relies on, in step with what the generator declares.
func TestWireLocalsListsEveryDeclaredName(t *testing.T) {
	out, err := Generate(wiretestOptions)
	require.NoError(t, err)
	src := out[filepath.Join(moduleRoot, "internal", "grainc", "wiretest", "wiretest_wire.pb.go")]
	require.NotNil(t, src)
	file, err := parser.ParseFile(token.NewFileSet(), "wire.pb.go", src, 0)
	require.NoError(t, err)
	declared := make(map[string]bool)
	addFields := func(fields *ast.FieldList) {
		for _, f := range fields.List {
			for _, name := range f.Names {
				declared[name.Name] = true
			}
		}
	}
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			addFields(n.Recv)
			addFields(n.Type.Params)
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE {
				for _, lhs := range n.Lhs {
					declared[lhs.(*ast.Ident).Name] = true
				}
			}
		case *ast.RangeStmt:
			if n.Tok == token.DEFINE {
				for _, e := range []ast.Expr{n.Key, n.Value} {
					if id, ok := e.(*ast.Ident); ok {
						declared[id.Name] = true
					}
				}
			}
		case *ast.ValueSpec:
			for _, name := range n.Names {
				declared[name.Name] = true
			}
		}
		return true
	})
	delete(declared, "_")
	require.NotEmpty(t, declared)
	for name := range declared {
		assert.True(t, wireLocals[name], "the generated code declares %s, which wireLocals lacks", name)
	}
}
