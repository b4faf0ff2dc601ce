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

func newTokenBucket(f *fakeRuntime, o limiter.TokenBucketOptions) *tokenGrain {
	return startGrain[limiter.TokenBucketOptions, *pb.TokenBucketOptions, *pb.TokenBucketAcquireRequest](f, tokenBucket, o, nil)
}

var restBucket = limiter.TokenBucketOptions{TokenLimit: 4, TokensPerPeriod: 2, ReplenishmentPeriod: time.Second}

// A bucket that fills up again tells the host it may be collected soon,
// and on deactivation deletes its stored state, which a fresh limiter
// would not need.
func TestBucketBackAtFullAsksToBeCollectedAndDeletesItsState(t *testing.T) {
	f := newRuntime(t, pb.TokenBucketLimiterGrainType)
	g := newTokenBucket(f, restBucket)
	require.Positive(t, f.collectSoon, "a fresh bucket is at rest")
	asked := f.collectSoon
	require.True(t, acquire(f, g, 3).lease(t).Acquired)
	require.NoError(t, g.act.WriteState(context.Background()))
	require.NotNil(t, f.stored)
	f.advance(time.Second)
	assert.Equal(t, asked, f.collectSoon, "3 of 4 tokens: not yet")
	f.advance(time.Second)
	assert.Equal(t, asked+1, f.collectSoon, "full again")

	require.NoError(t, g.OnDeactivate(context.Background(), nil))
	assert.Equal(t, 1, f.clears)
	assert.Nil(t, f.stored, "the stored state is deleted")
}

// A bucket still refilling keeps its state: a fresh one would hand out
// tokens it has already given.
func TestBucketNotAtFullKeepsItsState(t *testing.T) {
	f := newRuntime(t, pb.TokenBucketLimiterGrainType)
	g := newTokenBucket(f, restBucket)
	require.True(t, acquire(f, g, 3).lease(t).Acquired)
	require.NoError(t, g.OnDeactivate(context.Background(), nil))
	assert.Zero(t, f.clears)
}

// Options set by Configure live only in the stored state, so a limiter
// configured so keeps it even at rest; options that came with an
// acquisition come again with the next one.
func TestConfiguredLimiterAtRestKeepsItsStateUnlessItsOptionsCameWithCalls(t *testing.T) {
	other := restBucket
	other.TokenLimit = 6
	for _, tc := range []struct {
		name      string
		configure func(*fakeRuntime, *tokenGrain) outcome
		clears    int
	}{
		{"Configure", func(f *fakeRuntime, g *tokenGrain) outcome {
			return turn(f, func() (*pb.ConfigureReply, error) {
				return g.Configure(context.Background(), contract.TokenBucketToWire(other))
			})
		}, 0},
		{"AcquireAndCheckConfiguration", func(f *fakeRuntime, g *tokenGrain) outcome {
			return turn(f, func() (*pb.LeaseMetadata, error) {
				return g.AcquireAndCheckConfiguration(context.Background(), &pb.TokenBucketAcquireRequest{Permits: 0, Options: contract.TokenBucketToWire(other)})
			})
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRuntime(t, pb.TokenBucketLimiterGrainType)
			g := newTokenBucket(f, restBucket)
			require.NoError(t, tc.configure(f, g).err)
			require.NoError(t, g.OnDeactivate(context.Background(), nil))
			assert.Equal(t, tc.clears, f.clears)
		})
	}
}

// The stored state of a time-based limiter lives as long as an empty
// limiter takes to fill up again, and a minute more; a concurrency
// limiter's and a manual one's for ever.
func TestStoredStateTimeToLiveIsTheRefillTime(t *testing.T) {
	f := newRuntime(t, pb.TokenBucketLimiterGrainType)
	newTokenBucket(f, restBucket)
	assert.Equal(t, 3*time.Second+stateTTLMargin, f.stateTTL, "4 tokens, 2 a second: full 3 periods after empty at the latest")

	f = newRuntime(t, pb.FixedWindowLimiterGrainType)
	newFixed(f, limiter.FixedWindowOptions{PermitLimit: 5, Window: time.Hour})
	assert.Equal(t, time.Hour+stateTTLMargin, f.stateTTL)

	f = newRuntime(t, pb.FixedWindowLimiterGrainType)
	newFixed(f, limiter.FixedWindowOptions{PermitLimit: 5, Window: time.Hour, ManualReplenishment: true})
	assert.Zero(t, f.stateTTL)

	f = newRuntime(t, pb.ConcurrencyLimiterGrainType)
	newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 2})
	assert.Zero(t, f.stateTTL)

	huge := limiter.TokenBucketOptions{TokenLimit: 1 << 62, TokensPerPeriod: 1, ReplenishmentPeriod: time.Hour}
	assert.Zero(t, tokenBucketRefill(huge), "a refill time that overflows is no time to live")
}
