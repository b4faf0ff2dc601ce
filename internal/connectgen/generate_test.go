package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// apiDir holds the service API's proto and its generated code.
var apiDir = filepath.Join("..", "..", "grains", "ratelimit", "ratelimitapi", "ratelimitv1")

// TestGeneratedAPICodeIsUpToDate regenerates the service API in memory, as
// its go:generate line does, and compares it with the files checked in:
// a proto changed without regenerating fails here.
func TestGeneratedAPICodeIsUpToDate(t *testing.T) {
	out, err := generate(options{
		files:       []string{"granary/ratelimit/v1/ratelimit.proto"},
		importPaths: []string{"granary/ratelimit/v1=" + apiDir},
		module:      "github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1",
	})
	require.NoError(t, err)
	require.Len(t, out, 2, "the messages and the connect service")
	for name, content := range out {
		onDisk, err := os.ReadFile(filepath.Join(apiDir, name))
		require.NoError(t, err, "%s is checked in", name)
		assert.Equal(t, string(onDisk), string(content), "%s is stale: run go generate ./grains/ratelimit/...", name)
	}
}

func TestRunWritesOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	proto := `syntax = "proto3";
package demo.v1;
option go_package = "example.com/demo/v1;demov1";
message PingRequest { string text = 1; }
message PingResponse { string text = 1; }
service PingService { rpc Ping(PingRequest) returns (PingResponse); }
`
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "demo", "v1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "demo", "v1", "ping.proto"), []byte(proto), 0o644))
	args := []string{"-I", dir, "-module", "example.com/demo", "-out", dir, "demo/v1/ping.proto"}
	require.NoError(t, run(args, os.Stderr))
	pbFile := filepath.Join(dir, "v1", "ping.pb.go")
	assert.FileExists(t, pbFile)
	assert.FileExists(t, filepath.Join(dir, "v1", "demov1connect", "ping_connect.pb.go"))

	stat, err := os.Stat(pbFile)
	require.NoError(t, err)
	require.NoError(t, run(args, os.Stderr))
	again, err := os.Stat(pbFile)
	require.NoError(t, err)
	assert.Equal(t, stat.ModTime(), again.ModTime(), "unchanged output is not rewritten")

	require.NoError(t, os.WriteFile(pbFile, []byte("edited"), 0o644))
	require.NoError(t, run(args, os.Stderr))
	got, err := os.ReadFile(pbFile)
	require.NoError(t, err)
	assert.NotEqual(t, "edited", string(got), "changed output is rewritten")

	err = run([]string{"-I", dir, "missing.proto"}, os.Stderr)
	assert.Error(t, err, "a proto that is on no import path")
	assert.Error(t, run(nil, os.Stderr), "no files")
}
