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

// TestAnswersCarryWhatIsLeft: every answer to an acquisition says what
// the limiter has free after it, as Statistics would, so that a caller
// need not ask again; a fixed window in use also says when it ends.
func TestAnswersCarryWhatIsLeft(t *testing.T) {
	t.Run("fixed-window", func(t *testing.T) {
		f := newRuntime(t, pb.FixedWindowLimiterGrainType)
		g := newFixed(f, limiter.FixedWindowOptions{PermitLimit: 5, Window: time.Minute})
		md := acquire(f, g, 2).lease(t)
		require.True(t, md.Acquired)
		assert.True(t, md.HasRemaining)
		assert.EqualValues(t, 3, md.Remaining)
		assert.Equal(t, time.Minute, time.Duration(md.ResetInNanos), "the window starts at its first use")

		f.advance(20 * time.Second)
		md = acquire(f, g, 3).lease(t)
		require.True(t, md.Acquired)
		assert.EqualValues(t, 0, md.Remaining)
		assert.True(t, md.HasRemaining, "none left is said, not left out")
		assert.Equal(t, 40*time.Second, time.Duration(md.ResetInNanos))
		assert.EqualValues(t, stats(t, g).AvailablePermits, md.Remaining)

		f.advance(10 * time.Second)
		rejected := acquire(f, g, 1).lease(t)
		require.False(t, rejected.Acquired)
		assert.True(t, rejected.HasRemaining)
		assert.EqualValues(t, 0, rejected.Remaining)
		assert.Equal(t, 30*time.Second, time.Duration(rejected.ResetInNanos))

		f.advance(31 * time.Second) // a new window, full until used
		md = acquire(f, g, 0).lease(t)
		assert.EqualValues(t, 5, md.Remaining)
		assert.Zero(t, md.ResetInNanos, "a window not in use has no end to tell")
	})
	t.Run("manual-fixed-window", func(t *testing.T) {
		f := newRuntime(t, pb.FixedWindowLimiterGrainType)
		g := newFixed(f, limiter.FixedWindowOptions{PermitLimit: 5, Window: time.Minute, ManualReplenishment: true})
		md := acquire(f, g, 1).lease(t)
		assert.EqualValues(t, 4, md.Remaining)
		assert.Zero(t, md.ResetInNanos, "only a replenishment call ends the window")
	})
	t.Run("sliding-window", func(t *testing.T) {
		f := newRuntime(t, pb.SlidingWindowLimiterGrainType)
		g := startGrain[limiter.SlidingWindowOptions, *pb.SlidingWindowOptions, *pb.SlidingWindowAcquireRequest](f, slidingWindow,
			limiter.SlidingWindowOptions{PermitLimit: 10, Window: time.Minute, SegmentsPerWindow: 2}, nil)
		md := acquire(f, g, 4).lease(t)
		assert.True(t, md.HasRemaining)
		assert.EqualValues(t, 6, md.Remaining)
		assert.Zero(t, md.ResetInNanos, "its permits come back segment by segment")
	})
	t.Run("token-bucket", func(t *testing.T) {
		f := newRuntime(t, pb.TokenBucketLimiterGrainType)
		g := newTokenBucket(f, limiter.TokenBucketOptions{TokenLimit: 10, TokensPerPeriod: 1, ReplenishmentPeriod: time.Second})
		md := acquire(f, g, 7).lease(t)
		assert.EqualValues(t, 3, md.Remaining)
		assert.Zero(t, md.ResetInNanos)
	})
	t.Run("concurrency", func(t *testing.T) {
		f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
		g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 3})
		md := acquire(f, g, 2).lease(t)
		assert.EqualValues(t, 1, md.Remaining)
		_, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: md.LeaseId})
		require.NoError(t, err)
		assert.EqualValues(t, 3, acquire(f, g, 0).lease(t).Remaining)
	})
	t.Run("attempt", func(t *testing.T) {
		f := newRuntime(t, pb.FixedWindowLimiterGrainType)
		g := newFixed(f, limiter.FixedWindowOptions{PermitLimit: 5, Window: time.Minute})
		out := turn(f, func() (*pb.LeaseMetadata, error) {
			return g.TryAcquire(context.Background(), &pb.FixedWindowAcquireRequest{Permits: 4})
		})
		md := out.lease(t)
		assert.EqualValues(t, 1, md.Remaining)
		assert.Equal(t, time.Minute, time.Duration(md.ResetInNanos))
	})
	t.Run("from-the-queue", func(t *testing.T) {
		f := newRuntime(t, pb.FixedWindowLimiterGrainType)
		g := newFixed(f, limiter.FixedWindowOptions{PermitLimit: 2, QueueLimit: 2, Window: time.Minute})
		acquire(f, g, 2).lease(t)
		f.budget = 2 * time.Minute
		waiting := acquire(f, g, 1).waiting(t)
		f.advance(time.Minute)
		md := waiting.lease(t)
		require.True(t, md.Acquired)
		assert.EqualValues(t, 1, md.Remaining, "what the new window has left after the waiter")
		assert.Equal(t, time.Minute, time.Duration(md.ResetInNanos))
	})
}
