package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/limiter"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

// twoSilos starts a cluster of two silos and returns a client of each
// gateway: whichever silo a limiter lives on, one of them reaches it
// through the other silo. The clients hold the fixture's token, with the
// admin right that replenishing and configuring need.
func twoSilos(t *testing.T) []proxy.Caller {
	t.Helper()
	c := testcluster.New(t, testcluster.Options{Silos: 2,
		Configure: func(_ int, o *silo.Options) {
			o.Security.ClientTokens = []silo.ClientToken{{Name: fixtureToken.Name, Secret: fixtureToken.Secret, Rights: actor.RightAdmin}}
		},
		Register: func(s *silo.Silo) error { return ratelimit.Register(s, ratelimit.Defaults{}) }})
	var callers []proxy.Caller
	for _, gw := range c.Gateways() {
		callers = append(callers, c.NewClient(client.Options{Gateways: []string{gw}, Token: &fixtureToken}))
	}
	return callers
}

// attemptCase is a limiter of one algorithm with one permit (or token),
// room in its queue and manual replenishment.
type attemptCase struct {
	name    string
	holder  func(c proxy.Caller, key string, order ratelimit.QueueOrder) ratelimit.Limiter
	retries bool // time-based: a failed attempt carries RETRY_AFTER
}

var attemptCases = []attemptCase{
	{"concurrency", func(c proxy.Caller, key string, order ratelimit.QueueOrder) ratelimit.Limiter {
		return ratelimit.Concurrency(c, key, ratelimit.ConcurrencyOptions{PermitLimit: 2, QueueLimit: 2, QueueOrder: order})
	}, false},
	{"fixed-window", func(c proxy.Caller, key string, order ratelimit.QueueOrder) ratelimit.Limiter {
		return ratelimit.FixedWindow(c, key, ratelimit.FixedWindowOptions{PermitLimit: 2, QueueLimit: 2, QueueOrder: order,
			Window: time.Hour, ManualReplenishment: true})
	}, true},
	{"sliding-window", func(c proxy.Caller, key string, order ratelimit.QueueOrder) ratelimit.Limiter {
		return ratelimit.SlidingWindow(c, key, ratelimit.SlidingWindowOptions{PermitLimit: 2, QueueLimit: 2, QueueOrder: order,
			Window: time.Hour, SegmentsPerWindow: 2, ManualReplenishment: true})
	}, true},
	{"token-bucket", func(c proxy.Caller, key string, order ratelimit.QueueOrder) ratelimit.Limiter {
		return ratelimit.TokenBucket(c, key, ratelimit.TokenBucketOptions{TokenLimit: 2, QueueLimit: 2, QueueOrder: order,
			TokensPerPeriod: 1, ReplenishmentPeriod: time.Hour, ManualReplenishment: true})
	}, true},
}

func tryAcquire(t *testing.T, l ratelimit.Limiter, n int64) *ratelimit.Lease {
	t.Helper()
	lease, err := l.TryAcquire(context.Background(), n)
	require.NoError(t, err)
	return lease
}

// Reference cases AcquireZero_WithAvailability / WithoutAvailability,
// GetStatisticsWithZeroPermitCount and the failed attempt's metadata,
// through both gateways of a two-silo cluster.
func TestTryAcquireOfZeroAndOfTheLastPermitsAsTheReference(t *testing.T) {
	callers := twoSilos(t)
	for _, tc := range attemptCases {
		t.Run(tc.name, func(t *testing.T) {
			key := "zero-" + tc.name
			via := []ratelimit.Limiter{tc.holder(callers[0], key, ratelimit.OldestFirst), tc.holder(callers[1], key, ratelimit.OldestFirst)}
			zero := tryAcquire(t, via[0], 0)
			assert.True(t, zero.Acquired(), "a zero-permit attempt succeeds while a permit is free")
			assert.True(t, zero.ReleaseOptional(), "and holds nothing")
			all := tryAcquire(t, via[1], 2)
			require.True(t, all.Acquired())
			assert.Equal(t, tc.retries, all.ReleaseOptional(), "only concurrency leases need release")

			for _, l := range via {
				failed := tryAcquire(t, l, 0)
				assert.False(t, failed.Acquired(), "a zero-permit attempt fails with nothing free")
				assert.Equal(t, ratelimit.ReasonRateLimitExceeded, failed.Reason())
				if tc.retries {
					assert.Positive(t, failed.RetryAfter(), "a time-based attempt says when to retry")
				} else {
					assert.Zero(t, failed.RetryAfter(), "a concurrency attempt carries no hint")
					assert.Empty(t, collect(failed), "nor a reason phrase")
				}
			}
			st, err := via[0].Statistics(context.Background())
			require.NoError(t, err)
			assert.EqualValues(t, 0, st.AvailablePermits)
			assert.EqualValues(t, 2, st.TotalSuccessfulLeases, "the zero-permit success counts")
			assert.EqualValues(t, 2, st.TotalFailedLeases, "so do the zero-permit failures")
			assert.Zero(t, st.QueuedPermits, "attempts never queue")
			require.NoError(t, all.Release(context.Background()))
		})
	}
}

