package bench_test

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/bench"
)

func TestDefaultsAreTheReferenceHarnesss(t *testing.T) {
	var o bench.Options
	o.EnsureDefaults()
	assert.Equal(t, bench.Algorithms, o.Algorithms)
	assert.Equal(t, bench.Scenarios, o.Scenarios)
	assert.Equal(t, []bool{false, true}, o.Overloads)
	assert.Equal(t, 32768, o.Operations)
	assert.Equal(t, 3, o.Repetitions)
	assert.Equal(t, 4096, o.WarmupPerHolder)
	require.NoError(t, o.Validate())

	q := bench.Options{Quick: true}
	q.EnsureDefaults()
	assert.Equal(t, bench.QuickOperations, q.Operations)
	assert.Equal(t, bench.QuickWarmupPerHolder, q.WarmupPerHolder)
	assert.Equal(t, 3, q.Repetitions, "quick mode keeps every repetition")
}

func TestValidateReportsEveryBadField(t *testing.T) {
	o := bench.Options{
		Algorithms: []bench.Algorithm{"leaky"}, Scenarios: []bench.Scenario{"cold"},
		Overloads: []bool{true, true}, Operations: 3, Repetitions: -1, WarmupPerHolder: -1,
	}
	err := o.Validate()
	require.ErrorIs(t, err, bench.ErrInvalidOption)
	for _, field := range []string{"Algorithms", "Scenarios", "Overloads", "Operations", "Repetitions", "WarmupPerHolder"} {
		assert.Contains(t, err.Error(), field)
	}
	assert.Len(t, err.(interface{ Unwrap() []error }).Unwrap(), 6)
}

func TestValidateRefusesMoreAcquisitionsThanTheQuota(t *testing.T) {
	o := bench.Options{Operations: bench.Quota / 4, Repetitions: 3, WarmupPerHolder: 1}
	o.EnsureDefaults()
	err := o.Validate()
	require.ErrorIs(t, err, bench.ErrInvalidOption)
	assert.Contains(t, err.Error(), "quota")
}

func TestMatrixHasThirtyEightCasesAndAbandonedIsTimeBasedOnly(t *testing.T) {
	var o bench.Options
	o.EnsureDefaults()
	cases := o.Matrix().Cases()
	assert.Len(t, cases, (5*3+4)*2)
	for _, c := range cases {
		if c.Scenario == bench.Abandoned {
			assert.True(t, c.Algorithm.TimeBased(), c.String())
		}
	}
	assert.Equal(t, "concurrency/sequential/background", cases[0].String())
	assert.Equal(t, "fixed-leased/abandoned/cancellable", cases[len(cases)-1].String())
}

func TestPeerCasesKeepTheSelectedScenariosAndOverloads(t *testing.T) {
	m := bench.Matrix{Scenarios: []bench.Scenario{bench.HotKey, bench.Abandoned}, Overloads: []bool{false, true}}
	assert.Equal(t, []bench.Case{{Algorithm: bench.GCRA, Scenario: bench.HotKey}, {Algorithm: bench.GCRA, Scenario: bench.HotKey, Cancellable: true}},
		m.PeerCases(bench.GCRA, true, bench.Sequential, bench.HotKey))
	assert.Equal(t, []bench.Case{{Algorithm: bench.NoAlgorithm, Scenario: bench.HotKey}},
		m.PeerCases(bench.NoAlgorithm, false, bench.HotKey))
}

func TestScenarioShapes(t *testing.T) {
	for _, tc := range []struct {
		s             bench.Scenario
		workers, keys int
		releases      bool
	}{
		{bench.Sequential, 1, 1, true},
		{bench.HotKey, 16, 1, true},
		{bench.Partitioned, 16, 16, true},
		{bench.Abandoned, 16, 1, false},
	} {
		assert.Equal(t, tc.workers, tc.s.Workers(), tc.s)
		assert.Equal(t, tc.keys, tc.s.Keys(), tc.s)
		assert.Equal(t, tc.releases, tc.s.Releases(), tc.s)
	}
}

