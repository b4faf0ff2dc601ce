package newcomer

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// fence matches a code block that names the file it is: ```go title="path".
var fence = regexp.MustCompile("(?s)```[a-z]+ title=\"([^\"]+)\"\n(.*?)```")

// pageFiles returns the files docs/getting-started.md spells out, by path.
func pageFiles(t *testing.T) map[string]string {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(root, "docs", "getting-started.md"))
	require.NoError(t, err)
	files := make(map[string]string)
	for _, m := range fence.FindAllStringSubmatch(string(page), -1) {
		files[m[1]] = m[2]
	}
	return files
}

// shellBlock returns the commands of the page's first sh block that
// contains marker, one per line with continuation lines joined.
func shellBlock(t *testing.T, marker string) []string {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(root, "docs", "getting-started.md"))
	require.NoError(t, err)
	for _, m := range shellFence.FindAllStringSubmatch(string(page), -1) {
		if !strings.Contains(m[1], marker) {
			continue
		}
		var commands []string
		for _, line := range strings.Split(strings.ReplaceAll(m[1], "\\\n", " "), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				commands = append(commands, line)
			}
		}
		return commands
	}
	t.Fatalf("docs/getting-started.md has no sh block with %q", marker)
	return nil
}

// shellFence matches a shell code block.
var shellFence = regexp.MustCompile("(?s)```sh\n(.*?)```")

// userEnv is the environment of a user's go command: the module proxy
// this machine is configured with, the checksum database, no workspace.
func userEnv() []string { return append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=") }

// goCmd runs the go command in dir as a user would.
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = userEnv()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// The getting-started page, followed as a newcomer would: a fresh module
// pointed at this checkout, the generator as a tool, the page's contract,
// grain, silo and client, generated, built and run.
func TestGettingStartedRunsAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own")
	}
	files := pageFiles(t)
	for _, want := range []string{"greeter/greeter.proto", "greeter/gen.go", "greeter/greeter.go", "cmd/silo/main.go", "cmd/client/main.go"} {
		require.Contains(t, files, want, "the page spells out %s", want)
	}
	repo, err := filepath.Abs(root)
	require.NoError(t, err)
	dir := t.TempDir()
	goCmd(t, dir, "mod", "init", "example.com/hello")
	// The page's steps for a checkout, run as written but for where the
	// checkout is: no go.sum copied in, the module proxy reachable.
	for _, command := range shellBlock(t, "-replace=github.com/granary-go/granary=") {
		command = strings.ReplaceAll(command, "=../granary", "="+repo)
		cmd := exec.Command("sh", "-c", command)
		cmd.Dir, cmd.Env = dir, userEnv()
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s:\n%s", command, out)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	assert.Contains(t, string(mod), "\ntool github.com/granary-go/granary/proxy/cmd/granarygen\n", "the go.mod the page shows")
	assert.Contains(t, string(mod), "\nreplace github.com/granary-go/granary => "+repo+"\n", "the go.mod the page shows")
	for path, content := range files {
		full := filepath.Join(dir, path)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(content), 0o644))
	}
	goCmd(t, dir, "generate", "./...")
	for _, gen := range []string{"greeter.pb.go", "greeter_grain.pb.go", "greeter_wire.pb.go"} {
		assert.FileExists(t, filepath.Join(dir, "greeter", gen))
	}
	goCmd(t, dir, "mod", "tidy")
	goCmd(t, dir, "vet", "./...")
	bin := filepath.Join(dir, "bin")
	goCmd(t, dir, "build", "-o", bin+string(filepath.Separator), "./...")

	silo := exec.Command(filepath.Join(bin, "silo"), "-gateway", "127.0.0.1:0")
	stdout, err := silo.StdoutPipe()
	require.NoError(t, err)
	silo.Stderr = os.Stderr
	require.NoError(t, silo.Start())
	exited := make(chan error, 1)
	go func() { exited <- silo.Wait() }()
	t.Cleanup(func() {
		if silo.ProcessState == nil {
			_ = silo.Process.Kill()
			<-exited
		}
	})
	lines := bufio.NewScanner(stdout)
	require.True(t, lines.Scan(), "the silo says where it listens")
	first := lines.Text()
	require.True(t, strings.HasPrefix(first, "silo listening on "), first)
	addr := strings.TrimPrefix(first, "silo listening on ")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "client"), "-gateway", addr).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "hello, ada, from lobby (greeting 1)\nhello, grace, from lobby (greeting 2)\n", string(out),
		"the output the page promises")

	require.NoError(t, silo.Process.Signal(syscall.SIGINT))
	select {
	case err := <-exited:
		require.NoError(t, err, "the silo stops cleanly on Ctrl-C")
	case <-ctx.Done():
		t.Fatal("the silo did not stop")
	}
}
