package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const contract = `syntax = "proto3";
package demo;
import "granary/options.proto";
option go_package = "example.com/demo";
message M {}
service S { rpc A(M) returns (M) { option (granary.bounded) = true; } }
`

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(name), 0o755))
	require.NoError(t, os.WriteFile(name, []byte(content), 0o644))
}

func TestRunWritesBesideProtos(t *testing.T) {
	t.Chdir(t.TempDir())
	writeFile(t, filepath.Join("api", "demo.proto"), contract)

	require.NoError(t, run([]string{"-paths=source_relative", "api/demo.proto"}, io.Discard))
	assert.FileExists(t, filepath.Join("api", "demo.pb.go"))
	assert.FileExists(t, filepath.Join("api", "demo_grain.pb.go"))

	// Regenerating unchanged code leaves the files alone.
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	grain := filepath.Join("api", "demo_grain.pb.go")
	require.NoError(t, os.Chtimes(grain, old, old))
	require.NoError(t, run([]string{"-paths=source_relative", "api/demo.proto"}, io.Discard))
	info, err := os.Stat(grain)
	require.NoError(t, err)
	assert.True(t, info.ModTime().Equal(old))
}

// In a module, files are compiled under their path from the module's root,
// so that same-named protos of two packages register apart, and a proto
// imports another of the module by that path.
func TestRunNamesFilesFromTheModuleRoot(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "go.mod"), "module example.com/shop\n")
	writeFile(t, filepath.Join(root, "money", "money.proto"), `syntax = "proto3";
package shop.money;
option go_package = "example.com/shop/money";
message Amount { int64 cents = 1; }
`)
	writeFile(t, filepath.Join(root, "grains", "cart", "cart.proto"), `syntax = "proto3";
package shop.cart;
import "money/money.proto";
option go_package = "example.com/shop/grains/cart";
message Total { shop.money.Amount amount = 1; }
service Cart { rpc Get(Total) returns (Total); }
`)
	t.Chdir(filepath.Join(root, "grains", "cart"))

	require.NoError(t, run([]string{"-paths=source_relative", "cart.proto"}, io.Discard))
	content, err := os.ReadFile("cart.pb.go")
	require.NoError(t, err)
	assert.Contains(t, string(content), "// source: grains/cart/cart.proto")
	assert.FileExists(t, "cart_grain.pb.go")
	assert.NoFileExists(t, filepath.Join(root, "money", "money.pb.go"), "an import is not generated")
}

func TestRunMapsImportPrefixToDirectory(t *testing.T) {
	t.Chdir(t.TempDir())
	writeFile(t, filepath.Join("src", "demo.proto"), contract)

	require.NoError(t, run([]string{"-I", "acme/v1=src", "-paths=source_relative", "acme/v1/demo.proto"}, io.Discard))
	assert.FileExists(t, filepath.Join("src", "demo.pb.go"))
	assert.FileExists(t, filepath.Join("src", "demo_grain.pb.go"))
	content, err := os.ReadFile(filepath.Join("src", "demo.pb.go"))
	require.NoError(t, err)
	assert.Contains(t, string(content), "// source: acme/v1/demo.proto")
}

func TestRunImportPathsPlacesByGoPackage(t *testing.T) {
	t.Chdir(t.TempDir())
	writeFile(t, "demo.proto", contract)

	require.NoError(t, run([]string{"demo.proto"}, io.Discard))
	assert.FileExists(t, filepath.Join("example.com", "demo", "demo.pb.go"))
	assert.FileExists(t, filepath.Join("example.com", "demo", "demo_grain.pb.go"))
}

func TestRunFails(t *testing.T) {
	t.Chdir(t.TempDir())
	writeFile(t, "bad.proto", "syntax = \"proto3\";\nmessage {")
	writeFile(t, "demo.proto", contract)
	for _, args := range [][]string{
		{},
		{"-paths=source_relative", "missing.proto"},
		{"-paths=source_relative", "bad.proto"},
		{"-paths=sideways", "demo.proto"},
		{"-nosuchflag"},
	} {
		assert.Error(t, run(args, io.Discard), "%q", args)
	}
	_, err := os.Stat("bad.pb.go")
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing is written on failure")
}
