package bench_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/bench"
)

// row returns a complete row of a case, as the harness writes it.
func row(system string, c bench.Case, rep int, opsPerSecond float64) bench.Result {
	return bench.Result{
		System: system, Algorithm: c.Algorithm, Scenario: c.Scenario, Cancellable: c.Cancellable,
		Repetition: rep, Operations: 64, SuccessfulOperations: 64,
		Workers: c.Scenario.Workers(), Keys: c.Scenario.Keys(),
		OpsPerSecond: opsPerSecond, P50Ms: 0.1, P95Ms: 0.2, P99Ms: 0.3,
		AllocatedBytesPerOp: 500, MallocsPerOp: 5, RetainedBytesDelta: 10, GCCycles: 1,
		Topology: "t", PlacementVerified: system == bench.Granary, GoVersion: "go1.26", GOMAXPROCS: 2, Revision: "r",
	}
}

func rows(system string, c bench.Case, ops ...float64) []bench.Result {
	var out []bench.Result
	for i, v := range ops {
		out = append(out, row(system, c, i+1, v))
	}
	return out
}

var (
	hotFixed     = bench.Case{Algorithm: bench.FixedWindow, Scenario: bench.HotKey}
	hotFixedCanc = bench.Case{Algorithm: bench.FixedWindow, Scenario: bench.HotKey, Cancellable: true}
	hotNone      = bench.Case{Algorithm: bench.NoAlgorithm, Scenario: bench.HotKey}
	hotGCRA      = bench.Case{Algorithm: bench.GCRA, Scenario: bench.HotKey}
	hotGCRACanc  = bench.Case{Algorithm: bench.GCRA, Scenario: bench.HotKey, Cancellable: true}
)

func marshal(t *testing.T, rep bench.Report) []byte {
	t.Helper()
	doc, err := json.Marshal(rep)
	require.NoError(t, err)
	return doc
}

func TestCheckAcceptsACompleteReport(t *testing.T) {
	doc := marshal(t, bench.Report{Results: rows(bench.Granary, hotFixed, 1, 2, 3)})
	assert.NoError(t, bench.Check(doc, bench.Expectation{Repetitions: 3, Operations: 64, Placement: []string{bench.Granary}}))
}

func TestCheckFindsAMissingField(t *testing.T) {
	for _, field := range bench.Fields() {
		var doc map[string][]map[string]any
		require.NoError(t, json.Unmarshal(marshal(t, bench.Report{Results: rows(bench.Granary, hotFixed, 1)}), &doc))
		delete(doc["results"][0], field)
		data, err := json.Marshal(doc)
		require.NoError(t, err)
		err = bench.Check(data, bench.Expectation{Repetitions: 1, Operations: 64})
		if assert.ErrorIs(t, err, bench.ErrBadReport, field) {
			assert.Contains(t, err.Error(), `"`+field+`"`)
		}
	}
}

func TestCheckFindsEveryKindOfProblem(t *testing.T) {
	good := func() []bench.Result { return rows(bench.Granary, hotFixed, 1, 2) }
	for name, tc := range map[string]struct {
		mutate func(*bench.Report)
		want   string
	}{
		"a failed operation":       {func(r *bench.Report) { r.Results[1].SuccessfulOperations = 63 }, "63 of 64 operations succeeded"},
		"another operation count":  {func(r *bench.Report) { r.Results[0].Operations = 10 }, "10 operations, want 64"},
		"a missing repetition":     {func(r *bench.Report) { r.Results = r.Results[:1] }, "repetition 2 0 times"},
		"a repetition twice":       {func(r *bench.Report) { r.Results[1].Repetition = 1 }, "repetition 1 2 times"},
		"no revision":              {func(r *bench.Report) { r.Results[0].Revision = "" }, "revision is empty"},
		"no gomaxprocs":            {func(r *bench.Report) { r.Results[0].GOMAXPROCS = 0 }, "gomaxprocs 0"},
		"percentiles out of order": {func(r *bench.Report) { r.Results[0].P95Ms = 5 }, "out of order"},
		"no throughput":            {func(r *bench.Report) { r.Results[0].OpsPerSecond = 0 }, "ops_per_second 0"},
		"placement not verified":   {func(r *bench.Report) { r.Results[0].PlacementVerified = false }, "placement not verified"},
		"the wrong shape":          {func(r *bench.Report) { r.Results[0].Workers = 1 }, "1 workers on 1 keys"},
		"a failure":                {func(r *bench.Report) { r.Failures = []string{"it broke"} }, "the run failed: it broke"},
		"no results":               {func(r *bench.Report) { r.Results = nil }, "no results"},
	} {
		t.Run(name, func(t *testing.T) {
			rep := bench.Report{Results: good()}
			tc.mutate(&rep)
			err := bench.Check(marshal(t, rep), bench.Expectation{Repetitions: 2, Operations: 64, Placement: []string{bench.Granary}})
			require.ErrorIs(t, err, bench.ErrBadReport)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	assert.ErrorIs(t, bench.Check([]byte(`{"results": [`), bench.Expectation{}), bench.ErrBadReport)
	assert.ErrorIs(t, bench.Check([]byte(`{"results": [], "extra": 1}`), bench.Expectation{}), bench.ErrBadReport)
}

func TestTableGivesMediansAndRatiosToEachPeer(t *testing.T) {
	rep := bench.Report{
		Results: concat(
			rows(bench.Granary, hotFixed, 300, 100, 200),     // median 200
			rows(bench.Granary, hotFixedCanc, 150, 150, 150), // median 150
			rows("transport-echo", hotNone, 400, 400, 400),
			rows("redis_rate", hotGCRA, 50, 50, 50),
			rows("redis_rate", hotGCRACanc, 30, 30, 30),
		),
		Notes: []string{"gubernator skipped: not built"},
	}
	var out bytes.Buffer
	require.NoError(t, rep.WriteTable(&out))
	text := out.String()
	assert.Regexp(t, `granary\s+fixed\s+hot-key\s+background\s+3\s+200\s`, text)
	ratios := text[strings.Index(text, "ratio"):]
	assert.Regexp(t, `algorithm\s+scenario\s+context\s+transport-echo\s+redis_rate`, ratios)
	assert.Regexp(t, `fixed\s+hot-key\s+background\s+0\.50\s+4\.00\s`, ratios)
	// the echo takes no context: its background figure, marked
	assert.Regexp(t, `fixed\s+hot-key\s+cancellable\s+0\.38\*\s+5\.00\s`, ratios)
	assert.Contains(t, text, "note: gubernator skipped: not built")
}

func TestTableListsEachSystemsCasesTogether(t *testing.T) {
	hotNoneSeq := bench.Case{Algorithm: bench.NoAlgorithm, Scenario: bench.Sequential}
	seqFixed := bench.Case{Algorithm: bench.FixedWindow, Scenario: bench.Sequential}
	rep := bench.Report{Results: concat(rows(bench.Granary, seqFixed, 1), rows("transport-echo", hotNoneSeq, 1),
		rows(bench.Granary, hotFixed, 1), rows("transport-echo", hotNone, 1))}
	var out bytes.Buffer
	require.NoError(t, rep.WriteTable(&out))
	assert.Regexp(t, `(?s)granary.*sequential.*granary.*hot-key.*transport-echo.*sequential.*transport-echo.*hot-key`, out.String())
}

func TestTableHasNoRatiosWithoutPeers(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, (&bench.Report{Results: rows(bench.Granary, hotFixed, 1)}).WriteTable(&out))
	assert.NotContains(t, out.String(), "ratio")
}

func concat(parts ...[]bench.Result) []bench.Result {
	var out []bench.Result
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func writeReport(t *testing.T, dir, name string, rep bench.Report) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), marshal(t, rep), 0o644))
}

