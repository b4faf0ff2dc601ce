package limitgrain

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit/internal/contract"
	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
)

func TestImmediateAnswersArmNoTimerAndKeepNoReply(t *testing.T) {
	t.Run("concurrency", func(t *testing.T) {
		f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
		g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 2})
		assert.True(t, acquire(f, g, 1).lease(t).Acquired)
		assert.True(t, acquire(f, g, 1).lease(t).Acquired)
		rejected := acquire(f, g, 1).lease(t)
		assert.False(t, rejected.Acquired, "queue 0 rejects at once")
		assert.Equal(t, 1, f.timersArmed, "only the leases' one expiry timer, armed by the first lease")
		assert.Empty(t, f.deferred)
	})
	t.Run("manual-fixed-window", func(t *testing.T) {
		f := newRuntime(t, pb.FixedWindowLimiterGrainType)
		g := newFixed(f, limiter.FixedWindowOptions{PermitLimit: 1, Window: time.Second, ManualReplenishment: true})
		assert.True(t, acquire(f, g, 1).lease(t).Acquired)
		rejected := acquire(f, g, 1).lease(t)
		assert.False(t, rejected.Acquired)
		require.Len(t, rejected.Metadata, 1)
		assert.Equal(t, limiter.MetadataRetryAfter, rejected.Metadata[0].Name)
		assert.Equal(t, "1s", rejected.Metadata[0].Value)
		assert.Zero(t, f.timersArmed)
		assert.Empty(t, f.deferred)
	})
	t.Run("auto-fixed-window", func(t *testing.T) {
		f := newRuntime(t, pb.FixedWindowLimiterGrainType)
		g := newFixed(f, limiter.FixedWindowOptions{PermitLimit: 3, Window: time.Second})
		assert.Zero(t, f.timersArmed, "a full limiter needs no tick")
		acquire(f, g, 1)
		assert.Equal(t, 1, f.timersArmed, "the first grant needs the window's tick")
		acquire(f, g, 1)
		acquire(f, g, 1)
		assert.False(t, acquire(f, g, 1).lease(t).Acquired)
		assert.Equal(t, 1, f.timersArmed, "later answers arm nothing")
		assert.Empty(t, f.deferred)
	})
}

func TestTimeBasedLeasesAreReleaseOptionalAndKeepNothing(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	g := newFixed(f, limiter.FixedWindowOptions{PermitLimit: 100, Window: time.Hour, ManualReplenishment: true})
	ids := map[uint64]bool{}
	for range 50 {
		md := acquire(f, g, 1).lease(t)
		require.True(t, md.Acquired)
		assert.True(t, md.ReleaseOptional)
		assert.NotZero(t, md.LeaseId)
		ids[md.LeaseId] = true
	}
	assert.Len(t, ids, 50, "lease ids are unique")
	assert.Nil(t, g.leases)
	// An idle key's grain keeps only what its algorithm uses.
	assert.Nil(t, g.leaseTimes, "no lease expiry")
	assert.Nil(t, g.quota, "no quota state before a slice is asked for")
	assert.Nil(t, g.wireID, "no wire id: no reply names the grain")
	assert.Zero(t, stats(t, g).ActiveLeases)
	reply, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: 1})
	require.NoError(t, err)
	assert.False(t, reply.Released, "a time-based grain has nothing to release")
	assert.EqualValues(t, 50, stats(t, g).AvailablePermits, "and gives nothing back")
}

func TestConcurrencyLeasesAreKeptUntilReleased(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 3})
	md := acquire(f, g, 2).lease(t)
	require.True(t, md.Acquired)
	assert.False(t, md.ReleaseOptional)
	assert.Equal(t, f.id.Key, md.GrainId.Key)
	assert.Equal(t, f.id.Type, md.GrainId.Type)
	zero := acquire(f, g, 0).lease(t)
	assert.True(t, zero.Acquired)
	assert.True(t, zero.ReleaseOptional, "a zero-permit lease holds nothing")
	assert.Same(t, md.GrainId, acquire(f, g, 1).lease(t).GrainId, "one wire id, shared by the replies")
	assert.EqualValues(t, 2, stats(t, g).ActiveLeases)

	reply, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: md.LeaseId})
	require.NoError(t, err)
	assert.True(t, reply.Released)
	reply, err = g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: md.LeaseId})
	require.NoError(t, err)
	assert.False(t, reply.Released, "a second release of a lease does nothing")
	st := stats(t, g)
	assert.EqualValues(t, 2, st.AvailablePermits, "the second lease is still held")
	assert.EqualValues(t, 1, st.ActiveLeases)
}

