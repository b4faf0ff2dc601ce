package subject

import (
	"context"
	"errors"
	"fmt"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/bench"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/proxy"
)

// Topology is where the measured grains live and how their holders reach
// them: the silos, the client, and placement.
type Topology interface {
	// Describe says what the topology is, for every row of the report.
	Describe() string
	// Start brings the silos and the client up, with the rate-limiting
	// grains registered.
	Start(ctx context.Context) error
	// Stop tears down what Start built; it is safe to call twice.
	Stop(ctx context.Context) error
	// Caller is what the measured holders call through.
	Caller() proxy.Caller
	// Home is the silo every measured grain must live on.
	Home() string
	// Place makes grain id live on Home: activate makes the grain's
	// first call, with a context that may carry a placement hint; no
	// hint may outlive Place, so that warm-up and measurement run
	// without one.
	Place(ctx context.Context, id actor.GrainID, activate func(context.Context) error) error
	// SiloOf returns the silo hosting id's activation, "" when none does.
	SiloOf(ctx context.Context, id actor.GrainID) (string, error)
}

// Granary is granary's rate-limiting grains on a topology, as a
// bench.System.
type Granary struct {
	topology Topology
}

var _ bench.System = (*Granary)(nil)

// New returns the granary system on topology t, not started.
func New(t Topology) *Granary { return &Granary{topology: t} }

// Name returns bench.Granary.
func (g *Granary) Name() string { return bench.Granary }

// Topology describes the topology.
func (g *Granary) Topology() string { return g.topology.Describe() }

// Cases returns the whole matrix.
func (g *Granary) Cases(m bench.Matrix) []bench.Case { return m.Cases() }

// Start starts the topology.
func (g *Granary) Start(ctx context.Context) error { return g.topology.Start(ctx) }

// Stop stops the topology.
func (g *Granary) Stop(ctx context.Context) error { return g.topology.Stop(ctx) }

// Prepare builds one holder per key of the case, on keys of its own, and
// places each grain on the topology's home silo.
func (g *Granary) Prepare(ctx context.Context, c bench.Case) (bench.Workload, error) {
	w := &workload{topology: g.topology, release: c.Scenario.Releases()}
	for i := range c.Scenario.Keys() {
		h, err := holder(c.Algorithm, g.topology.Caller(), fmt.Sprintf("bench/%s/%d", c, i))
		if err != nil {
			return nil, err
		}
		// A call that changes nothing activates the grain; the first
		// acquisition then configures it with the bound options.
		activate := func(ctx context.Context) error { _, err := h.Statistics(ctx); return err }
		if err := g.topology.Place(ctx, h.GrainID(), activate); err != nil {
			return nil, fmt.Errorf("subject: place %s: %w", h.GrainID(), err)
		}
		w.holders = append(w.holders, h)
	}
	return w, nil
}

// holder returns a holder of algorithm a for key, bound to options that
// never reject during a run.
func holder(a bench.Algorithm, c proxy.Caller, key string) (ratelimit.Limiter, error) {
	switch a {
	case bench.Concurrency:
		return ratelimit.Concurrency(c, key, ratelimit.ConcurrencyOptions{PermitLimit: bench.Quota}), nil
	case bench.FixedWindow:
		return ratelimit.FixedWindow(c, key, ratelimit.FixedWindowOptions{
			PermitLimit: bench.Quota, Window: bench.Window, ManualReplenishment: true}), nil
	case bench.SlidingWindow:
		return ratelimit.SlidingWindow(c, key, ratelimit.SlidingWindowOptions{
			PermitLimit: bench.Quota, Window: bench.Window, SegmentsPerWindow: bench.SlidingSegments, ManualReplenishment: true}), nil
	case bench.TokenBucket:
		return ratelimit.TokenBucket(c, key, ratelimit.TokenBucketOptions{
			TokenLimit: bench.Quota, TokensPerPeriod: bench.Quota, ReplenishmentPeriod: bench.Window, ManualReplenishment: true}), nil
	case bench.FixedWindowLeased:
		return ratelimit.FixedWindow(c, key, ratelimit.FixedWindowOptions{
			PermitLimit: bench.LeasedQuota, Window: bench.Window}).Leased(ratelimit.LeaseOptions{}), nil
	}
	return nil, fmt.Errorf("%w: no granary holder for algorithm %q", bench.ErrInvalidOption, a)
}

type workload struct {
	topology Topology
	holders  []ratelimit.Limiter
	release  bool
}

// Do acquires one permit from the worker's holder under its bound
// options, checks it was granted and releases it (a no-op call for the
// time-based algorithms, which send nothing), except in the abandoned
// scenario.
func (w *workload) Do(ctx context.Context, worker int) error {
	lease, err := w.holders[worker%len(w.holders)].AcquireAndConfigure(ctx, 1)
	if err != nil {
		return err
	}
	if !lease.Acquired() {
		return fmt.Errorf("%w: %v", bench.ErrNotGranted, lease)
	}
	if w.release {
		return lease.Release(ctx)
	}
	return nil
}

// CheckPlacement checks that every grain of the case lives on the
// topology's home silo.
func (w *workload) CheckPlacement(ctx context.Context) (bool, error) {
	home := w.topology.Home()
	var errs []error
	for _, h := range w.holders {
		silo, err := w.topology.SiloOf(ctx, h.GrainID())
		switch {
		case err != nil:
			errs = append(errs, err)
		case silo != home:
			errs = append(errs, fmt.Errorf("%w: %s is on %q, not %q", ErrMoved, h.GrainID(), silo, home))
		}
	}
	return true, errors.Join(errs...)
}

// ErrMoved is wrapped by CheckPlacement when a grain is not on the
// topology's home silo.
var ErrMoved = errors.New("subject: a measured grain is not on its silo")

// Close gives back what is left of the leased holders' slices; the case's
// grains stay idle until collected, and none holds a permit.
func (w *workload) Close(ctx context.Context) error {
	var errs []error
	for _, h := range w.holders {
		if c, ok := h.(interface{ Close(context.Context) error }); ok {
			errs = append(errs, c.Close(ctx))
		}
	}
	return errors.Join(errs...)
}
