package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/bench"
)

func TestRunMeasuresEveryCaseWithWarmupAndRepetitions(t *testing.T) {
	o := small()
	o.WarmWorkload = true
	f := newFake(bench.Granary)
	rep := bench.Run(t.Context(), o, []bench.System{f}, nil, io.Discard)

	cases := o.Matrix().Cases()
	require.Empty(t, rep.Failures)
	assert.Equal(t, cases, f.prepared, "every case prepared once, in order")
	assert.Len(t, rep.Results, len(cases)*o.Repetitions)
	assert.Equal(t, len(cases), f.closed, "every workload closed")
	assert.Equal(t, 1, f.stopped)

	var want int64
	for _, c := range cases {
		want += int64(o.WarmupPerHolder*c.Scenario.Keys() + o.Operations*(1+o.Repetitions))
	}
	assert.Equal(t, want, f.ops.Load(), "warm-up per holder, the warm repetition and the measured ones")
	// placement before the warm-up, then before and after each repetition
	assert.Equal(t, int64(len(cases)*(1+2*o.Repetitions)), f.checks.Load())

	doc, err := json.Marshal(rep)
	require.NoError(t, err)
	assert.NoError(t, bench.Check(doc, bench.Expectation{Repetitions: o.Repetitions, Operations: o.Operations, Placement: []string{bench.Granary}}))
	for _, r := range rep.Results {
		assert.True(t, r.WarmWorkload)
		assert.Equal(t, "test-revision", r.Revision)
		assert.Equal(t, "fake topology of granary", r.Topology)
	}
}

func TestWorkersShareOperationsEvenly(t *testing.T) {
	o := small()
	o.Operations, o.Repetitions, o.WarmupPerHolder = 1000, 1, 1
	o.Scenarios = []bench.Scenario{bench.Partitioned}
	o.Algorithms, o.Overloads = []bench.Algorithm{bench.FixedWindow}, []bool{false}
	f := newFake(bench.Granary)
	rep := bench.Run(t.Context(), o, []bench.System{f}, nil, io.Discard)
	require.Empty(t, rep.Failures)
	require.Len(t, f.perWorker, bench.Parallelism)
	for w, n := range f.perWorker {
		// 1000 measured operations over 16 workers (62 or 63 each), and
		// one warm-up operation per holder: worker w has holder w.
		assert.InDelta(t, 1000/16+1, n, 1, "worker %d", w)
	}
}

func TestAFailedOperationFailsItsCaseAndTheRunGoesOn(t *testing.T) {
	o := small()
	o.Scenarios = []bench.Scenario{bench.Sequential}
	f := newFake(bench.Granary)
	f.failAt = int64(o.WarmupPerHolder + o.Operations + 5) // in the first case's second repetition
	rep := bench.Run(t.Context(), o, []bench.System{f}, nil, io.Discard)

	require.Len(t, rep.Failures, 1)
	assert.Contains(t, rep.Failures[0], "concurrency/sequential/background: repetition 2")
	assert.Contains(t, rep.Failures[0], bench.ErrNotGranted.Error())
	cases := o.Matrix().Cases()
	assert.Len(t, rep.Results, (len(cases)-1)*o.Repetitions+1, "the failed case keeps its first repetition; the others run")

	doc, err := json.Marshal(rep)
	require.NoError(t, err)
	assert.ErrorIs(t, bench.Check(doc, bench.Expectation{Repetitions: o.Repetitions, Operations: o.Operations}), bench.ErrBadReport)
}

func TestAGrainThatMovedFailsItsCase(t *testing.T) {
	o := small()
	o.Scenarios, o.Overloads = []bench.Scenario{bench.HotKey}, []bool{true}
	o.Algorithms = []bench.Algorithm{bench.TokenBucket}
	f := newFake(bench.Granary)
	f.misplaceAt = 3 // after the first repetition
	rep := bench.Run(t.Context(), o, []bench.System{f}, nil, io.Discard)
	require.Len(t, rep.Failures, 1)
	assert.Contains(t, rep.Failures[0], "repetition 1: placement after: a grain moved")
	assert.Empty(t, rep.Results)
}

