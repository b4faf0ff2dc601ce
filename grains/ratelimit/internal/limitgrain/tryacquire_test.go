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

func tryConcurrency(f *fakeRuntime, g *concurrencyGrain, permits int64, o *pb.ConcurrencyOptions) outcome {
	return turn(f, func() (*pb.LeaseMetadata, error) {
		return g.TryAcquire(context.Background(), &pb.ConcurrencyAcquireRequest{Permits: permits, Options: o})
	})
}

func TestTryAcquireNeverQueuesNorArmsATimer(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 2, QueueLimit: 10})
	held := tryConcurrency(f, g, 2, nil).lease(t)
	require.True(t, held.Acquired)
	assert.False(t, held.ReleaseOptional, "a concurrency attempt's lease is kept until released")
	assert.EqualValues(t, 1, stats(t, g).ActiveLeases)

	rejected := tryConcurrency(f, g, 1, nil).lease(t)
	assert.False(t, rejected.Acquired, "an attempt does not queue although the queue has room")
	assert.Empty(t, rejected.Metadata, "an attempt's concurrency rejection carries no reason phrase")
	assert.Empty(t, f.deferred)
	assert.Equal(t, 1, f.timersArmed, "only the leases' one expiry timer")
	st := stats(t, g)
	assert.Zero(t, st.QueuedPermits)
	assert.EqualValues(t, 1, st.TotalFailedLeases)
	assert.EqualValues(t, 1, st.TotalSuccessfulLeases)

	_, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: held.LeaseId})
	require.NoError(t, err)
	assert.True(t, tryConcurrency(f, g, 1, nil).lease(t).Acquired, "released permits serve attempts")
}

func TestTryAcquireArgumentErrorsAreTheAcquisitionsOnes(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 2})
	assert.ErrorIs(t, tryConcurrency(f, g, 3, nil).err, contract.ErrCountExceedsLimit)
	assert.ErrorIs(t, tryConcurrency(f, g, -1, nil).err, contract.ErrNegativeCount)
	assert.ErrorIs(t, tryConcurrency(f, g, 3, &pb.ConcurrencyOptions{PermitLimit: 2}).err, contract.ErrCountExceedsLimit,
		"checked against the options it would install")
}

func TestTryAcquireInstallsDifferingOptionsOnlyWhenNothingWaits(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
	wider := &pb.ConcurrencyOptions{PermitLimit: 5, QueueLimit: 1}

	held := acquire(f, g, 1).lease(t)
	waiter := acquire(f, g, 1).waiting(t)
	rejected := tryConcurrency(f, g, 1, wider).lease(t)
	assert.False(t, rejected.Acquired, "a change would have to wait behind the queue: the attempt is refused now")
	assert.EqualValues(t, 1, g.options.PermitLimit, "and the options are unchanged")
	assert.False(t, waiter.replied)

	_, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: held.LeaseId})
	require.NoError(t, err)
	granted := waiter.lease(t)
	require.True(t, granted.Acquired)
	_, err = g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: granted.LeaseId})
	require.NoError(t, err)

	writes := f.writes
	md := tryConcurrency(f, g, 3, wider).lease(t)
	assert.True(t, md.Acquired, "with nothing waiting the options are installed, then the attempt runs")
	assert.EqualValues(t, 5, g.options.PermitLimit)
	assert.Equal(t, writes+1, f.writes, "and stored at once")
}

func TestTryAcquireOfATimeBasedGrainArmsItsTickAndCarriesRetryAfter(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	g := newFixed(f, limiter.FixedWindowOptions{PermitLimit: 1, QueueLimit: 4, Window: time.Second})
	try := func(n int64) *pb.LeaseMetadata {
		return turn(f, func() (*pb.LeaseMetadata, error) {
			return g.TryAcquire(context.Background(), &pb.FixedWindowAcquireRequest{Permits: n})
		}).lease(t)
	}
	granted := try(1)
	assert.True(t, granted.Acquired)
	assert.True(t, granted.ReleaseOptional)
	assert.Equal(t, 1, f.pendingTimers(), "the window's tick is armed as for an acquisition")
	f.advance(300 * time.Millisecond)
	rejected := try(0)
	assert.False(t, rejected.Acquired, "a zero-permit attempt fails when nothing is free")
	require.Len(t, rejected.Metadata, 1)
	assert.Equal(t, limiter.MetadataRetryAfter, rejected.Metadata[0].Name)
	assert.Equal(t, "700ms", rejected.Metadata[0].Value, "the rest of the window")
	assert.Empty(t, f.deferred)
	f.advance(700 * time.Millisecond)
	assert.True(t, try(1).Acquired, "the tick replenished the window")
}