func TestQueuedAcquisitionIsGrantedOnReleaseAndItsDeadlineStopped(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
	first := acquire(f, g, 1).lease(t)
	waiter := acquire(f, g, 1).waiting(t)
	assert.Equal(t, 2, f.pendingTimers(), "the waiter's deadline, and the leases' one expiry timer")
	assert.Zero(t, waiter.watched, "a caller that cannot cancel gets no cancellation hook")
	st := stats(t, g)
	assert.EqualValues(t, 1, st.QueuedPermits)
	assert.EqualValues(t, 1, st.WaitingCalls)

	_, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: first.LeaseId})
	require.NoError(t, err)
	granted := waiter.lease(t)
	assert.True(t, granted.Acquired)
	assert.Equal(t, 1, f.pendingTimers(), "the answered waiter's deadline is stopped; the leases' expiry stays")
	st = stats(t, g)
	assert.EqualValues(t, 0, st.AvailablePermits)
	assert.EqualValues(t, 1, st.ActiveLeases)
	assert.Zero(t, st.WaitingCalls)
}

// eachQueuedGrain runs body against a grain of each algorithm with one
// permit and room in its queue, replenished only by hand.
func eachQueuedGrain(t *testing.T, body func(t *testing.T, f *fakeRuntime, acquire func(int64) outcome, stats func() *pb.StatisticsReply)) {
	opts := struct {
		c limiter.ConcurrencyOptions
		f limiter.FixedWindowOptions
		s limiter.SlidingWindowOptions
		b limiter.TokenBucketOptions
	}{
		limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 4},
		limiter.FixedWindowOptions{PermitLimit: 1, QueueLimit: 4, Window: time.Hour, ManualReplenishment: true},
		limiter.SlidingWindowOptions{PermitLimit: 1, QueueLimit: 4, Window: time.Hour, SegmentsPerWindow: 2, ManualReplenishment: true},
		limiter.TokenBucketOptions{TokenLimit: 1, QueueLimit: 4, TokensPerPeriod: 1, ReplenishmentPeriod: time.Hour, ManualReplenishment: true},
	}
	t.Run("concurrency", func(t *testing.T) {
		f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
		g := newConcurrency(f, opts.c)
		body(t, f, func(n int64) outcome { return acquire(f, g, n) }, func() *pb.StatisticsReply { return stats(t, g) })
	})
	t.Run("fixed-window", func(t *testing.T) {
		f := newRuntime(t, pb.FixedWindowLimiterGrainType)
		g := newFixed(f, opts.f)
		body(t, f, func(n int64) outcome { return acquire(f, g, n) }, func() *pb.StatisticsReply { return stats(t, g) })
	})
	t.Run("sliding-window", func(t *testing.T) {
		f := newRuntime(t, pb.SlidingWindowLimiterGrainType)
		g := startGrain[limiter.SlidingWindowOptions, *pb.SlidingWindowOptions, *pb.SlidingWindowAcquireRequest](f, slidingWindow, opts.s, nil)
		body(t, f, func(n int64) outcome { return acquire(f, g, n) }, func() *pb.StatisticsReply { return stats(t, g) })
	})
	t.Run("token-bucket", func(t *testing.T) {
		f := newRuntime(t, pb.TokenBucketLimiterGrainType)
		g := startGrain[limiter.TokenBucketOptions, *pb.TokenBucketOptions, *pb.TokenBucketAcquireRequest](f, tokenBucket, opts.b, nil)
		body(t, f, func(n int64) outcome { return acquire(f, g, n) }, func() *pb.StatisticsReply { return stats(t, g) })
	})
}

