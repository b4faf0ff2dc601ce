package limitgrain

import (
	"math"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/grains/ratelimit/internal/contract"
	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

// algorithm is what differs between the four limiter grains.
type algorithm[O comparable, P proto.Message] struct {
	toWire   func(O) P
	fromWire func(P) (O, bool)
	newWire  func() P
	newCore  func(O, time.Time) (core, error)
	limit    func(O) int64
	// ttl is a concurrency lease's time to live under o (0 for the
	// time-based algorithms, which keep no leases).
	ttl func(O) time.Duration
	// refill is how long a limiter under o takes to come back in full
	// from empty by itself (0: never, or too long to say: replenishment
	// is manual, or the algorithm keeps leases rather than a quota).
	refill func(O) time.Duration
	// restored applies the algorithm's restore rule to a snapshot taken at
	// updatedAt, for a limiter with options o activated at now.
	restored func(o O, saved limiter.State, updatedAt, now time.Time) limiter.State
	// resetIn is how long until a limiter of the algorithm is back in full
	// by itself, 0 when it cannot say; nil for the algorithms whose
	// permits come back piecemeal (a sliding window's segments, a bucket's
	// tokens) or on release.
	resetIn func(c core, now time.Time) time.Duration
}

// asCore returns c as a core, or a nil core (not a typed nil) with err.
func asCore[C core](c C, err error) (core, error) {
	if err != nil {
		return nil, err
	}
	return c, nil
}

var concurrency = &algorithm[limiter.ConcurrencyOptions, *pb.ConcurrencyOptions]{
	toWire:   contract.ConcurrencyToWire,
	fromWire: contract.ConcurrencyFromWire,
	newWire:  func() *pb.ConcurrencyOptions { return new(pb.ConcurrencyOptions) },
	newCore: func(o limiter.ConcurrencyOptions, now time.Time) (core, error) {
		return asCore(limiter.NewConcurrency(o, now))
	},
	limit:    func(o limiter.ConcurrencyOptions) int64 { return o.PermitLimit },
	ttl:      limiter.ConcurrencyOptions.TTL,
	refill:   func(limiter.ConcurrencyOptions) time.Duration { return 0 },
	restored: restoreConcurrency,
}

var fixedWindow = &algorithm[limiter.FixedWindowOptions, *pb.FixedWindowOptions]{
	toWire:   contract.FixedWindowToWire,
	fromWire: contract.FixedWindowFromWire,
	newWire:  func() *pb.FixedWindowOptions { return new(pb.FixedWindowOptions) },
	newCore: func(o limiter.FixedWindowOptions, now time.Time) (core, error) {
		return asCore(limiter.NewFixedWindow(o, now))
	},
	limit:    func(o limiter.FixedWindowOptions) int64 { return o.PermitLimit },
	refill:   func(o limiter.FixedWindowOptions) time.Duration { return windowRefill(o.Window, o.ManualReplenishment) },
	restored: restoreFixedWindow,
	resetIn:  windowEnd,
}

var slidingWindow = &algorithm[limiter.SlidingWindowOptions, *pb.SlidingWindowOptions]{
	toWire:   contract.SlidingWindowToWire,
	fromWire: contract.SlidingWindowFromWire,
	newWire:  func() *pb.SlidingWindowOptions { return new(pb.SlidingWindowOptions) },
	newCore: func(o limiter.SlidingWindowOptions, now time.Time) (core, error) {
		return asCore(limiter.NewSlidingWindow(o, now))
	},
	limit: func(o limiter.SlidingWindowOptions) int64 { return o.PermitLimit },
	refill: func(o limiter.SlidingWindowOptions) time.Duration {
		return windowRefill(o.Window, o.ManualReplenishment)
	},
	restored: restoreSlidingWindow,
}

var tokenBucket = &algorithm[limiter.TokenBucketOptions, *pb.TokenBucketOptions]{
	toWire:   contract.TokenBucketToWire,
	fromWire: contract.TokenBucketFromWire,
	newWire:  func() *pb.TokenBucketOptions { return new(pb.TokenBucketOptions) },
	newCore: func(o limiter.TokenBucketOptions, now time.Time) (core, error) {
		return asCore(limiter.NewTokenBucket(o, now))
	},
	limit:    func(o limiter.TokenBucketOptions) int64 { return o.TokenLimit },
	refill:   tokenBucketRefill,
	restored: restoreTokenBucket,
}

// windowEnd is what is left of a fixed window in use: the window's next
// tick, which starts a new one with every permit free. A window not in
// use (all permits free) or manually replenished has none.
func windowEnd(c core, now time.Time) time.Duration {
	at, ok := c.NextTick(now)
	if !ok {
		return 0
	}
	return max(at.Sub(now), 1) // an overdue tick is a window about to end, not an unknown one
}

// windowRefill is a window's refill time: one window, under automatic
// replenishment.
func windowRefill(window time.Duration, manual bool) time.Duration {
	if manual {
		return 0
	}
	return window
}

// tokenBucketRefill is the time the periods that fill an empty bucket
// take, under automatic replenishment; 0 when it would overflow.
func tokenBucketRefill(o limiter.TokenBucketOptions) time.Duration {
	if o.ManualReplenishment || o.TokensPerPeriod <= 0 || o.ReplenishmentPeriod <= 0 {
		return 0
	}
	periods := o.TokenLimit/o.TokensPerPeriod + 1
	if periods > math.MaxInt64/int64(o.ReplenishmentPeriod) {
		return 0
	}
	return time.Duration(periods) * o.ReplenishmentPeriod
}

// Defaults are the options of grains that were never configured, one per
// algorithm; Register expects them valid.
type Defaults struct {
	Concurrency   limiter.ConcurrencyOptions
	FixedWindow   limiter.FixedWindowOptions
	SlidingWindow limiter.SlidingWindowOptions
	TokenBucket   limiter.TokenBucketOptions
}

// Compile-time checks that the grains implement their contracts and the
// runtime's hooks.
var (
	_ pb.ConcurrencyLimiterGrain   = (*grain[limiter.ConcurrencyOptions, *pb.ConcurrencyOptions, *pb.ConcurrencyAcquireRequest])(nil)
	_ pb.FixedWindowLimiterGrain   = (*grain[limiter.FixedWindowOptions, *pb.FixedWindowOptions, *pb.FixedWindowAcquireRequest])(nil)
	_ pb.SlidingWindowLimiterGrain = (*grain[limiter.SlidingWindowOptions, *pb.SlidingWindowOptions, *pb.SlidingWindowAcquireRequest])(nil)
	_ pb.TokenBucketLimiterGrain   = (*grain[limiter.TokenBucketOptions, *pb.TokenBucketOptions, *pb.TokenBucketAcquireRequest])(nil)
	_ actor.Activator              = (*grain[limiter.ConcurrencyOptions, *pb.ConcurrencyOptions, *pb.ConcurrencyAcquireRequest])(nil)
	_ actor.Deactivator            = (*grain[limiter.ConcurrencyOptions, *pb.ConcurrencyOptions, *pb.ConcurrencyAcquireRequest])(nil)
	_ actor.Stateful               = (*grain[limiter.ConcurrencyOptions, *pb.ConcurrencyOptions, *pb.ConcurrencyAcquireRequest])(nil)
)

// Register registers the four limiter grain types on r with the given
// defaults; their acquisitions are counted in counters (nil: not counted
// anywhere the caller can read).
func Register(r proxy.Registrar, d Defaults, counters *Counters) error {
	if counters == nil {
		counters = new(Counters)
	}
	concurrencyKind := newKind(concurrency, d.Concurrency, counters)
	fixedWindowKind := newKind(fixedWindow, d.FixedWindow, counters)
	slidingWindowKind := newKind(slidingWindow, d.SlidingWindow, counters)
	tokenBucketKind := newKind(tokenBucket, d.TokenBucket, counters)
	if err := pb.RegisterConcurrencyLimiterGrain(r, func(actor.GrainID) pb.ConcurrencyLimiterGrain {
		return &grain[limiter.ConcurrencyOptions, *pb.ConcurrencyOptions, *pb.ConcurrencyAcquireRequest]{kind: concurrencyKind}
	}); err != nil {
		return err
	}
	if err := pb.RegisterFixedWindowLimiterGrain(r, func(actor.GrainID) pb.FixedWindowLimiterGrain {
		return &grain[limiter.FixedWindowOptions, *pb.FixedWindowOptions, *pb.FixedWindowAcquireRequest]{kind: fixedWindowKind}
	}); err != nil {
		return err
	}
	if err := pb.RegisterSlidingWindowLimiterGrain(r, func(actor.GrainID) pb.SlidingWindowLimiterGrain {
		return &grain[limiter.SlidingWindowOptions, *pb.SlidingWindowOptions, *pb.SlidingWindowAcquireRequest]{kind: slidingWindowKind}
	}); err != nil {
		return err
	}
	return pb.RegisterTokenBucketLimiterGrain(r, func(actor.GrainID) pb.TokenBucketLimiterGrain {
		return &grain[limiter.TokenBucketOptions, *pb.TokenBucketOptions, *pb.TokenBucketAcquireRequest]{kind: tokenBucketKind}
	})
}