// env is a fake environment.
type env map[string]string

func (e env) lookup(name string) (string, bool) { v, ok := e[name]; return v, ok }

func bind(t *testing.T, e env, args ...string) (bench.Config, error) {
	t.Helper()
	var cfg bench.Config
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := cfg.Bind(fs, e.lookup); err != nil {
		return cfg, err
	}
	return cfg, fs.Parse(args)
}

func TestEnvironmentMirrorsTheFlagsAndFlagsWin(t *testing.T) {
	cfg, err := bind(t, env{
		bench.EnvAlgorithm:    "fixed,token",
		bench.EnvScenario:     "hot-key",
		bench.EnvCallerToken:  "true",
		bench.EnvWarmWorkload: "true",
		bench.EnvOutput:       "from-env.json",
		bench.EnvQuick:        "1",
		bench.EnvPeers:        "true",
		bench.EnvSystems:      "granary, xrate",
		bench.EnvOperations:   "100",
		bench.EnvRepetitions:  "5",
		bench.EnvWarmup:       "7",
		bench.EnvRevision:     "abc",
	}, "--output=from-flag.json", "--caller-token=both")
	require.NoError(t, err)
	o := cfg.Options
	assert.Equal(t, []bench.Algorithm{bench.FixedWindow, bench.TokenBucket}, o.Algorithms)
	assert.Equal(t, []bench.Scenario{bench.HotKey}, o.Scenarios)
	assert.Equal(t, []bool{false, true}, o.Overloads, "the flag wins")
	assert.True(t, o.WarmWorkload)
	assert.True(t, o.Quick)
	assert.Equal(t, "from-flag.json", cfg.Output, "the flag wins")
	assert.True(t, cfg.Peers)
	assert.Equal(t, []string{"granary", "xrate"}, cfg.Systems)
	assert.Equal(t, 100, o.Operations)
	assert.Equal(t, 5, o.Repetitions)
	assert.Equal(t, 7, o.WarmupPerHolder)
	assert.Equal(t, "abc", o.Revision)
}

func TestCallerTokenSelectsTheOverload(t *testing.T) {
	for value, want := range map[string][]bool{"false": {false}, "true": {true}, "both": {false, true}} {
		cfg, err := bind(t, env{}, "--caller-token="+value)
		require.NoError(t, err)
		assert.Equal(t, want, cfg.Options.Overloads, value)
	}
}

func TestBadEnvironmentValuesAreAllReported(t *testing.T) {
	_, err := bind(t, env{bench.EnvAlgorithm: "leaky", bench.EnvOperations: "many", bench.EnvCallerToken: "maybe", bench.EnvQuick: "yes please"})
	require.ErrorIs(t, err, bench.ErrInvalidOption)
	for _, name := range []string{bench.EnvAlgorithm, bench.EnvOperations, bench.EnvCallerToken, bench.EnvQuick} {
		assert.Contains(t, err.Error(), name)
	}
}

func TestArgsReproduceTheOptions(t *testing.T) {
	o := bench.Options{
		Algorithms: []bench.Algorithm{bench.SlidingWindow}, Scenarios: []bench.Scenario{bench.Sequential, bench.Partitioned},
		Overloads: []bool{true}, Operations: 99, Repetitions: 4, WarmupPerHolder: 3, WarmWorkload: true, Revision: "r1",
	}
	cfg, err := bind(t, env{}, o.Args()...)
	require.NoError(t, err)
	cfg.Options.EnsureDefaults()
	assert.Equal(t, o, cfg.Options)
}

func TestBindEnvAddsAFlagOfItsOwn(t *testing.T) {
	var s string
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	require.NoError(t, bench.BindEnv(fs, env{"X_PATH": "/from/env"}.lookup, bench.StringFlag(&s), "path", "X_PATH", "a path"))
	assert.Equal(t, "/from/env", s)
	require.NoError(t, fs.Parse([]string{"--path=/from/flag"}))
	assert.Equal(t, "/from/flag", s)
}
