package cli_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/bench"
	"github.com/granary-go/granary/bench/cli"
)

// env is a fake environment.
type env map[string]string

func (e env) lookup(name string) (string, bool) { v, ok := e[name]; return v, ok }

// run runs the command in process and returns its exit code, stdout and
// stderr.
func run(t *testing.T, e env, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := cli.Main(t.Context(), args, e.lookup, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// The CI smoke run: the whole matrix and the in-process peers in quick
// mode, and the report held to bench.md. It asserts no timing. Gubernator
// runs from its own module, whose test checks it the same way.
func TestQuickRunWithPeersReportsEveryFieldOfEveryRepetition(t *testing.T) {
	out := filepath.Join(t.TempDir(), "report.json")
	code, stdout, stderr := run(t, env{bench.EnvQuick: "true", bench.EnvOutput: out},
		"--peers", "--systems=granary,transport-echo,protoactor,xrate,redis_rate")
	require.Equal(t, 0, code, stderr)

	doc, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, bench.Check(doc, bench.Expectation{
		Repetitions: bench.DefaultRepetitions, Operations: bench.QuickOperations,
		Placement: []string{bench.Granary, "protoactor"},
	}))
	var rep bench.Report
	require.NoError(t, json.Unmarshal(doc, &rep))

	var o bench.Options
	o.EnsureDefaults()
	var granaryCases []bench.Case
	systems := map[string]bool{}
	for _, r := range rep.Results {
		systems[r.System] = true
		if r.System == bench.Granary && r.Repetition == 1 {
			granaryCases = append(granaryCases, r.Case())
			assert.Contains(t, r.Topology, "silo-0")
		}
	}
	assert.Equal(t, o.Matrix().Cases(), granaryCases, "the whole matrix, in order")
	assert.True(t, systems["transport-echo"])
	assert.True(t, systems["xrate"])
	for peer, present := range map[string]bool{"protoactor": !raceDetector, "redis_rate": hasRedis()} {
		if present {
			assert.True(t, systems[peer], peer)
		} else {
			assert.True(t, slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.HasPrefix(n, peer+" skipped") }), "a note says why %s is missing", peer)
		}
	}

	assert.Contains(t, stdout, "granary ops/s as a ratio to each peer's")
	assert.Contains(t, stderr, "bench: [1/", "progress on stderr")
}

func hasRedis() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

func TestEnvironmentSelectsTheCasesAndFlagsWin(t *testing.T) {
	code, stdout, stderr := run(t, env{
		bench.EnvAlgorithm: "token", bench.EnvScenario: "abandoned,sequential", bench.EnvCallerToken: "false",
		bench.EnvQuick: "true", bench.EnvWarmWorkload: "true", bench.EnvOutput: "-",
	}, "--repetitions=1")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, bench.Check([]byte(stdout), bench.Expectation{Repetitions: 1, Operations: bench.QuickOperations, Placement: []string{bench.Granary}}))
	var rep bench.Report
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep))
	require.Len(t, rep.Results, 2)
	for i, s := range []bench.Scenario{bench.Sequential, bench.Abandoned} {
		assert.Equal(t, bench.Case{Algorithm: bench.TokenBucket, Scenario: s}, rep.Results[i].Case())
		assert.True(t, rep.Results[i].WarmWorkload)
	}
}

func TestProfilesOfTheRunAreWritten(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof")
	code, _, stderr := run(t, env{cli.EnvMemProfile: mem}, "--quick", "--algorithm=fixed", "--scenario=hot-key", "--cpuprofile="+cpu)
	require.Equal(t, 0, code, stderr)
	for _, f := range []string{cpu, mem} {
		info, err := os.Stat(f)
		require.NoError(t, err)
		assert.Positive(t, info.Size(), f)
	}
	code, _, _ = run(t, env{}, "--quick", "--cpuprofile="+filepath.Join(dir, "no-such-dir", "cpu.pprof"))
	assert.Equal(t, 2, code)
}

func TestBadInputExitsWithTwo(t *testing.T) {
	for name, tc := range map[string]struct {
		env  env
		args []string
	}{
		"an unknown flag":          {env{}, []string{"--fast"}},
		"an argument":              {env{}, []string{"extra"}},
		"a bad environment value":  {env{bench.EnvOperations: "lots"}, nil},
		"too few operations":       {env{}, []string{"--operations=2"}},
		"an unknown system":        {env{}, []string{"--systems=nobody"}},
		"an unknown algorithm":     {env{}, []string{"--algorithm=leaky"}},
		"a bad caller-token value": {env{bench.EnvCallerToken: "sometimes"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, _ := run(t, tc.env, tc.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, stdout, "nothing measured")
		})
	}
}

// -h says what the command does, lists every flag with its values, and
// exits 0; a bad flag still exits 2.
func TestHelpListsEveryFlagAndItsValuesAndExitsZero(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		code, stdout, stderr := run(t, env{}, arg)
		require.Equal(t, 0, code, arg)
		assert.Empty(t, stdout, arg)
		assert.Contains(t, stderr, "usage: granary-bench [flags]", arg)
		assert.Contains(t, stderr, "Measures granary's rate-limiting grains", arg)
		assert.Contains(t, stderr, "Exit status: 0", arg)

		var cfg bench.Config
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		require.NoError(t, cfg.Bind(fs, env{}.lookup))
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		for _, name := range append(names, "gubernator", "redis-server", "cpuprofile", "memprofile") {
			assert.Regexp(t, `(?m)^  -`+regexp.QuoteMeta(name)+`( |$)`, stderr, "%s lists -%s", arg, name)
		}
		for _, a := range bench.Algorithms {
			assert.Contains(t, stderr, string(a), "the algorithm %s", a)
		}
		for _, s := range bench.Scenarios {
			assert.Contains(t, stderr, string(s), "the scenario %s", s)
		}
		for _, system := range []string{bench.Granary, "transport-echo", "protoactor", "xrate", "redis_rate", "gubernator"} {
			assert.Contains(t, stderr, system, "the system %s", system)
		}
		assert.Contains(t, stderr, "false|true|both")
	}
	code, _, stderr := run(t, env{}, "--no-such-flag")
	assert.Equal(t, 2, code, stderr)
}
