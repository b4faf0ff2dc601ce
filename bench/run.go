package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"time"
)

// ErrFailed is returned by Execute when a case failed or a system could not
// start; the report lists why.
var ErrFailed = errors.New("bench: run failed")

// Report is the harness's output: one document with a row per measured
// repetition, notes (systems skipped and why) and failures.
type Report struct {
	// Results has one row per measured repetition.
	Results []Result `json:"results"`
	// Notes say which systems were skipped, and why.
	Notes []string `json:"notes,omitempty"`
	// Failures say which cases or systems failed, and why.
	Failures []string `json:"failures,omitempty"`
}

// stopTimeout bounds a system's Stop and a workload's Close.
const stopTimeout = 30 * time.Second

// Execute runs a configured harness: it measures systems (keeping only
// those cfg.Systems names, when it names any) and sources, writes the JSON
// report to cfg.Output, prints the table on stdout (unless the report goes
// there) and progress on stderr. It returns an error wrapping ErrFailed
// when a case failed, and ErrInvalidOption for bad options.
func Execute(ctx context.Context, cfg Config, systems []System, sources []Source, stdout, stderr io.Writer) error {
	opts := cfg.Options
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return err
	}
	if opts.Revision == "" {
		opts.Revision = DetectRevision(ctx)
	}
	systems, sources, err := keep(cfg.Systems, systems, sources)
	if err != nil {
		return err
	}
	report := Run(ctx, opts, systems, sources, stderr)
	if cfg.Output != "" {
		if err := writeReport(cfg.Output, report, stdout); err != nil {
			return err
		}
	}
	if cfg.Output != "-" {
		if err := report.WriteTable(stdout); err != nil {
			return err
		}
	}
	if len(report.Failures) > 0 {
		return fmt.Errorf("%w: %d failures, the first: %s", ErrFailed, len(report.Failures), report.Failures[0])
	}
	return ctx.Err()
}

// ExitCode returns a command's exit code for Execute's error: 0 for none,
// 2 for bad options (ErrInvalidOption), 1 for anything else.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrInvalidOption):
		return 2
	}
	return 1
}

// keep returns the systems and sources named in names, all of them when
// names is empty.
func keep(names []string, systems []System, sources []Source) ([]System, []Source, error) {
	if len(names) == 0 {
		return systems, sources, nil
	}
	var known []string
	for _, s := range systems {
		known = append(known, s.Name())
	}
	for _, s := range sources {
		known = append(known, s.Name())
	}
	for _, n := range names {
		if !slices.Contains(known, n) {
			return nil, nil, fmt.Errorf("%w: no system is called %q (known: %v)", ErrInvalidOption, n, known)
		}
	}
	systems = slices.DeleteFunc(slices.Clone(systems), func(s System) bool { return !slices.Contains(names, s.Name()) })
	sources = slices.DeleteFunc(slices.Clone(sources), func(s Source) bool { return !slices.Contains(names, s.Name()) })
	return systems, sources, nil
}

func writeReport(path string, r *Report, stdout io.Writer) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if path == "-" {
		_, err = stdout.Write(data)
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// Run starts every system, then measures the cases scenario by scenario
// and overload by overload: within each, granary's cases, then each
// peer's, then each source's, so that the figures a ratio divides are
// taken minutes apart at most, not the length of the run. It stops the
// systems at the end and returns the report. opts must have its defaults
// ensured and be valid, with the revision filled in. A system that cannot
// start is a failure, or a note when it is unavailable on this machine; a
// case that fails is a failure, and the run goes on.
func Run(ctx context.Context, opts Options, systems []System, sources []Source, progress io.Writer) *Report {
	r := &runner{opts: opts, progress: progress, meter: newMeter(), report: &Report{Results: []Result{}}}
	running := r.start(ctx, systems)
	defer r.stop(ctx, running)
	defer r.closeSources(ctx, sources)
	unavailable := make(map[Source]bool)
	for _, scenario := range opts.Scenarios {
		for _, cancellable := range opts.Overloads {
			for _, sys := range running {
				for _, c := range sys.cases {
					if c.Scenario != scenario || c.Cancellable != cancellable || ctx.Err() != nil {
						continue
					}
					r.done++
					if err := r.measureCase(ctx, sys.System, c); err != nil {
						r.fail("%s %s: %v", sys.Name(), c, err)
					}
				}
			}
			group := opts
			group.Scenarios, group.Overloads = []Scenario{scenario}, []bool{cancellable}
			for _, src := range sources {
				if !unavailable[src] && ctx.Err() == nil {
					unavailable[src] = r.source(ctx, src, group)
				}
			}
		}
	}
	if err := ctx.Err(); err != nil {
		r.fail("run stopped: %v", err)
	}
	return r.report
}

type runner struct {
	opts     Options
	progress io.Writer
	meter    *meter
	report   *Report
	total    int // cases of the running systems
	done     int // cases started
}

// runningSystem is a started system and the cases it measures.
type runningSystem struct {
	System
	cases []Case
}

func (r *runner) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.report.Notes = append(r.report.Notes, msg)
	fmt.Fprintln(r.progress, "bench: note:", msg)
}

func (r *runner) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.report.Failures = append(r.report.Failures, msg)
	fmt.Fprintln(r.progress, "bench: FAILED:", msg)
}