func TestBudgetExpiryRemovesTheWaiterAndAnswersLeaseNotAcquired(t *testing.T) {
	eachQueuedGrain(t, func(t *testing.T, f *fakeRuntime, acquire func(int64) outcome, stats func() *pb.StatisticsReply) {
		require.True(t, acquire(1).lease(t).Acquired)
		f.budget = 800 * time.Millisecond
		waiter := acquire(1).waiting(t)
		f.advance(799 * time.Millisecond)
		assert.False(t, waiter.replied, "still within its budget")
		f.advance(time.Millisecond)
		md := waiter.lease(t)
		assert.False(t, md.Acquired)
		assert.Equal(t, "Lease not acquired", reason(md))
		assert.Zero(t, md.LeaseId, "a rejected lease has no id")
		st := stats()
		assert.Zero(t, st.QueuedPermits)
		assert.Zero(t, st.WaitingCalls)
		assert.Zero(t, st.TotalFailedLeases, "an expiry is a cancellation to the limiter: not counted")
		assert.EqualValues(t, 1, st.TotalSuccessfulLeases)
	})
}

func TestWaiterWithoutBudgetArmsNoDeadline(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	f.budget = 0
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
	acquire(f, g, 1).lease(t)
	armed := f.timersArmed // the leases' expiry
	acquire(f, g, 1).waiting(t)
	assert.Equal(t, armed, f.timersArmed)
}

func TestConcurrencyPermitGrantedAfterTheBudgetRanOutGoesBackFirst(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
	first := acquire(f, g, 1).lease(t)
	waiter := acquire(f, g, 1).waiting(t)
	// The deadline passes, but its expiry turn has not run yet when a
	// release grants the waiter.
	f.now = f.now.Add(2 * time.Second)
	_, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: first.LeaseId})
	require.NoError(t, err)
	md := waiter.lease(t)
	assert.False(t, md.Acquired)
	assert.Equal(t, "Lease not acquired", reason(md))
	st := stats(t, g)
	assert.EqualValues(t, 1, st.AvailablePermits, "the permit went back")
	assert.Zero(t, st.ActiveLeases)
	f.advance(0) // the expiry turn, when it runs, finds the call answered
	assert.EqualValues(t, 1, stats(t, g).AvailablePermits)
}

func TestTimeBasedGrantAfterTheBudgetRanOutIsDelivered(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	g := newFixed(f, limiter.FixedWindowOptions{PermitLimit: 1, QueueLimit: 1, Window: time.Hour, ManualReplenishment: true})
	acquire(f, g, 1).lease(t)
	waiter := acquire(f, g, 1).waiting(t)
	f.now = f.now.Add(time.Hour)
	_, err := g.TryReplenish(context.Background(), &pb.TryReplenishRequest{})
	require.NoError(t, err)
	assert.True(t, waiter.lease(t).Acquired, "the quota is spent either way, and the caller still waits")
}

func TestCancelledWaiterLeavesTheQueue(t *testing.T) {
	eachQueuedGrain(t, func(t *testing.T, f *fakeRuntime, acquire func(int64) outcome, stats func() *pb.StatisticsReply) {
		acquire(1).lease(t)
		before := f.pendingTimers() // a concurrency lease's expiry
		f.cancellable = true
		waiter := acquire(1).waiting(t)
		assert.Equal(t, 1, waiter.watched)
		waiter.cancelCall()
		require.True(t, waiter.replied)
		assert.ErrorIs(t, waiter.err, context.Canceled)
		st := stats()
		assert.Zero(t, st.QueuedPermits)
		assert.Zero(t, st.WaitingCalls)
		assert.Equal(t, before, f.pendingTimers(), "its deadline is stopped")
	})
}

func TestPermitGrantedToACallerThatCancelledGoesBack(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
	first := acquire(f, g, 1).lease(t)
	f.cancellable = true
	waiter := acquire(f, g, 1).waiting(t)
	waiter.cancel() // the caller cancelled; the cancel turn has not run yet
	_, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: first.LeaseId})
	require.NoError(t, err)
	require.True(t, waiter.replied)
	assert.ErrorIs(t, waiter.err, context.Canceled)
	assert.EqualValues(t, 1, stats(t, g).AvailablePermits)
}

