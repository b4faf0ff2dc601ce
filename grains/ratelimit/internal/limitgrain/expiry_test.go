package limitgrain

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
)

func renew(t *testing.T, g *concurrencyGrain, ids ...uint64) []uint64 {
	t.Helper()
	reply, err := g.Renew(context.Background(), &pb.RenewRequest{LeaseIds: ids})
	require.NoError(t, err)
	return reply.Unknown
}

func TestALeaseNotRenewedExpiresAndServesTheQueue(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	f.budget = time.Minute
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1, LeaseTTL: 10 * time.Second})
	held := acquire(f, g, 1).lease(t)
	assert.EqualValues(t, 10*time.Second, held.TtlNanos, "the holder learns how often to renew")
	waiter := acquire(f, g, 1).waiting(t)

	f.advance(10*time.Second - time.Millisecond)
	assert.False(t, waiter.replied, "nothing expires early")
	f.advance(time.Millisecond)
	granted := waiter.lease(t)
	assert.True(t, granted.Acquired, "the expired lease's permit went to the waiter")
	assert.Empty(t, renew(t, g, granted.LeaseId))
	assert.Equal(t, []uint64{held.LeaseId}, renew(t, g, held.LeaseId), "the expired lease is unknown")
	_, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: held.LeaseId})
	require.NoError(t, err)
	assert.EqualValues(t, 1, stats(t, g).ActiveLeases, "a late release of the expired lease takes nothing from the new holder")
}

func TestRenewedLeasesLiveOnUnderOneTimer(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 100, LeaseTTL: 9 * time.Second})
	var ids []uint64
	for range 50 {
		ids = append(ids, acquire(f, g, 1).lease(t).LeaseId)
	}
	assert.Equal(t, 1, f.pendingTimers(), "one timer for every lease")
	for range 20 { // a minute of renewals every third of the time to live
		f.advance(3 * time.Second)
		require.Empty(t, renew(t, g, ids...))
		assert.LessOrEqual(t, f.pendingTimers(), 1)
	}
	assert.EqualValues(t, 50, stats(t, g).ActiveLeases, "no live lease expired")
	armed := f.timersArmed
	f.advance(9 * time.Second) // renewals stop
	assert.Zero(t, stats(t, g).ActiveLeases)
	assert.EqualValues(t, 100, stats(t, g).AvailablePermits)
	assert.Zero(t, f.pendingTimers(), "no timer while no lease is held")
	assert.LessOrEqual(t, f.timersArmed-armed, 3, "the expiry timer fired a few times, not once per lease")
}

func TestAGrantWhoseReplyWasLostExpires(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1})
	_ = acquire(f, g, 1) // the caller never sees it, so never renews it
	assert.Zero(t, stats(t, g).AvailablePermits)
	f.advance(limiter.DefaultLeaseTTL)
	assert.EqualValues(t, 1, stats(t, g).AvailablePermits, "the default time to live returns it")
}

func TestStoredLeasesKeepTheirExpiry(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	o := limiter.ConcurrencyOptions{PermitLimit: 3, LeaseTTL: 10 * time.Second}
	g := newConcurrency(f, o)
	early := acquire(f, g, 1).lease(t)
	f.advance(6 * time.Second)
	late := acquire(f, g, 1).lease(t)
	g.writeState()
	saved := f.stored

	f2 := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	f2.now = f.now.Add(time.Second)
	g2 := startGrain[limiter.ConcurrencyOptions, *pb.ConcurrencyOptions, *pb.ConcurrencyAcquireRequest](f2, concurrency, o, saved)
	assert.EqualValues(t, 2, stats(t, g2).ActiveLeases)
	f2.advance(3 * time.Second) // 10 s after the early grant
	assert.Equal(t, []uint64{early.LeaseId}, renew(t, g2, early.LeaseId, late.LeaseId), "the early lease expired on time")
	f2.advance(10*time.Second - time.Millisecond)
	assert.EqualValues(t, 1, stats(t, g2).ActiveLeases, "the late one was renewed")
	f2.advance(time.Millisecond)
	assert.Zero(t, stats(t, g2).ActiveLeases, "and expires a time to live after its renewal")
}
