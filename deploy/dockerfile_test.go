package deploy

import (
	"debug/elf"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dockerfile is deploy/Dockerfile's instructions, continuation lines
// joined, comments left out.
func dockerfile(t *testing.T) [][2]string {
	t.Helper()
	out, err := readDockerfile()
	require.NoError(t, err)
	return out
}

func readDockerfile() ([][2]string, error) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		return nil, err
	}
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
	return out, nil
}

// imageBuild is the Dockerfile's build of the binary, run as its builder
// stage runs it (RUN's shell form is sh -c, in the WORKDIR that holds the
// checkout), writing the binary to path instead of where the image
// copies it from.
func imageBuild(path string) *exec.Cmd {
	run, out := "", ""
	ins, err := readDockerfile()
	if err == nil {
		run, out = imageBuildStep(ins)
	}
	cmd := exec.Command("sh", "-c", strings.Replace(run, "-o "+out, "-o "+path, 1))
	if run == "" || out == "" || !strings.Contains(run, "-o "+out) {
		// No build to run: the command fails, and the tests that need it
		// with it (TestTheImagesBinaryServesAloneInAnEmptyRoot says why).
		cmd = exec.Command("sh", "-c", "echo 'deploy/Dockerfile has no RUN go build -o X with COPY --from=build X /granary' >&2; exit 1")
	}
	cmd.Dir = repoRoot
	return cmd
}

// imageBuildStep is the RUN instruction that builds the binary and the
// path the image copies to /granary.
func imageBuildStep(ins [][2]string) (run, out string) {
	for _, in := range ins {
		switch {
		case in[0] == "RUN" && strings.Contains(in[1], "go build"):
			run = in[1]
		case in[0] == "COPY" && strings.HasPrefix(in[1], "--from="):
			if f := strings.Fields(in[1]); len(f) == 3 && f[2] == "/granary" {
				out = f[1]
			}
		}
	}
	return run, out
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

// The binary every test of this package runs is built by the Dockerfile's
// own build command (builtBinary), and needs nothing of the base image:
// statically linked, it serves as the image's user in a root that holds
// the binary alone (no shell, no libc, no /etc), as on distroless/static.
func TestTheImagesBinaryServesAloneInAnEmptyRoot(t *testing.T) {
	run, out := imageBuildStep(dockerfile(t))
	require.NotEmpty(t, run, "a RUN instruction builds the binary")
	require.NotEmpty(t, out, "the image copies the built binary to /granary")
	require.Contains(t, run, "-o "+out, "the build writes the binary the image copies")
	path, _ := builtBinary(t)

	f, err := elf.Open(path)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "the binary names no dynamic loader")
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	assert.Empty(t, libs, "the binary needs no shared library")

	if os.Geteuid() != 0 {
		t.Skip("running the binary in an empty root needs chroot: run the tests as root (CI does)")
	}
	root := t.TempDir()
	require.NoError(t, os.Chmod(root, 0o755))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "granary"), data, 0o755))
	uid, gid := imageUser(t)
	s := startSiloWith(t, func(cmd *exec.Cmd) {
		cmd.Path = "/granary" // inside the root
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	}, path)
	assert.Equal(t, http.StatusOK, s.get(t, "/readyz"), "the silo serves alone in its root, as the image's user")
}

// imageUser is the Dockerfile's USER, numeric.
func imageUser(t *testing.T) (uid, gid uint32) {
	t.Helper()
	for _, ins := range dockerfile(t) {
		if ins[0] != "USER" {
			continue
		}
		u, g, _ := strings.Cut(ins[1], ":")
		un, err := strconv.ParseUint(u, 10, 32)
		require.NoError(t, err)
		gn, err := strconv.ParseUint(g, 10, 32)
		require.NoError(t, err)
		return uint32(un), uint32(gn)
	}
	t.Fatal("the Dockerfile has no USER")
	return 0, 0
}
