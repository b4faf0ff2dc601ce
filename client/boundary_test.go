package client_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A program that only calls grains (the client, generated references, the
// limiter holders and their net/http middleware; examples/limitclient is
// one) links none of the
// server: no activation host, gossip, directory or metrics, and outside
// granary only the protobuf runtime and x/time/rate.
func TestAClientOnlyProgramLinksNoServer(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command: install Go and put it on PATH")
	}
	const module = "github.com/granary-go/granary/"
	programs := []string{module + "examples/limitclient", module + "examples/counter", module + "client", module + "grains/ratelimit", module + "grains/ratelimit/httplimit"}
	cmd := exec.Command(goTool, append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, programs...)...)
	cmd.Env = append(cmd.Environ(), "GOFLAGS=-mod=readonly", "GOPROXY=off")
	out, err := cmd.Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, module+"internal/rpc", "the listing is of the programs named")

	allowed := []string{module, "google.golang.org/protobuf/", "golang.org/x/time/rate"}
	server := []string{"silo", "cluster", "placement", "persistence", "testcluster", "internal/host", "internal/directory", "internal/metrics", "internal/dashboard", "internal/gossipcut"}
	var protobuf int
	for _, dep := range deps {
		assert.True(t, hasAnyPrefix(dep, allowed...), "a client links %s", dep)
		for _, s := range server {
			assert.False(t, dep == module+s || strings.HasPrefix(dep, module+s+"/"), "a client links the server's %s", dep)
		}
		if strings.HasPrefix(dep, "google.golang.org/protobuf/") {
			protobuf++
		}
	}
	// The protobuf runtime is 29 packages, which every generated
	// reference needs; granary's own part is bounded too, so that the
	// count does not creep up unseen (it is 28 today).
	assert.LessOrEqual(t, len(deps)-protobuf, 30, "granary's packages and others a client links: %v", deps)
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
