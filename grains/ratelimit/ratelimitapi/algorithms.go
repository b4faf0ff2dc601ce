package ratelimitapi

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/granary-go/granary/grains/ratelimit"
	apiv1 "github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

// algorithm is what the service does with the limiters of one algorithm.
type algorithm interface {
	// acquire takes permits from key's limiter, under o when o is set.
	acquire(ctx context.Context, c proxy.Caller, key string, permits int64, o *apiv1.Options) (*ratelimit.Lease, error)
	// tryAcquire is acquire as an attempt, which never waits in the queue.
	tryAcquire(ctx context.Context, c proxy.Caller, key string, permits int64, o *apiv1.Options) (*ratelimit.Lease, error)
	// bound returns key's limiter, bound to o when o is set: a part of a
	// decision over many limits.
	bound(c proxy.Caller, key string, o *apiv1.Options) ratelimit.Limiter
	configure(ctx context.Context, c proxy.Caller, key string, o *apiv1.Options) error
	configuration(ctx context.Context, c proxy.Caller, key string) (*apiv1.Options, error)
	release(ctx context.Context, c proxy.Caller, key string, leaseID uint64) (bool, error)
	// limiter returns key's limiter for the calls every algorithm shares.
	limiter(c proxy.Caller, key string) ratelimit.Limiter
	// named returns the options of the configuration called name for this
	// algorithm, if configs has one.
	named(configs *ratelimit.Configs, name string) (*apiv1.Options, bool)
}

// kind is an algorithm whose options are O.
type kind[O ratelimit.Options] struct {
	holder  func(proxy.Caller, string, ...O) *ratelimit.Holder[O]
	fromAPI func(*apiv1.Options) O
	toAPI   func(O) *apiv1.Options
	// releaser is nil for the time-based algorithms, whose grains keep
	// nothing to release.
	releaser func(ctx context.Context, c proxy.Caller, key string, leaseID uint64) (*pb.ReleaseReply, error)
}

func (k *kind[O]) acquire(ctx context.Context, c proxy.Caller, key string, permits int64, o *apiv1.Options) (*ratelimit.Lease, error) {
	h := k.holder(c, key)
	if o == nil {
		return h.Acquire(ctx, permits)
	}
	return h.AcquireAndCheckConfiguration(ctx, permits, k.fromAPI(o))
}

func (k *kind[O]) tryAcquire(ctx context.Context, c proxy.Caller, key string, permits int64, o *apiv1.Options) (*ratelimit.Lease, error) {
	if o == nil {
		return k.holder(c, key).TryAcquire(ctx, permits)
	}
	return k.holder(c, key, k.fromAPI(o)).TryAcquire(ctx, permits)
}

func (k *kind[O]) bound(c proxy.Caller, key string, o *apiv1.Options) ratelimit.Limiter {
	if o == nil {
		return k.holder(c, key)
	}
	return k.holder(c, key, k.fromAPI(o))
}

func (k *kind[O]) configure(ctx context.Context, c proxy.Caller, key string, o *apiv1.Options) error {
	return k.holder(c, key).Configure(ctx, k.fromAPI(o))
}

func (k *kind[O]) configuration(ctx context.Context, c proxy.Caller, key string) (*apiv1.Options, error) {
	o, err := k.holder(c, key).Configuration(ctx)
	if err != nil {
		return nil, err
	}
	return k.toAPI(o), nil
}

func (k *kind[O]) release(ctx context.Context, c proxy.Caller, key string, leaseID uint64) (bool, error) {
	if k.releaser == nil || leaseID == 0 {
		return false, nil
	}
	reply, err := k.releaser(ctx, c, key, leaseID)
	if err != nil {
		return false, err
	}
	return reply.Released, nil
}

func (k *kind[O]) limiter(c proxy.Caller, key string) ratelimit.Limiter { return k.holder(c, key) }

func (k *kind[O]) named(configs *ratelimit.Configs, name string) (*apiv1.Options, bool) {
	o, ok := ratelimit.Lookup[O](configs, name)
	if !ok {
		return nil, false
	}
	return k.toAPI(o), true
}