func TestAnUnavailableSystemIsANoteAndOtherErrorsFailures(t *testing.T) {
	o := small()
	o.Scenarios = []bench.Scenario{bench.Sequential}
	missing, broken, fine := newFake("missing"), newFake("broken"), newFake("fine")
	missing.startErr = fmt.Errorf("%w: nothing installed", bench.ErrUnavailable)
	broken.startErr = fmt.Errorf("boom")
	rep := bench.Run(t.Context(), o, []bench.System{missing, broken, fine}, nil, io.Discard)

	assert.Equal(t, []string{"missing skipped: bench: system unavailable: nothing installed"}, rep.Notes)
	assert.Equal(t, []string{"broken: start: boom"}, rep.Failures)
	assert.Equal(t, 1, missing.stopped, "stopped after a failed start")
	assert.Empty(t, missing.prepared)
	assert.Len(t, rep.Results, len(o.Matrix().Cases())*o.Repetitions, "only the fine system's rows")
}

func TestAStoppedRunFails(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rep := bench.Run(ctx, small(), []bench.System{newFake(bench.Granary)}, nil, io.Discard)
	require.NotEmpty(t, rep.Failures)
	assert.Contains(t, rep.Failures[len(rep.Failures)-1], "run stopped")
}

func TestProgressNamesEveryRepetition(t *testing.T) {
	o := small()
	o.Scenarios, o.Overloads = []bench.Scenario{bench.Abandoned}, []bool{false}
	var progress bytes.Buffer
	bench.Run(t.Context(), o, []bench.System{newFake(bench.Granary)}, nil, &progress)
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	require.Len(t, lines, 4*o.Repetitions, "four time-based algorithms")
	assert.Contains(t, lines[0], "bench: [1/4] granary fixed/abandoned/background: repetition 1/3: ")
	assert.Contains(t, lines[11], "bench: [4/4] granary fixed-leased/abandoned/background: repetition 3/3: ")
}

// fakeSource hands back a report as a process of its own would.
type fakeSource struct {
	rep    *bench.Report
	err    error
	calls  []bench.Options
	closed int
}

func (s *fakeSource) Name() string { return "outside" }
func (s *fakeSource) Measure(_ context.Context, o bench.Options, _ io.Writer) (*bench.Report, error) {
	s.calls = append(s.calls, o)
	return s.rep, s.err
}
func (s *fakeSource) Close(context.Context) error { s.closed++; return nil }

func TestSourcesRowsNotesAndFailuresJoinTheReport(t *testing.T) {
	o := small()
	o.Scenarios = []bench.Scenario{bench.Sequential}
	src := &fakeSource{rep: &bench.Report{
		Results:  []bench.Result{{System: "outside", Scenario: bench.Sequential}},
		Notes:    []string{"a note"},
		Failures: []string{"a failure"},
	}}
	missing := &fakeSource{err: fmt.Errorf("%w: not built", bench.ErrUnavailable)}
	rep := bench.Run(t.Context(), o, nil, []bench.Source{src, missing}, io.Discard)
	assert.Len(t, rep.Results, 2, "once per overload")
	assert.Equal(t, []string{"outside: a note", "outside skipped: bench: system unavailable: not built", "outside: a note"}, rep.Notes)
	assert.Equal(t, []string{"outside: a failure", "outside: a failure"}, rep.Failures)
	require.Len(t, src.calls, 2)
	for i, cancellable := range []bool{false, true} {
		want := o
		want.Overloads = []bool{cancellable}
		assert.Equal(t, want, src.calls[i], "the source measures one scenario and overload at a time")
	}
	assert.Len(t, missing.calls, 1, "an unavailable source is not asked again")
	assert.Equal(t, 1, src.closed)
	assert.Equal(t, 1, missing.closed)
}