func TestComparisonTakesMediansOfAllSamplesOfBothSides(t *testing.T) {
	dir := t.TempDir()
	// ABBA: base, head, head, base
	writeReport(t, dir, "1-base.json", bench.Report{Results: rows(bench.Granary, hotFixed, 100, 110, 120)})
	writeReport(t, dir, "2-head.json", bench.Report{Results: rows(bench.Granary, hotFixed, 200, 210, 220)})
	writeReport(t, dir, "3-head.json", bench.Report{Results: rows(bench.Granary, hotFixed, 230, 240, 250)})
	writeReport(t, dir, "4-base.json", bench.Report{Results: concat(rows(bench.Granary, hotFixed, 130, 140, 150), rows("xrate", hotGCRA, 9))})
	sides, err := bench.LoadSides([]string{dir})
	require.NoError(t, err)
	require.Len(t, sides[bench.SideBase], 7)
	require.Len(t, sides[bench.SideHead], 6)

	var out bytes.Buffer
	require.NoError(t, bench.WriteComparison(&out, sides[bench.SideBase], sides[bench.SideHead]))
	// base: 100..150, median 125; head: 200..250, median 225
	assert.Regexp(t, regexp.MustCompile(`granary\s+fixed\s+hot-key\s+background\s+6/6\s+125\s+225\s+\+80\.0%\s+0\.300 -> 0\.300\s+500 -> 500`), out.String())
	assert.Regexp(t, `xrate\s+gcra\s+hot-key\s+background\s+1/0\s+9\s+-\s+-`, out.String(), "a case one side lacks is printed too")
}

func TestComparisonRefusesReportsItCannotUseWhole(t *testing.T) {
	dir := t.TempDir()
	writeReport(t, dir, "1-base.json", bench.Report{Results: rows(bench.Granary, hotFixed, 1), Failures: []string{"boom"}})
	_, err := bench.LoadSides([]string{dir})
	assert.ErrorIs(t, err, bench.ErrBadReport)

	bad := rows(bench.Granary, hotFixed, 1)
	bad[0].SuccessfulOperations = 1
	writeReport(t, dir, "1-base.json", bench.Report{Results: bad})
	_, err = bench.LoadSides([]string{dir})
	assert.ErrorIs(t, err, bench.ErrBadReport)

	other := t.TempDir()
	writeReport(t, other, "sample.json", bench.Report{Results: rows(bench.Granary, hotFixed, 1)})
	_, err = bench.LoadSides([]string{filepath.Join(other, "sample.json")})
	assert.ErrorIs(t, err, bench.ErrBadReport, "a report on neither side")

	_, err = bench.LoadSides([]string{t.TempDir()})
	assert.ErrorIs(t, err, bench.ErrBadReport, "no reports at all")
}

func TestRevisionComesFromGitInACheckout(t *testing.T) {
	// Test binaries carry no VCS stamp, so this is git's answer.
	assert.Regexp(t, `^[0-9a-f]{40}(-dirty)?$`, bench.DetectRevision(t.Context()))
}
