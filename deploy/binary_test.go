package deploy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The manifests are checked against the binary as it is built from this
// checkout: its flags come from its own -h, which prints the flag set with
// Go's flag.PrintDefaults, every setting's usage ending in its environment
// variable (cmd/granary's tests hold it to that). So a flag added, renamed
// or removed there is what these tests see, with nothing to keep in step.

// binaryFlag is one flag of the binary, as its -h shows it.
type binaryFlag struct {
	name string
	typ  string // flag.UnquoteUsage's name: "string", "duration", ...; "" for a boolean
	env  string // the environment variable that sets it, "" if none
	def  string // the default; the zero value of its type when -h shows none
}

// zeroValues are what flag.PrintDefaults leaves unsaid, by type.
var zeroValues = map[string]string{"": "false", "duration": "0s", "int": "0", "uint": "0", "float": "0"}

// binaryFlags are every flag of the binary, by name and by environment
// variable.
type binaryFlags struct {
	byName map[string]binaryFlag
	byEnv  map[string]binaryFlag
}

var (
	usageFlagLine = regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9_.-]*)(?: (\S+))?(?:\t(.*))?$`)
	usageEnv      = regexp.MustCompile(`\(\$([A-Z_][A-Z0-9_]*)\)`)
	// The default flag.PrintDefaults adds: the last words of the usage, a
	// quoted Go string for a string flag. A usage may speak of a default
	// of its own before (-name's "default hostname-pid").
	usageDefault       = regexp.MustCompile(`\(default ([^()]*)\)$`)
	usageStringDefault = regexp.MustCompile(`\(default ("(?:[^"\\]|\\.)*")\)$`)
)

// parseUsage reads the flags out of what flag.PrintDefaults printed: a
// line "  -name type" per flag (the usage after a tab on the same line for
// one-letter names), then its usage on lines indented by four spaces and a
// tab, ending in "(default value)" unless the default is the zero value.
// Every flag has a usage line, even an empty one: what looks like a flag
// but has none is the command's own prose, skipped like the rest of it.
func parseUsage(out string) (binaryFlags, error) {
	flags := binaryFlags{byName: map[string]binaryFlag{}, byEnv: map[string]binaryFlag{}}
	var cur *binaryFlag
	var usage []string
	finish := func() error {
		if cur == nil || usage == nil {
			cur, usage = nil, nil
			return nil
		}
		text := strings.Join(usage, " ")
		defaults := usageDefault
		if cur.typ == "string" {
			defaults = usageStringDefault
		}
		if m := defaults.FindStringSubmatch(text); m != nil {
			cur.def = m[1]
			if cur.typ == "string" {
				def, err := strconv.Unquote(m[1])
				if err != nil {
					return fmt.Errorf("-%s: default %s: %w", cur.name, m[1], err)
				}
				cur.def = def
			}
			text = strings.TrimSuffix(text, m[0])
		}
		if ms := usageEnv.FindAllStringSubmatch(text, -1); ms != nil {
			cur.env = ms[len(ms)-1][1]
			if prev, ok := flags.byEnv[cur.env]; ok {
				return fmt.Errorf("-%s and -%s both name $%s", prev.name, cur.name, cur.env)
			}
			flags.byEnv[cur.env] = *cur
		}
		flags.byName[cur.name] = *cur
		cur, usage = nil, nil
		return nil
	}
	lines := bufio.NewScanner(strings.NewReader(out))
	for lines.Scan() {
		line := lines.Text()
		if m := usageFlagLine.FindStringSubmatch(line); m != nil {
			if err := finish(); err != nil {
				return flags, err
			}
			cur = &binaryFlag{name: m[1], typ: m[2], def: zeroValues[m[2]]}
			if strings.Contains(line, "\t") {
				usage = []string{m[3]}
			}
			continue
		}
		if cur != nil && strings.HasPrefix(line, "    \t") {
			usage = append(usage, strings.TrimPrefix(line, "    \t"))
			continue
		}
		if cur != nil && usage == nil {
			cur = nil // prose that looked like a flag
			continue
		}
		if cur != nil && strings.TrimSpace(line) != "" {
			return flags, fmt.Errorf("unexpected line in the usage of -%s: %q", cur.name, line)
		}
	}
	if err := finish(); err != nil {
		return flags, err
	}
	if len(flags.byName) == 0 {
		return flags, fmt.Errorf("no flag in the usage:\n%s", out)
	}
	return flags, nil
}