// algorithms are the four algorithms by their API name.
var algorithms = map[apiv1.Algorithm]algorithm{
	apiv1.Algorithm_ALGORITHM_CONCURRENCY: &kind[ratelimit.ConcurrencyOptions]{
		holder: ratelimit.Concurrency,
		fromAPI: func(o *apiv1.Options) ratelimit.ConcurrencyOptions {
			c := o.GetConcurrency()
			return ratelimit.ConcurrencyOptions{PermitLimit: c.GetPermitLimit(), QueueLimit: c.GetQueueLimit(), QueueOrder: queueOrder(c.GetQueueOrder())}
		},
		toAPI: func(o ratelimit.ConcurrencyOptions) *apiv1.Options {
			return &apiv1.Options{Algorithm: &apiv1.Options_Concurrency{Concurrency: &apiv1.ConcurrencyOptions{
				PermitLimit: o.PermitLimit, QueueLimit: o.QueueLimit, QueueOrder: apiQueueOrder(o.QueueOrder),
			}}}
		},
		releaser: func(ctx context.Context, c proxy.Caller, key string, leaseID uint64) (*pb.ReleaseReply, error) {
			return pb.NewConcurrencyLimiterRef(c, key).Release(ctx, &pb.ReleaseRequest{LeaseId: leaseID})
		},
	},
	apiv1.Algorithm_ALGORITHM_FIXED_WINDOW: &kind[ratelimit.FixedWindowOptions]{
		holder: ratelimit.FixedWindow,
		fromAPI: func(o *apiv1.Options) ratelimit.FixedWindowOptions {
			f := o.GetFixedWindow()
			return ratelimit.FixedWindowOptions{
				PermitLimit: f.GetPermitLimit(), QueueLimit: f.GetQueueLimit(), QueueOrder: queueOrder(f.GetQueueOrder()),
				Window: duration(f.GetWindow()), ManualReplenishment: f.GetManualReplenishment(),
			}
		},
		toAPI: func(o ratelimit.FixedWindowOptions) *apiv1.Options {
			return &apiv1.Options{Algorithm: &apiv1.Options_FixedWindow{FixedWindow: &apiv1.FixedWindowOptions{
				PermitLimit: o.PermitLimit, QueueLimit: o.QueueLimit, QueueOrder: apiQueueOrder(o.QueueOrder),
				Window: durationpb.New(o.Window), ManualReplenishment: o.ManualReplenishment,
			}}}
		},
	},
	apiv1.Algorithm_ALGORITHM_SLIDING_WINDOW: &kind[ratelimit.SlidingWindowOptions]{
		holder: ratelimit.SlidingWindow,
		fromAPI: func(o *apiv1.Options) ratelimit.SlidingWindowOptions {
			s := o.GetSlidingWindow()
			return ratelimit.SlidingWindowOptions{
				PermitLimit: s.GetPermitLimit(), QueueLimit: s.GetQueueLimit(), QueueOrder: queueOrder(s.GetQueueOrder()),
				Window: duration(s.GetWindow()), ManualReplenishment: s.GetManualReplenishment(), SegmentsPerWindow: s.GetSegmentsPerWindow(),
			}
		},
		toAPI: func(o ratelimit.SlidingWindowOptions) *apiv1.Options {
			return &apiv1.Options{Algorithm: &apiv1.Options_SlidingWindow{SlidingWindow: &apiv1.SlidingWindowOptions{
				PermitLimit: o.PermitLimit, QueueLimit: o.QueueLimit, QueueOrder: apiQueueOrder(o.QueueOrder),
				Window: durationpb.New(o.Window), ManualReplenishment: o.ManualReplenishment, SegmentsPerWindow: o.SegmentsPerWindow,
			}}}
		},
	},
	apiv1.Algorithm_ALGORITHM_TOKEN_BUCKET: &kind[ratelimit.TokenBucketOptions]{
		holder: ratelimit.TokenBucket,
		fromAPI: func(o *apiv1.Options) ratelimit.TokenBucketOptions {
			b := o.GetTokenBucket()
			return ratelimit.TokenBucketOptions{
				TokenLimit: b.GetTokenLimit(), QueueLimit: b.GetQueueLimit(), QueueOrder: queueOrder(b.GetQueueOrder()),
				ReplenishmentPeriod: duration(b.GetReplenishmentPeriod()), ManualReplenishment: b.GetManualReplenishment(),
				TokensPerPeriod: b.GetTokensPerPeriod(),
			}
		},
		toAPI: func(o ratelimit.TokenBucketOptions) *apiv1.Options {
			return &apiv1.Options{Algorithm: &apiv1.Options_TokenBucket{TokenBucket: &apiv1.TokenBucketOptions{
				TokenLimit: o.TokenLimit, QueueLimit: o.QueueLimit, QueueOrder: apiQueueOrder(o.QueueOrder),
				ReplenishmentPeriod: durationpb.New(o.ReplenishmentPeriod), ManualReplenishment: o.ManualReplenishment,
				TokensPerPeriod: o.TokensPerPeriod,
			}}}
		},
	},
}

