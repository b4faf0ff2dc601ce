package ratelimit

import (
	"context"
	"sync"
)

// Acquisition is one limiter's part of a decision over many limits.
type Acquisition struct {
	// Limiter is the limiter to acquire from.
	Limiter Limiter
	// Permits is how many permits to take from it.
	Permits int64
}

// ManyOptions say how AcquireMany acquires.
type ManyOptions struct {
	// Try makes every acquisition an attempt (TryAcquire): none waits in
	// its limiter's queue. The default acquires as AcquireAndConfigure
	// does.
	Try bool
	// SkipErrors counts an acquisition that failed (an error, not a
	// rejection: a silo that cannot be reached) as granted, so that the
	// others still decide: what fail-open middleware wants. The default
	// counts it as a refusal.
	SkipErrors bool
}

// Outcome is one acquisition's part of AcquireMany's answer.
type Outcome struct {
	// Lease is the limiter's answer; nil when Err is set.
	Lease *Lease
	// Err is why the acquisition failed, if it did (ctx's error when ctx
	// ended).
	Err error
	// GivenBack reports that Lease was granted and, the decision having
	// failed, given back: concurrency permits released, time-based
	// permits refunded as far as the algorithm can (see the limiter's
	// Refund rules).
	GivenBack bool
	// GiveBackErr is why giving the lease back failed, if it did.
	GiveBackErr error
}

// AcquireMany takes permits from every limiter as one decision, all or
// nothing. It sends the acquisitions at once, one call per limiter, so a
// decision over n limits takes about one round trip, not n. The decision
// is granted when every limiter grants its permits (and, with
// SkipErrors, when the others failed rather than refused) and ctx has not
// ended; then every acquired lease is the caller's to use and release.
// Otherwise what the limiters granted is given back before AcquireMany
// returns, even when ctx has ended: concurrency permits are released, and
// time-based permits refunded where the algorithm still can put them
// back (see docs/ratelimit.md for what cannot be refunded exactly).
//
// The outcomes are in the order of the acquisitions. Limiters other than
// this package's holders are acquired through their interface, and their
// time-based leases cannot be refunded.
func AcquireMany(ctx context.Context, o ManyOptions, acquisitions ...Acquisition) ([]Outcome, bool) {
	out := make([]Outcome, len(acquisitions))
	switch len(acquisitions) {
	case 0:
	case 1:
		// Alone, a refusal leaves nothing granted to give back: the grant
		// need not be refundable, and the grain keeps nothing for it.
		out[0] = acquireOneOf(ctx, o.Try, false, acquisitions[0])
	default:
		var wg sync.WaitGroup
		for i := 1; i < len(acquisitions); i++ {
			a := acquisitions[i] // copied, so that the caller's slice does not escape
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i] = acquireOneOf(ctx, o.Try, true, a)
			}()
		}
		out[0] = acquireOneOf(ctx, o.Try, true, acquisitions[0])
		wg.Wait()
	}
	granted := ctx.Err() == nil // a caller that gave up does not get the permits
	for i := range out {
		switch {
		case out[i].Err != nil:
			granted = granted && o.SkipErrors
		case !out[i].Lease.Acquired():
			granted = false
		}
	}
	if !granted {
		giveBack(context.WithoutCancel(ctx), out)
	}
	return out, granted
}

// decider is implemented by the holders: an acquisition whose time-based
// grant can be refunded.
type decider interface {
	acquireForDecision(ctx context.Context, permits int64, try bool) (*Lease, error)
}

// acquireOneOf runs one acquisition of a decision; refundable asks for a
// grant that can be refunded.
func acquireOneOf(ctx context.Context, try, refundable bool, a Acquisition) Outcome {
	var l *Lease
	var err error
	switch d, ok := a.Limiter.(decider); {
	case ok && refundable:
		l, err = d.acquireForDecision(ctx, a.Permits, try)
	case try:
		l, err = a.Limiter.TryAcquire(ctx, a.Permits)
	default:
		l, err = a.Limiter.AcquireAndConfigure(ctx, a.Permits)
	}
	if err != nil {
		return Outcome{Err: err}
	}
	return Outcome{Lease: l}
}

// giveBack returns the granted leases of a decision that failed, all at
// once, and waits for them.
func giveBack(ctx context.Context, out []Outcome) {
	var wg sync.WaitGroup
	for i := range out {
		l := out[i].Lease
		if l == nil || !l.Acquired() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if l.refundable {
				_, err = l.refund(ctx)
			} else {
				err = l.Release(ctx)
			}
			out[i].GivenBack, out[i].GiveBackErr = err == nil, err
		}()
	}
	wg.Wait()
}