// repoRoot is the checkout the binary is built from.
const repoRoot = ".."

// built is the binary builtBinary built, once per test run; TestMain
// removes its directory.
var built struct {
	once      sync.Once
	dir, path string
	flags     binaryFlags
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// builtBinary builds cmd/granary from this checkout, as the Dockerfile
// does, and reads its flags
// from its -h.
func builtBinary(t *testing.T) (string, binaryFlags) {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "granary-deploy-test-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "granary")
		// The image's own build, so that what the tests check is what the
		// image runs.
		build := imageBuild(built.path)
		if out, err := build.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("the Dockerfile's build of ./cmd/granary: %w\n%s", err, out)
			return
		}
		help := exec.Command(built.path, "-h")
		help.Env = environWithoutSettings()
		out, err := help.CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("granary -h: %w\n%s", err, out)
			return
		}
		built.flags, built.err = parseUsage(string(out))
	})
	require.NoError(t, built.err)
	return built.path, built.flags
}

// environWithoutSettings is this process's environment without the
// binary's settings, so that the defaults the binary shows and the way it
// runs are its own.
func environWithoutSettings() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GRANARY_") {
			env = append(env, kv)
		}
	}
	return env
}

// startedSilo is a silo process of the built binary, alone, on loopback
// ports it picked.
type startedSilo struct {
	httpAddr string
	cmd      *exec.Cmd
	exited   chan error
}

var startupHTTP = regexp.MustCompile(`HTTP on (\S+),`)

// startSilo runs the built binary as one silo, with args after its own
// loopback addresses, and waits for the line it prints once it serves. It
// is killed in t.Cleanup: the tests that start it look at a silo that
// serves or is stopping, never at how the stop ends (cmd/granary's tests
// do).
func startSilo(t *testing.T, path string, args ...string) *startedSilo {
	t.Helper()
	return startSiloWith(t, nil, path, args...)
}

// startSiloWith is startSilo with setup run on the command before it
// starts.
func startSiloWith(t *testing.T, setup func(*exec.Cmd), path string, args ...string) *startedSilo {
	t.Helper()
	args = append([]string{"-name", "manifest-check", "-gateway", "127.0.0.1:0", "-http", "127.0.0.1:0"}, args...)
	cmd := exec.Command(path, args...)
	cmd.Env = environWithoutSettings()
	if setup != nil {
		setup(cmd)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	s := &startedSilo{cmd: cmd, exited: make(chan error, 1)}
	first := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		if lines.Scan() {
			first <- lines.Text()
		}
		close(first)
		for lines.Scan() { // the rest, so that the process never blocks on a full pipe
		}
		s.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-s.exited
	})
	select {
	case line, ok := <-first:
		require.True(t, ok, "the silo printed nothing; its log:\n%s", stderr.String())
		m := startupHTTP.FindStringSubmatch(line)
		require.NotNil(t, m, "the startup line names the HTTP port: %q", line)
		s.httpAddr = m[1]
	case <-time.After(time.Minute):
		t.Fatalf("the silo did not start within a minute; its log:\n%s", stderr.String())
	}
	return s
}

// status answers the status code of GET path on the silo's HTTP port.
func (s *startedSilo) status(path string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.httpAddr+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Body.Close()
}

// get is status, failing the test on an error.
func (s *startedSilo) get(t *testing.T, path string) int {
	t.Helper()
	code, err := s.status(path)
	require.NoError(t, err, "GET %s", path)
	return code
}

// lockedBuffer is a buffer the process writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
