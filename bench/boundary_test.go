package bench_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goList runs the go command from the repository's root, offline.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly", "GOWORK=off")
	out, err := cmd.Output()
	require.NoError(t, err, "go list %v", args)
	return strings.Fields(string(out))
}

// What only the benchmark needs stays in the modules under bench/: no
// package of the framework's module imports a peer's library or the
// harness, and the peers' modules are not even in its go.mod.
func TestFrameworkPackagesImportNoBenchmarkDependency(t *testing.T) {
	framework := goList(t, "./...")
	require.Contains(t, framework, "github.com/granary-go/granary/cmd/granary")
	for _, p := range framework {
		assert.False(t, strings.HasPrefix(p, "github.com/granary-go/granary/bench"), "%s is in the framework's module", p)
	}
	forbidden := []string{
		"github.com/granary-go/granary/bench",
		"github.com/asynkron/protoactor-go/cluster",
		"github.com/asynkron/protoactor-go/remote",
		"github.com/go-redis/redis_rate/",
		"github.com/gubernator-io/",
	}
	for _, dep := range goList(t, append([]string{"-deps"}, framework...)...) {
		for _, f := range forbidden {
			assert.False(t, strings.HasPrefix(dep, f), "a framework package imports %s", dep)
		}
	}
	// go.sum also holds the checksums of modules the framework's
	// dependencies merely mention (grpc's graph names golang/protobuf), so
	// only gubernator is held out of it; go.mod lists what the build uses.
	for f, deps := range map[string][]string{
		"../go.mod": {"github.com/gubernator-io/", "github.com/go-redis/redis_rate/", "github.com/gogo/protobuf ", "github.com/golang/protobuf "},
		"../go.sum": {"github.com/gubernator-io/"},
	} {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, dep := range deps {
			assert.NotContains(t, string(data), dep, "%s reaches %s", dep, f)
		}
	}
}