func collect(l *ratelimit.Lease) map[string]string {
	m := map[string]string{}
	for k, v := range l.Metadata() {
		m[k] = v
	}
	return m
}

// Reference cases CannotAcquireResourcesWithAcquireWithQueuedItemsIfOldestFirst
// and CanAcquireResourcesWithAcquireWithQueuedItemsIfNewestFirst: with one
// of two permits taken and a waiter for two, an attempt for the free
// permit fails under OldestFirst and succeeds under NewestFirst.
func TestTryAcquireBehindAWaiterDependsOnTheQueueOrder(t *testing.T) {
	callers := twoSilos(t)
	for _, tc := range attemptCases {
		for _, order := range []ratelimit.QueueOrder{ratelimit.OldestFirst, ratelimit.NewestFirst} {
			t.Run(tc.name+"/"+order.String(), func(t *testing.T) {
				key := "order-" + tc.name + "-" + order.String()
				first, other := tc.holder(callers[0], key, order), tc.holder(callers[1], key, order)
				held := tryAcquire(t, first, 1)
				require.True(t, held.Acquired())
				ctx, cancel := context.WithCancel(context.Background())
				waited := make(chan error, 1)
				go func() {
					_, err := first.Acquire(ctx, 2)
					waited <- err
				}()
				waitForWaiting(t, other, 1)

				attempt := tryAcquire(t, other, 1)
				assert.Equal(t, order == ratelimit.NewestFirst, attempt.Acquired())
				st, err := other.Statistics(context.Background())
				require.NoError(t, err)
				assert.EqualValues(t, 2, st.QueuedPermits, "the attempt did not join the queue")

				cancel()
				assert.ErrorIs(t, <-waited, context.Canceled)
				require.NoError(t, held.Release(context.Background()))
				require.NoError(t, attempt.Release(context.Background()))
			})
		}
	}
}

// Reference cases RetryMetadataOnFailedWaitAsync,
// CorrectRetryMetadataWithQueuedItem and
// CorrectRetryMetadataWithMultipleTokensPerPeriod, for attempts: the
// bucket's RETRY_AFTER counts the periods the request and the queue need.
func TestTryAcquireRetryAfterOfATokenBucketAsTheReference(t *testing.T) {
	callers := twoSilos(t)
	for _, tc := range []struct {
		name      string
		perPeriod int64
		queued    bool
		want      time.Duration
	}{
		{"one-per-period", 1, false, 40 * time.Second},
		{"one-per-period-one-queued", 1, true, 60 * time.Second},
		{"two-per-period-one-queued", 2, true, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := ratelimit.TokenBucketOptions{TokenLimit: 2, QueueLimit: 1, TokensPerPeriod: tc.perPeriod,
				ReplenishmentPeriod: 20 * time.Second, ManualReplenishment: true}
			bucket := []ratelimit.Limiter{ratelimit.TokenBucket(callers[0], "bucket-"+tc.name, o), ratelimit.TokenBucket(callers[1], "bucket-"+tc.name, o)}
			require.True(t, tryAcquire(t, bucket[0], 2).Acquired())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			waited := make(chan error, 1)
			if tc.queued {
				go func() {
					_, err := bucket[0].Acquire(ctx, 1)
					waited <- err
				}()
				waitForWaiting(t, bucket[1], 1)
			}
			for _, b := range bucket {
				failed := tryAcquire(t, b, 2)
				assert.False(t, failed.Acquired())
				assert.Equal(t, tc.want, failed.RetryAfter())
			}
			if tc.queued {
				cancel()
				assert.ErrorIs(t, <-waited, context.Canceled)
			}
		})
	}
}