func TestSystemsTakeTurnsScenarioByScenario(t *testing.T) {
	o := small()
	o.Algorithms = []bench.Algorithm{bench.TokenBucket}
	o.Scenarios = []bench.Scenario{bench.Sequential, bench.HotKey}
	o.Overloads = []bool{false}
	a, b := newFake(bench.Granary), newFake("peer")
	rep := bench.Run(t.Context(), o, []bench.System{a, b}, nil, io.Discard)
	require.Empty(t, rep.Failures)
	var order []string
	for _, r := range rep.Results {
		if r.Repetition == 1 {
			order = append(order, r.System+" "+string(r.Scenario))
		}
	}
	assert.Equal(t, []string{"granary sequential", "peer sequential", "granary hot-key", "peer hot-key"}, order)
	assert.Equal(t, 1, a.stopped)
	assert.Equal(t, 1, b.stopped)
}

func TestExecuteWritesTheReportAndTheTable(t *testing.T) {
	out := t.TempDir() + "/report.json"
	cfg := bench.Config{Options: bench.Options{Operations: 32, Repetitions: 2, WarmupPerHolder: 1,
		Scenarios: []bench.Scenario{bench.Sequential}}, Output: out}
	var stdout bytes.Buffer
	require.NoError(t, bench.Execute(t.Context(), cfg, []bench.System{newFake(bench.Granary), newFake("other")}, nil, &stdout, io.Discard))
	assert.Contains(t, stdout.String(), "granary ops/s as a ratio to each peer's")
	doc := readFile(t, out)
	require.NoError(t, bench.Check(doc, bench.Expectation{Repetitions: 2, Operations: 32}))
	var rep bench.Report
	require.NoError(t, json.Unmarshal(doc, &rep))
	assert.NotEmpty(t, rep.Results[0].Revision, "detected when not given")
}

func TestExecuteToStdoutPrintsOnlyTheDocument(t *testing.T) {
	cfg := bench.Config{Options: bench.Options{Quick: true, Scenarios: []bench.Scenario{bench.Sequential},
		Algorithms: []bench.Algorithm{bench.Concurrency}}, Output: "-", Systems: []string{"kept"}}
	var stdout bytes.Buffer
	dropped := newFake("dropped")
	require.NoError(t, bench.Execute(t.Context(), cfg, []bench.System{dropped, newFake("kept")}, nil, &stdout, io.Discard))
	require.NoError(t, bench.Check(stdout.Bytes(), bench.Expectation{Repetitions: 3, Operations: bench.QuickOperations}))
	assert.False(t, dropped.started, "systems not named are not run")
}

func TestExecuteRefusesBadOptionsAndUnknownSystems(t *testing.T) {
	err := bench.Execute(t.Context(), bench.Config{Options: bench.Options{Operations: 3}}, nil, nil, io.Discard, io.Discard)
	assert.ErrorIs(t, err, bench.ErrInvalidOption)
	err = bench.Execute(t.Context(), bench.Config{Systems: []string{"nobody"}}, []bench.System{newFake("somebody")}, nil, io.Discard, io.Discard)
	assert.ErrorIs(t, err, bench.ErrInvalidOption)
}

func TestExecuteFailsWhenACaseFails(t *testing.T) {
	f := newFake(bench.Granary)
	f.failAt = 1
	cfg := bench.Config{Options: bench.Options{Quick: true, Scenarios: []bench.Scenario{bench.Sequential}}}
	var stdout bytes.Buffer
	err := bench.Execute(t.Context(), cfg, []bench.System{f}, nil, &stdout, io.Discard)
	assert.ErrorIs(t, err, bench.ErrFailed)
	assert.Contains(t, stdout.String(), "FAILED: granary concurrency/sequential/background: warm-up")
}

func TestExitCodes(t *testing.T) {
	assert.Equal(t, 0, bench.ExitCode(nil))
	assert.Equal(t, 2, bench.ExitCode(fmt.Errorf("wrapped: %w", bench.ErrInvalidOption)))
	assert.Equal(t, 1, bench.ExitCode(bench.ErrFailed))
}
