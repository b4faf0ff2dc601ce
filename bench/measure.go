package bench

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Result is one measured repetition of one case by one system: a row of
// the report.
type Result struct {
	// System is the measured system: Granary or a peer's name.
	System string `json:"system"`
	// Algorithm is the case's algorithm (a peer's own).
	Algorithm Algorithm `json:"algorithm"`
	// Scenario is the case's scenario.
	Scenario Scenario `json:"scenario"`
	// Cancellable is the case's overload: true for a cancellable caller
	// context.
	Cancellable bool `json:"cancellable"`
	// Repetition numbers the measured repetitions of the case from 1.
	Repetition int `json:"repetition"`
	// Operations is the number of operations measured.
	Operations int `json:"operations"`
	// SuccessfulOperations counts the operations that succeeded: all of
	// them, or the case fails.
	SuccessfulOperations int `json:"successful_operations"`
	// Workers is the number of goroutines that ran the operations.
	Workers int `json:"workers"`
	// Keys is the number of keys they shared.
	Keys int `json:"keys"`
	// OpsPerSecond is Operations over the wall time from the workers'
	// common start to the last one's end.
	OpsPerSecond float64 `json:"ops_per_second"`
	// P50Ms is the median latency of one operation, in milliseconds.
	P50Ms float64 `json:"p50_ms"`
	// P95Ms is the 95th percentile of the latency.
	P95Ms float64 `json:"p95_ms"`
	// P99Ms is the 99th percentile of the latency.
	P99Ms float64 `json:"p99_ms"`
	// AllocatedBytesPerOp is the whole process's heap allocation during
	// the repetition, in bytes per operation.
	AllocatedBytesPerOp float64 `json:"allocated_bytes_per_op"`
	// MallocsPerOp is the whole process's count of heap allocations
	// during the repetition, per operation.
	MallocsPerOp float64 `json:"mallocs_per_op"`
	// RetainedBytesDelta is the live heap after full collections at the
	// repetition's end minus the same before it.
	RetainedBytesDelta int64 `json:"retained_bytes_delta"`
	// GCCycles counts the collections during the repetition.
	GCCycles uint64 `json:"gc_cycles"`
	// Topology describes where the measured calls went.
	Topology string `json:"topology"`
	// PlacementVerified is true when the measured grains' placement was
	// checked before and after the repetition.
	PlacementVerified bool `json:"placement_verified"`
	// WarmWorkload is true when an unmeasured full repetition preceded
	// the measured ones.
	WarmWorkload bool `json:"warm_workload"`
	// GoVersion is the runtime's version.
	GoVersion string `json:"go_version"`
	// GOMAXPROCS is the runtime's GOMAXPROCS.
	GOMAXPROCS int `json:"gomaxprocs"`
	// Revision is the revision measured.
	Revision string `json:"revision"`
}

// Case returns the case the row measures.
func (r *Result) Case() Case {
	return Case{Algorithm: r.Algorithm, Scenario: r.Scenario, Cancellable: r.Cancellable}
}

// process readings, in the order of processMetrics.
const (
	allocBytes = iota
	allocObjects
	gcCycles
	liveBytes
	metricCount
)

var processMetrics = [metricCount]string{
	allocBytes:   "/gc/heap/allocs:bytes",
	allocObjects: "/gc/heap/allocs:objects",
	gcCycles:     "/gc/cycles/total:gc-cycles",
	liveBytes:    "/gc/heap/live:bytes",
}

// reading is one read of the process's metrics.
type reading [metricCount]uint64

// meter reads the process's metrics into samples it allocates once, so that
// reading allocates nothing between a repetition's two reads.
type meter struct{ samples []metrics.Sample }

func newMeter() *meter {
	m := &meter{samples: make([]metrics.Sample, len(processMetrics))}
	for i, name := range processMetrics {
		m.samples[i].Name = name
	}
	return m
}

func (m *meter) read() reading {
	metrics.Read(m.samples)
	var r reading
	for i, s := range m.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			r[i] = s.Value.Uint64()
		}
	}
	return r
}

// liveAfterGC collects fully and returns the live heap. It collects twice:
// what sync.Pools held at the first collection survives it in their victim
// caches, and would count as retained.
func (m *meter) liveAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	return m.read()[liveBytes]
}

// share returns how many of n operations worker w of workers runs.
func share(n, workers, w int) int {
	count := n / workers
	if w < n%workers {
		count++
	}
	return count
}

// latencies holds one slice per worker, allocated before a repetition so
// that recording allocates nothing while it runs.
type latencies [][]time.Duration

func newLatencies(n, workers int) latencies {
	l := make(latencies, workers)
	for w := range l {
		l[w] = make([]time.Duration, share(n, workers, w))
	}
	return l
}

// percentiles returns the p50, p95 and p99 of the recorded latencies in
// milliseconds, each the value at rank ceil(n*p) as the reference harness
// takes it.
func (l latencies) percentiles() (p50, p95, p99 float64) {
	all := slices.Concat(l...)
	slices.Sort(all)
	at := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		i := max(int(math.Ceil(float64(len(all))*p))-1, 0)
		return float64(all[i]) / float64(time.Millisecond)
	}
	return at(0.50), at(0.95), at(0.99)
}

// drive runs n operations of wl, spread over workers goroutines started
// together, with caller as every operation's context. With lat non-nil,
// worker w records each operation's latency in lat[w]. It returns the wall
// time from the start to the last worker's end, the number of operations
// that succeeded, and the first error. A worker stops at its first error,
// the others soon after; all stop when ctx ends.
func drive(ctx, caller context.Context, wl Workload, workers, n int, lat latencies) (time.Duration, int, error) {
	var (
		wg        sync.WaitGroup
		stop      atomic.Bool
		succeeded atomic.Int64
		errOnce   sync.Once
		firstErr  error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		stop.Store(true)
	}
	start := make(chan struct{})
	for w := range workers {
		count := share(n, workers, w)
		wg.Go(func() {
			<-start
			done := 0
			defer func() { succeeded.Add(int64(done)) }()
			for i := range count {
				// Checked every few operations: a context's Err takes a
				// lock, which a fast peer's operation would feel.
				if i%64 == 0 {
					if stop.Load() {
						return
					}
					if err := ctx.Err(); err != nil {
						fail(err)
						return
					}
				}
				began := time.Now()
				if err := wl.Do(caller, w); err != nil {
					fail(fmt.Errorf("worker %d, operation %d: %w", w, i, err))
					return
				}
				if lat != nil {
					lat[w][i] = time.Since(began)
				}
				done++
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	return time.Since(began), int(succeeded.Load()), firstErr
}
