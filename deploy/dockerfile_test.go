package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dockerfile is deploy/Dockerfile's instructions, continuation lines
// joined, comments left out.
func dockerfile(t *testing.T) [][2]string {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	var out [][2]string
	var cur string
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur == "" && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		cur += strings.TrimSuffix(trimmed, "\\") + " "
		if strings.HasSuffix(trimmed, "\\") {
			continue
		}
		word, rest, _ := strings.Cut(strings.TrimSpace(cur), " ")
		out = append(out, [2]string{strings.ToUpper(word), strings.TrimSpace(rest)})
		cur = ""
	}
	return out
}

var goDirective = regexp.MustCompile(`(?m)^go (\d+\.\d+)`)

// The image builds cmd/granary with go.mod's Go, runs it as the user the
// StatefulSet runs as, and exposes the silo container's ports.
func TestDockerfileBuildsTheSiloTheManifestsRun(t *testing.T) {
	_, w, ctr, _ := settingsOfTheSilo(t)
	gomod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	require.NoError(t, err)
	m := goDirective.FindSubmatch(gomod)
	require.NotNil(t, m, "go.mod has a go directive")

	var froms, users, exposed, entrypoint []string
	var builds bool
	for _, ins := range dockerfile(t) {
		switch ins[0] {
		case "FROM":
			froms = append(froms, ins[1])
		case "USER":
			users = append(users, ins[1])
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(ins[1])...)
		case "ENTRYPOINT":
			entrypoint = append(entrypoint, ins[1])
		case "RUN":
			builds = builds || (strings.Contains(ins[1], "go build") && strings.Contains(ins[1], "./cmd/granary") &&
				strings.Contains(ins[1], "CGO_ENABLED=0"))
		}
	}
	require.GreaterOrEqual(t, len(froms), 2, "a builder stage, then the image")
	assert.True(t, strings.HasPrefix(froms[0], "golang:"+string(m[1])), "the builder runs go.mod's Go %s: FROM %s", m[1], froms[0])
	assert.True(t, builds, "a stage builds ./cmd/granary, static")
	assert.NotContains(t, froms[len(froms)-1], "golang", "the image is not the builder")
	assert.Equal(t, []string{`["/granary"]`}, entrypoint)

	require.Len(t, users, 1)
	uid, _, _ := strings.Cut(users[0], ":")
	n, err := strconv.ParseInt(uid, 10, 64)
	require.NoError(t, err, "USER %s is numeric, so that runAsNonRoot can check it", users[0])
	require.NotZero(t, n)
	sc := w.template.Spec.SecurityContext
	require.NotNil(t, sc)
	require.NotNil(t, sc.RunAsUser)
	assert.Equal(t, n, *sc.RunAsUser, "the StatefulSet runs the image's user")

	var ports []string
	for _, p := range ctr.Ports {
		port := strconv.Itoa(int(p.ContainerPort))
		if orTCP(p.Protocol) != "TCP" {
			port += "/" + strings.ToLower(string(p.Protocol))
		}
		ports = append(ports, port)
	}
	slices.Sort(ports)
	slices.Sort(exposed)
	assert.Equal(t, ports, exposed, "EXPOSE lists the silo container's ports")
}