// start starts the systems that measure any case of the run and returns
// those that started.
func (r *runner) start(ctx context.Context, systems []System) []runningSystem {
	var running []runningSystem
	for _, s := range systems {
		cases := s.Cases(r.opts.Matrix())
		if len(cases) == 0 || ctx.Err() != nil {
			continue
		}
		if err := s.Start(ctx); err != nil {
			if errors.Is(err, ErrUnavailable) {
				r.note("%s skipped: %v", s.Name(), err)
			} else {
				r.fail("%s: start: %v", s.Name(), err)
			}
			r.stop(ctx, []runningSystem{{System: s}})
			continue
		}
		running = append(running, runningSystem{System: s, cases: cases})
		r.total += len(cases)
	}
	return running
}

// stop stops the systems, last started first.
func (r *runner) stop(ctx context.Context, running []runningSystem) {
	for _, s := range slices.Backward(running) {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		if err := s.Stop(stopCtx); err != nil {
			r.fail("%s: stop: %v", s.Name(), err)
		}
		cancel()
	}
}

func (r *runner) closeSources(ctx context.Context, sources []Source) {
	for _, s := range sources {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		if err := s.Close(closeCtx); err != nil {
			r.fail("%s: close: %v", s.Name(), err)
		}
		cancel()
	}
}

// source runs one group of a source's cases and reports whether the
// source is unavailable.
func (r *runner) source(ctx context.Context, s Source, group Options) (unavailable bool) {
	fmt.Fprintf(r.progress, "bench: %s measures %s/%s in a process of its own\n", s.Name(), group.Scenarios[0], overloadName(group.Overloads[0]))
	rep, err := s.Measure(ctx, group, r.progress)
	switch {
	case errors.Is(err, ErrUnavailable):
		r.note("%s skipped: %v", s.Name(), err)
		return true
	case err != nil:
		r.fail("%s: %v", s.Name(), err)
		return false
	}
	r.report.Results = append(r.report.Results, rep.Results...)
	for _, n := range rep.Notes {
		r.note("%s: %s", s.Name(), n)
	}
	for _, f := range rep.Failures {
		r.fail("%s: %s", s.Name(), f)
	}
	return false
}

// measureCase prepares c on s, checks placement, warms up and measures the
// repetitions, appending a row for each.
func (r *runner) measureCase(ctx context.Context, s System, c Case) (err error) {
	wl, err := s.Prepare(ctx, c)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		err = errors.Join(err, wl.Close(closeCtx))
	}()

	// The caller's context: context.Background() itself, or one
	// cancellable context for the whole case, so that its construction is
	// not measured.
	caller := context.Background()
	if c.Cancellable {
		var cancel context.CancelFunc
		caller, cancel = context.WithCancel(caller)
		defer cancel()
	}
	workers, keys := c.Scenario.Workers(), c.Scenario.Keys()
	if _, err := wl.CheckPlacement(ctx); err != nil {
		return fmt.Errorf("placement before warm-up: %w", err)
	}
	if _, _, err := drive(ctx, caller, wl, workers, r.opts.WarmupPerHolder*keys, nil); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if r.opts.WarmWorkload {
		if _, _, err := drive(ctx, caller, wl, workers, r.opts.Operations, nil); err != nil {
			return fmt.Errorf("warm repetition: %w", err)
		}
	}
	for rep := 1; rep <= r.opts.Repetitions; rep++ {
		res, err := r.repetition(ctx, caller, s, wl, c, rep)
		if err != nil {
			return fmt.Errorf("repetition %d: %w", rep, err)
		}
		r.report.Results = append(r.report.Results, res)
		fmt.Fprintf(r.progress, "bench: [%d/%d] %s %s: repetition %d/%d: %.0f ops/s, p99 %.3f ms, %.0f B/op\n",
			r.done, r.total, s.Name(), c, rep, r.opts.Repetitions, res.OpsPerSecond, res.P99Ms, res.AllocatedBytesPerOp)
	}
	return nil
}

// repetition measures one repetition of a prepared case.
func (r *runner) repetition(ctx, caller context.Context, s System, wl Workload, c Case, rep int) (Result, error) {
	n, workers := r.opts.Operations, c.Scenario.Workers()
	checkedBefore, err := wl.CheckPlacement(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("placement before: %w", err)
	}
	lat := newLatencies(n, workers)
	liveBefore := r.meter.liveAfterGC()
	before := r.meter.read()
	elapsed, succeeded, err := drive(ctx, caller, wl, workers, n, lat)
	after := r.meter.read()
	liveAfter := r.meter.liveAfterGC()
	if err != nil {
		return Result{}, fmt.Errorf("%d of %d operations succeeded: %w", succeeded, n, err)
	}
	checkedAfter, err := wl.CheckPlacement(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("placement after: %w", err)
	}
	p50, p95, p99 := lat.percentiles()
	return Result{
		System:               s.Name(),
		Algorithm:            c.Algorithm,
		Scenario:             c.Scenario,
		Cancellable:          c.Cancellable,
		Repetition:           rep,
		Operations:           n,
		SuccessfulOperations: succeeded,
		Workers:              workers,
		Keys:                 c.Scenario.Keys(),
		OpsPerSecond:         float64(n) / elapsed.Seconds(),
		P50Ms:                p50,
		P95Ms:                p95,
		P99Ms:                p99,
		AllocatedBytesPerOp:  float64(after[allocBytes]-before[allocBytes]) / float64(n),
		MallocsPerOp:         float64(after[allocObjects]-before[allocObjects]) / float64(n),
		RetainedBytesDelta:   int64(liveAfter) - int64(liveBefore),
		GCCycles:             after[gcCycles] - before[gcCycles],
		Topology:             s.Topology(),
		PlacementVerified:    checkedBefore && checkedAfter,
		WarmWorkload:         r.opts.WarmWorkload,
		GoVersion:            runtime.Version(),
		GOMAXPROCS:           runtime.GOMAXPROCS(0),
		Revision:             r.opts.Revision,
	}, nil
}