// algorithmOf returns the algorithm whose options o holds.
func algorithmOf(o *apiv1.Options) (apiv1.Algorithm, bool) {
	switch o.GetAlgorithm().(type) {
	case *apiv1.Options_Concurrency:
		return apiv1.Algorithm_ALGORITHM_CONCURRENCY, true
	case *apiv1.Options_FixedWindow:
		return apiv1.Algorithm_ALGORITHM_FIXED_WINDOW, true
	case *apiv1.Options_SlidingWindow:
		return apiv1.Algorithm_ALGORITHM_SLIDING_WINDOW, true
	case *apiv1.Options_TokenBucket:
		return apiv1.Algorithm_ALGORITHM_TOKEN_BUCKET, true
	}
	return apiv1.Algorithm_ALGORITHM_UNSPECIFIED, false
}

func queueOrder(o apiv1.QueueOrder) ratelimit.QueueOrder {
	if o == apiv1.QueueOrder_QUEUE_ORDER_NEWEST_FIRST {
		return ratelimit.NewestFirst
	}
	return ratelimit.OldestFirst
}

func apiQueueOrder(o ratelimit.QueueOrder) apiv1.QueueOrder {
	if o == ratelimit.NewestFirst {
		return apiv1.QueueOrder_QUEUE_ORDER_NEWEST_FIRST
	}
	return apiv1.QueueOrder_QUEUE_ORDER_OLDEST_FIRST
}

// duration converts a checked duration (see checkOptions); absent is 0,
// which the options' validation refuses.
func duration(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

// checkOptions refuses what the options' own validation cannot see: an
// enum value the API does not define, a duration that is not one.
func checkOptions(o *apiv1.Options) error {
	var (
		order  apiv1.QueueOrder
		period *durationpb.Duration
	)
	switch a := o.GetAlgorithm().(type) {
	case *apiv1.Options_Concurrency:
		order = a.Concurrency.GetQueueOrder()
	case *apiv1.Options_FixedWindow:
		order, period = a.FixedWindow.GetQueueOrder(), a.FixedWindow.GetWindow()
	case *apiv1.Options_SlidingWindow:
		order, period = a.SlidingWindow.GetQueueOrder(), a.SlidingWindow.GetWindow()
	case *apiv1.Options_TokenBucket:
		order, period = a.TokenBucket.GetQueueOrder(), a.TokenBucket.GetReplenishmentPeriod()
	}
	if _, ok := apiv1.QueueOrder_name[int32(order)]; !ok {
		return fmt.Errorf("%w: queue order %d", errInvalid, order)
	}
	if period != nil {
		if err := period.CheckValid(); err != nil {
			return fmt.Errorf("%w: %w", errInvalid, err)
		}
	}
	return nil
}
