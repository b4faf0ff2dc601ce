package ratelimit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
)

// A decision that one limit refuses gives back what the others granted,
// for every algorithm: the table of docs/ratelimit.md.
func TestAManyLimitsDecisionThatOneRefusesGivesEverythingBack(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	ctx := context.Background()
	pool := ratelimit.Concurrency(c, "many", concurrencyOptions(3, 0))
	fixed := ratelimit.FixedWindow(c, "many", fixedOptions(3, 0))
	sliding := ratelimit.SlidingWindow(c, "many", slidingOptions(3, 0))
	bucket := ratelimit.TokenBucket(c, "many", tokenOptions(3, 0))
	strict := ratelimit.FixedWindow(c, "many-strict", fixedOptions(1, 0))
	exhaust, err := strict.Acquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, exhaust.Acquired())

	members := []ratelimit.Limiter{pool, fixed, sliding, bucket, strict}
	var acquisitions []ratelimit.Acquisition
	for _, l := range members {
		acquisitions = append(acquisitions, ratelimit.Acquisition{Limiter: l, Permits: 1})
	}
	for _, try := range []bool{false, true} {
		outcomes, ok := ratelimit.AcquireMany(ctx, ratelimit.ManyOptions{Try: try}, acquisitions...)
		assert.False(t, ok)
		require.Len(t, outcomes, len(members))
		for i, o := range outcomes[:4] {
			require.NoError(t, o.Err)
			assert.True(t, o.Lease.Acquired(), "member %d granted", i)
			assert.True(t, o.GivenBack, "member %d gave back", i)
		}
		assert.False(t, outcomes[4].Lease.Acquired())
		assert.False(t, outcomes[4].GivenBack, "a refusal has nothing to give back")
		for _, l := range members[:4] {
			assert.EqualValues(t, 3, available(t, l), "%s has all its permits again", l.GrainID())
		}
	}

	g := ratelimit.NewGroup(pool, fixed, sliding, bucket, strict)
	refused, err := g.Acquire(ctx)
	require.NoError(t, err)
	assert.False(t, refused.Acquired())
	assert.Equal(t, strict.GrainID(), refused.Owner())
	for _, l := range members[:4] {
		assert.EqualValues(t, 3, available(t, l), "the group gave %s back", l.GrainID())
	}
}

func TestAGrantedManyLimitsDecisionKeepsEveryLease(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	ctx := context.Background()
	pool := ratelimit.Concurrency(c, "kept", concurrencyOptions(3, 0))
	fixed := ratelimit.FixedWindow(c, "kept", fixedOptions(3, 0))
	outcomes, ok := ratelimit.AcquireMany(ctx, ratelimit.ManyOptions{},
		ratelimit.Acquisition{Limiter: pool, Permits: 2}, ratelimit.Acquisition{Limiter: fixed, Permits: 3})
	require.True(t, ok)
	assert.EqualValues(t, 1, available(t, pool))
	assert.EqualValues(t, 0, available(t, fixed))
	for _, o := range outcomes {
		require.NoError(t, o.Err)
		assert.True(t, o.Lease.Acquired())
		assert.False(t, o.GivenBack)
		require.NoError(t, o.Lease.Release(ctx))
	}
	assert.EqualValues(t, 3, available(t, pool), "released by its holder")
	assert.EqualValues(t, 0, available(t, fixed), "a time-based lease's release refunds nothing")
}

func TestAManyLimitsDecisionWithSkipErrorsLetsAnUnreachableLimitPass(t *testing.T) {
	e := newEnv(t)
	pool := ratelimit.Concurrency(e.silo.Caller(), "skip", concurrencyOptions(1, 0))
	broken := failingLimiter{Limiter: pool, err: assert.AnError}
	ctx := context.Background()
	outcomes, ok := ratelimit.AcquireMany(ctx, ratelimit.ManyOptions{}, ratelimit.Acquisition{Limiter: pool, Permits: 1}, ratelimit.Acquisition{Limiter: broken, Permits: 1})
	assert.False(t, ok)
	assert.ErrorIs(t, outcomes[1].Err, assert.AnError)
	assert.EqualValues(t, 1, available(t, pool))
	outcomes, ok = ratelimit.AcquireMany(ctx, ratelimit.ManyOptions{SkipErrors: true}, ratelimit.Acquisition{Limiter: pool, Permits: 1}, ratelimit.Acquisition{Limiter: broken, Permits: 1})
	assert.True(t, ok)
	require.NoError(t, outcomes[0].Lease.Release(ctx))
}

// BenchmarkGroupOfThree measures one decision over three time-based
// limits (fixed window, sliding window, token bucket, limits out of
// reach) through a gateway client, at 1 and at 16 goroutines: "sequential" takes
// them one after another, as Group did before it sent them at once;
// "concurrent" is Group.Acquire.
func BenchmarkGroupOfThree(b *testing.B) {
	e := newEnv(b, uncounted())
	c := e.client()
	limits := func() []ratelimit.Limiter {
		return []ratelimit.Limiter{
			ratelimit.FixedWindow(c, "group3-fixed", fixedOptions(huge, 0)),
			ratelimit.SlidingWindow(c, "group3-sliding", slidingOptions(huge, 0)),
			ratelimit.TokenBucket(c, "group3-bucket", tokenOptions(huge, 0)),
		}
	}
	ctx := context.Background()
	run := func(b *testing.B, op func(members []ratelimit.Limiter, g *ratelimit.Group) error) {
		for _, workers := range []int{1, 16} {
			b.Run(fmt.Sprintf("workers-%d", workers), func(b *testing.B) {
				var wg sync.WaitGroup
				per := b.N/workers + 1
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for range workers {
					members := limits()
					g := ratelimit.NewGroup(members...)
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range per {
							if err := op(members, g); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				b.ReportMetric(float64(per*workers)/time.Since(start).Seconds(), "ops/s")
			})
		}
	}
	b.Run("sequential", func(b *testing.B) {
		run(b, func(members []ratelimit.Limiter, _ *ratelimit.Group) error {
			for _, l := range members {
				lease, err := l.AcquireAndConfigure(ctx, 1)
				if err != nil {
					return err
				}
				if !lease.Acquired() {
					return lease.Err()
				}
			}
			return nil
		})
	})
	b.Run("concurrent", func(b *testing.B) {
		run(b, func(_ []ratelimit.Limiter, g *ratelimit.Group) error {
			lease, err := g.Acquire(ctx)
			if err != nil {
				return err
			}
			if !lease.Acquired() {
				return lease.Err()
			}
			return lease.Release(ctx)
		})
	})
}