func TestWaiterEvictedByANewerOneIsRejected(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1, QueueOrder: limiter.NewestFirst})
	acquire(f, g, 1).lease(t)
	older := acquire(f, g, 1).waiting(t)
	newer := acquire(f, g, 1).waiting(t)
	md := older.lease(t)
	assert.False(t, md.Acquired)
	assert.Empty(t, md.Metadata, "an evicted waiter's lease carries no metadata")
	assert.False(t, newer.replied)
	st := stats(t, g)
	assert.EqualValues(t, 1, st.WaitingCalls)
	assert.EqualValues(t, 1, st.TotalFailedLeases)
}

func TestFullQueueRejectsAtOnceWithItsReason(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
	acquire(f, g, 1).lease(t)
	acquire(f, g, 1).waiting(t)
	armed := f.timersArmed
	md := acquire(f, g, 1).lease(t)
	assert.False(t, md.Acquired)
	assert.Equal(t, limiter.ReasonQueueLimitReached, reason(md))
	assert.Equal(t, armed, f.timersArmed, "a rejection arms nothing")
}

func TestArgumentErrorsAreReturned(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1})
	_, err := g.Acquire(context.Background(), &pb.AcquireRequest{Permits: 2})
	assert.ErrorIs(t, err, contract.ErrCountExceedsLimit)
	_, err = g.Acquire(context.Background(), &pb.AcquireRequest{Permits: -1})
	assert.ErrorIs(t, err, contract.ErrNegativeCount)
}

func TestTicksAreArmedOnlyWhileTheLimiterNeedsThem(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	g := newFixed(f, limiter.FixedWindowOptions{PermitLimit: 2, QueueLimit: 1, Window: time.Second})
	acquire(f, g, 1)
	acquire(f, g, 1)
	assert.Equal(t, 1, f.pendingTimers())
	f.budget = 5 * time.Second
	waiter := acquire(f, g, 1).waiting(t)
	f.advance(time.Second)
	assert.True(t, waiter.lease(t).Acquired, "the window's tick grants the waiter")
	assert.Equal(t, 1, f.pendingTimers(), "the waiter took a permit: the next window's tick is armed")
	f.advance(time.Second)
	assert.Zero(t, f.pendingTimers(), "a full limiter needs no tick")
	assert.EqualValues(t, 2, stats(t, g).AvailablePermits)
}

func TestTryReplenishGrantsWaitersOfAManualLimiter(t *testing.T) {
	f := newRuntime(t, pb.TokenBucketLimiterGrainType)
	g := startGrain[limiter.TokenBucketOptions, *pb.TokenBucketOptions, *pb.TokenBucketAcquireRequest](f, tokenBucket,
		limiter.TokenBucketOptions{TokenLimit: 2, QueueLimit: 2, TokensPerPeriod: 2, ReplenishmentPeriod: time.Second, ManualReplenishment: true}, nil)
	acquire(f, g, 2).lease(t)
	waiter := acquire(f, g, 2).waiting(t)
	f.now = f.now.Add(time.Second)
	reply, err := g.TryReplenish(context.Background(), &pb.TryReplenishRequest{})
	require.NoError(t, err)
	assert.True(t, reply.Replenished)
	assert.True(t, waiter.lease(t).Acquired)

	c := newConcurrency(newRuntime(t, pb.ConcurrencyLimiterGrainType), limiter.ConcurrencyOptions{PermitLimit: 1})
	reply, err = c.TryReplenish(context.Background(), &pb.TryReplenishRequest{})
	require.NoError(t, err)
	assert.False(t, reply.Replenished)
}

func TestDeactivationClosesTheLimiter(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
	acquire(f, g, 1)
	waiter := acquire(f, g, 1).waiting(t)
	require.NoError(t, g.OnDeactivate(context.Background(), nil))
	md := waiter.lease(t)
	assert.False(t, md.Acquired, "a waiter still held is answered with a rejection")
}
