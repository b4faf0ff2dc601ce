package bench_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/granary-go/granary/bench"
)

// fakeSystem counts what the harness asks of it; its operations succeed
// until failAt (when set) and its placement holds until misplaceAt checks
// (when set).
type fakeSystem struct {
	name       string
	cases      func(bench.Matrix) []bench.Case
	startErr   error
	failAt     int64 // the operation (1-based, over the whole run) that fails
	misplaceAt int64 // the placement check (1-based) that fails
	placed     bool  // whether CheckPlacement checks anything

	ops, checks atomic.Int64
	mu          sync.Mutex
	perWorker   map[int]int
	started     bool
	stopped     int
	prepared    []bench.Case
	closed      int
}

func newFake(name string) *fakeSystem {
	return &fakeSystem{name: name, placed: true, perWorker: make(map[int]int),
		cases: func(m bench.Matrix) []bench.Case { return m.Cases() }}
}

func (f *fakeSystem) Name() string                      { return f.name }
func (f *fakeSystem) Topology() string                  { return "fake topology of " + f.name }
func (f *fakeSystem) Cases(m bench.Matrix) []bench.Case { return f.cases(m) }

func (f *fakeSystem) Start(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = true
	return f.startErr
}

func (f *fakeSystem) Stop(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped++
	return nil
}

func (f *fakeSystem) Prepare(_ context.Context, c bench.Case) (bench.Workload, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prepared = append(f.prepared, c)
	return fakeWorkload{f}, nil
}

type fakeWorkload struct{ f *fakeSystem }

func (w fakeWorkload) Do(ctx context.Context, worker int) error {
	n := w.f.ops.Add(1)
	w.f.mu.Lock()
	w.f.perWorker[worker]++
	w.f.mu.Unlock()
	if n == w.f.failAt {
		return fmt.Errorf("operation %d: %w", n, bench.ErrNotGranted)
	}
	return ctx.Err()
}

var errMoved = errors.New("a grain moved")

func (w fakeWorkload) CheckPlacement(context.Context) (bool, error) {
	if w.f.checks.Add(1) == w.f.misplaceAt {
		return w.f.placed, errMoved
	}
	return w.f.placed, nil
}

func (w fakeWorkload) Close(context.Context) error {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	w.f.closed++
	return nil
}

// small are options that run fast: every case, few operations.
func small() bench.Options {
	o := bench.Options{Operations: 64, Repetitions: 3, WarmupPerHolder: 4, Revision: "test-revision"}
	o.EnsureDefaults()
	return o
}
