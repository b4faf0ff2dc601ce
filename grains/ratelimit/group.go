package ratelimit

import (
	"cmp"
	"context"
	"errors"
	"sync"
)

// ErrGroupAcquired is returned by Group.Acquire and Group.Add while the
// group holds its leases (or is acquiring them): release it first.
var ErrGroupAcquired = errors.New("ratelimit: the group is acquired; release it first")

// Group makes several limiters one decision: Acquire takes one permit
// from each, all at once (one call per limiter, concurrently), and
// succeeds only when all of them grant it; when any refuses or fails, what
// the others granted is given back (concurrency permits released,
// time-based permits refunded as far as the algorithm can; see
// AcquireMany). A group is acquired once until it is released. It is
// safe for concurrent use.
type Group struct {
	mu struct {
		sync.Mutex
		limiters  []Limiter
		leases    []*Lease
		acquiring bool          // an Acquire is taking leases
		acquired  bool          // the group holds leases
		settled   chan struct{} // closed when the running Acquire ends
		// generation counts successful acquisitions, so that the lease of
		// an earlier one cannot release a later one.
		generation uint64
	}
}

// NewGroup returns a group of the given limiters, acquired in that order.
func NewGroup(limiters ...Limiter) *Group {
	g := &Group{}
	g.mu.limiters = append([]Limiter(nil), limiters...)
	return g
}

// Add appends a limiter to the group. It fails with ErrGroupAcquired while
// the group is acquired.
func (g *Group) Add(l Limiter) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.acquiring || g.mu.acquired {
		return ErrGroupAcquired
	}
	g.mu.limiters = append(g.mu.limiters, l)
	return nil
}

// Len returns the number of limiters in the group.
func (g *Group) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.mu.limiters)
}

// Acquire takes one permit from every limiter with each limiter's
// AcquireAndConfigure, all at once, as one decision (AcquireMany). When
// all grant it, it returns an acquired lease for the whole group, whose
// Release releases the group. Otherwise it gives back what was granted
// and returns the first rejected lease in the group's order, or the
// first error (ctx's error when ctx ends). A second Acquire before
// Release fails at once with ErrGroupAcquired, also while the first is
// still running.
func (g *Group) Acquire(ctx context.Context) (*Lease, error) { return g.take(ctx, false) }

// TryAcquire is Acquire with each limiter's TryAcquire: no member waits in
// its queue, so the group's answer comes without any wait for permits.
func (g *Group) TryAcquire(ctx context.Context) (*Lease, error) { return g.take(ctx, true) }

// take takes one permit from every limiter, all or nothing.
func (g *Group) take(ctx context.Context, try bool) (*Lease, error) {
	g.mu.Lock()
	if g.mu.acquiring || g.mu.acquired {
		g.mu.Unlock()
		return nil, ErrGroupAcquired
	}
	g.mu.acquiring = true
	g.mu.settled = make(chan struct{})
	limiters := g.mu.limiters
	g.mu.Unlock()

	acquisitions := make([]Acquisition, len(limiters))
	for i, l := range limiters {
		acquisitions[i] = Acquisition{Limiter: l, Permits: 1}
	}
	outcomes, ok := AcquireMany(ctx, ManyOptions{Try: try}, acquisitions...)
	var leases []*Lease
	var failed *Lease
	var err error
	for _, o := range outcomes {
		switch {
		case o.Err != nil:
			err = cmp.Or(err, o.Err)
		case !o.Lease.Acquired():
			failed = cmp.Or(failed, o.Lease)
		case ok:
			leases = append(leases, o.Lease)
		}
	}
	if !ok && err == nil && failed == nil {
		err = ctx.Err() // a caller that gave up does not get the group
	}

	g.mu.Lock()
	g.mu.acquiring, g.mu.acquired = false, ok
	g.mu.leases = leases
	if ok {
		g.mu.generation++
	}
	generation := g.mu.generation
	close(g.mu.settled)
	g.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case failed != nil:
		return failed, nil
	}
	l := &Lease{group: g, generation: generation}
	l.md.Acquired = true // and released through the group
	return l, nil
}

// Release releases every lease the group holds and makes it ready to be
// acquired again. A Release while Acquire runs waits for it to end first,
// within ctx. Concurrent Releases are safe: one of them releases, the
// others return at once. It returns the errors of the releases that
// failed; their leases are dropped all the same.
func (g *Group) Release(ctx context.Context) error { return g.release(ctx, 0) }

// release releases the group's leases; a generation other than 0 releases
// them only if they are still that acquisition's.
func (g *Group) release(ctx context.Context, generation uint64) error {
	for {
		g.mu.Lock()
		if generation != 0 && (g.mu.generation != generation || !g.mu.acquired) {
			g.mu.Unlock()
			return nil
		}
		if !g.mu.acquiring {
			leases := g.mu.leases
			g.mu.leases, g.mu.acquired = nil, false
			g.mu.Unlock()
			return releaseAll(ctx, leases)
		}
		settled := g.mu.settled
		g.mu.Unlock()
		select {
		case <-settled:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// releaseAll releases leases concurrently, each in its own goroutine, and
// waits for them all.
func releaseAll(ctx context.Context, leases []*Lease) error {
	switch len(leases) {
	case 0:
		return nil
	case 1:
		return leases[0].Release(ctx)
	}
	errs := make([]error, len(leases))
	var wg sync.WaitGroup
	for i, l := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.Release(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
