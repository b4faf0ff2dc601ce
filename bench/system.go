package bench

import (
	"context"
	"errors"
	"io"
)

// ErrNotGranted is returned (wrapped) by a Workload's Do when an
// acquisition was rejected: the measured options never reject, so a
// rejection fails the case.
var ErrNotGranted = errors.New("bench: acquisition not granted")

// ErrUnavailable is wrapped by a System's Start or a Source's Measure when
// the system cannot run on this machine (no redis-server, no gubernator
// binary): the run goes on without it and says so in a note.
var ErrUnavailable = errors.New("bench: system unavailable")

// System is something the harness measures in its own process: granary on
// a topology, or a peer.
type System interface {
	// Name is the system's name in the report: "granary", or the peer's
	// ("transport-echo", "protoactor", "xrate", "redis_rate",
	// "gubernator").
	Name() string
	// Topology describes where the measured calls go, for the report.
	Topology() string
	// Cases returns the cases of m the system measures, in order.
	Cases(m Matrix) []Case
	// Start brings the system up: servers, silos, clients.
	Start(ctx context.Context) error
	// Prepare sets a case up (its keys, holders or grains, placed where
	// the topology wants them) and returns its workload.
	Prepare(ctx context.Context, c Case) (Workload, error)
	// Stop tears down what Start built. It is safe to call twice, and
	// after a failed Start.
	Stop(ctx context.Context) error
}

// Workload is one prepared case of a System.
type Workload interface {
	// Do runs one operation for worker w (0 <= w < the scenario's
	// workers; the worker's key is w % Keys()) with the case's caller
	// context. It returns an error when the operation failed or was not
	// granted (ErrNotGranted). Do is called concurrently, one goroutine
	// per worker.
	Do(ctx context.Context, worker int) error
	// CheckPlacement returns an error when a measured grain is not where
	// the topology placed it. It reports whether it checked anything:
	// false for systems without placement.
	CheckPlacement(ctx context.Context) (checked bool, err error)
	// Close releases what Prepare set up.
	Close(ctx context.Context) error
}

// Source is a system that measures itself, in another process, and hands
// back its rows: the gubernator peer, whose module is kept apart from the
// framework's.
type Source interface {
	// Name is the system's name in the report.
	Name() string
	// Measure runs the cases of opts the source applies to and returns
	// the report of its rows. progress receives the process's progress
	// lines. The harness calls it once per scenario and overload.
	Measure(ctx context.Context, opts Options, progress io.Writer) (*Report, error)
	// Close releases what Measure kept between calls (a built binary).
	// It is safe to call twice.
	Close(ctx context.Context) error
}