// Reference case GetStatisticsHasCorrectValues, with the attempts as
// TryAcquire and the queued acquisition as Acquire.
func TestTryAcquireStatisticsAsTheReference(t *testing.T) {
	callers := twoSilos(t)
	o := ratelimit.FixedWindowOptions{PermitLimit: 100, QueueLimit: 50, Window: time.Millisecond, ManualReplenishment: true}
	a, b := ratelimit.FixedWindow(callers[0], "statistics", o), ratelimit.FixedWindow(callers[1], "statistics", o)
	want := func(available, queued, failed, succeeded int64) {
		t.Helper()
		st, err := b.Statistics(context.Background())
		require.NoError(t, err)
		assert.Equal(t, [4]int64{available, queued, failed, succeeded},
			[4]int64{st.AvailablePermits, st.QueuedPermits, st.TotalFailedLeases, st.TotalSuccessfulLeases}, "%v", st)
	}
	require.True(t, tryAcquire(t, a, 60).Acquired())
	want(40, 0, 0, 1)
	queued := make(chan *ratelimit.Lease, 1)
	go func() {
		l, err := a.Acquire(context.Background(), 50)
		assert.NoError(t, err)
		queued <- l
	}()
	waitForWaiting(t, b, 1)
	want(40, 50, 0, 1)
	full, err := b.Acquire(context.Background(), 1)
	require.NoError(t, err)
	assert.False(t, full.Acquired(), "the queue is full")
	want(40, 50, 1, 1)
	assert.False(t, tryAcquire(t, b, 100).Acquired())
	want(40, 50, 2, 1)
	eventually(t, func() bool {
		_, err := a.TryReplenish(context.Background()) // a window of 1 ms has passed by the time it runs
		require.NoError(t, err)
		st, err := a.Statistics(context.Background())
		return err == nil && st.QueuedPermits == 0
	}, "the replenishment grants the waiter")
	assert.True(t, (<-queued).Acquired())
	want(50, 0, 2, 2)
}

func TestTryAcquireArgumentErrors(t *testing.T) {
	callers := twoSilos(t)
	for _, c := range callers {
		h := ratelimit.Concurrency(c, "arguments", ratelimit.ConcurrencyOptions{PermitLimit: 1})
		_, err := h.TryAcquire(context.Background(), -1)
		assert.ErrorIs(t, err, ratelimit.ErrNegativeCount)
		_, err = h.TryAcquire(context.Background(), 2)
		assert.ErrorIs(t, err, ratelimit.ErrCountExceedsLimit)
		assert.ErrorIs(t, err, limiter.ErrCountExceedsLimit, "the grain's answer is the limiter's error")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err = h.TryAcquire(ctx, 1)
		assert.True(t, errors.Is(err, context.Canceled), "a context already done sends nothing")
	}
}

func TestGroupTryAcquireNeverQueuesInAnyMember(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	pool := ratelimit.Concurrency(c, "group-try", ratelimit.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 4})
	window := ratelimit.FixedWindow(c, "group-try", ratelimit.FixedWindowOptions{PermitLimit: 5, Window: time.Hour, ManualReplenishment: true})
	g := ratelimit.NewGroup(window, pool)
	lease, err := g.TryAcquire(context.Background())
	require.NoError(t, err)
	require.True(t, lease.Acquired())

	other := ratelimit.NewGroup(window, pool)
	refused, err := other.TryAcquire(context.Background())
	require.NoError(t, err)
	assert.False(t, refused.Acquired(), "the pool's permit is held, and the attempt does not wait for it")
	st, err := pool.Statistics(context.Background())
	require.NoError(t, err)
	assert.Zero(t, st.QueuedPermits)
	require.NoError(t, lease.Release(context.Background()))
	again, err := other.TryAcquire(context.Background())
	require.NoError(t, err)
	assert.True(t, again.Acquired())
	require.NoError(t, again.Release(context.Background()))
}
