package peer

import (
	"context"

	"golang.org/x/time/rate"

	"github.com/granary-go/granary/bench"
)

// XRate is golang.org/x/time/rate in process: one token bucket per key
// holding the quota, and no network at all. It is the floor under every
// distributed limiter.
type XRate struct{}

var _ bench.System = XRate{}

// Name returns "xrate".
func (XRate) Name() string { return "xrate" }

// Topology describes x/time/rate's path.
func (XRate) Topology() string {
	return "golang.org/x/time/rate in process, one rate.Limiter per key, Allow per operation, no network"
}

// Cases returns the sequential, hot-key and partitioned scenarios without
// a context: Allow takes none.
func (XRate) Cases(m bench.Matrix) []bench.Case {
	return m.PeerCases(bench.TokenBucket, false, bench.Sequential, bench.HotKey, bench.Partitioned)
}

// Start does nothing: there is nothing to start.
func (XRate) Start(context.Context) error { return nil }

// Stop does nothing.
func (XRate) Stop(context.Context) error { return nil }

// Prepare returns fresh limiters for the case's keys, each with the whole
// quota as its burst and the quota per window as its rate.
func (XRate) Prepare(_ context.Context, c bench.Case) (bench.Workload, error) {
	limiters := make([]*rate.Limiter, c.Scenario.Keys())
	for i := range limiters {
		limiters[i] = rate.NewLimiter(rate.Limit(bench.Quota/bench.Window.Seconds()), bench.Quota)
	}
	return xrateWorkload{limiters: limiters}, nil
}

type xrateWorkload struct {
	unplaced
	limiters []*rate.Limiter
}

func (w xrateWorkload) Do(_ context.Context, worker int) error {
	if !w.limiters[worker%len(w.limiters)].Allow() {
		return bench.ErrNotGranted
	}
	return nil
}
