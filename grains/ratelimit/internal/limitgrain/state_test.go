package limitgrain

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/grains/ratelimit/internal/contract"
	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
)

// reactivate snapshots g and starts a new grain of the same kind from the
// snapshot, after the clock moved by gap.
func reactivate[O comparable, P proto.Message, R acquireRequest[P]](t *testing.T, f *fakeRuntime, g *grain[O, P, R], alg *algorithm[O, P], defaults O, gap time.Duration) *grain[O, P, R] {
	t.Helper()
	data, err := g.SaveState()
	require.NoError(t, err)
	require.NoError(t, g.OnDeactivate(context.Background(), nil))
	f.advance(gap)
	f.timers = nil
	return startGrain[O, P, R](f, alg, defaults, data)
}

func TestConfigurationQuotaAndTotalsSurviveReactivation(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	defaults := limiter.FixedWindowOptions{PermitLimit: 10, Window: time.Second}
	g := newFixed(f, defaults)
	five := limiter.FixedWindowOptions{PermitLimit: 5, Window: time.Hour}
	require.NoError(t, turn(f, func() (*pb.ConfigureReply, error) {
		return g.Configure(context.Background(), contract.FixedWindowToWire(five))
	}).err)
	acquire(f, g, 2).lease(t)
	acquire(f, g, 4).lease(t) // rejected
	g = reactivate(t, f, g, fixedWindow, defaults, time.Minute)
	p, err := g.Configuration(context.Background(), &pb.ConfigurationRequest{})
	require.NoError(t, err)
	o, _ := contract.FixedWindowFromWire(p)
	assert.Equal(t, five, o)
	st := stats(t, g)
	assert.EqualValues(t, 3, st.AvailablePermits, "no extra permits from a reactivation")
	assert.EqualValues(t, 1, st.TotalSuccessfulLeases)
	assert.EqualValues(t, 1, st.TotalFailedLeases)
	assert.True(t, acquire(f, g, 3).lease(t).Acquired)
	assert.False(t, acquire(f, g, 1).lease(t).Acquired)
}

func TestFixedWindowGivesTheFullLimitBackOnceAWindowPassed(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	o := limiter.FixedWindowOptions{PermitLimit: 4, Window: time.Minute}
	g := newFixed(f, o)
	acquire(f, g, 4).lease(t)
	g = reactivate(t, f, g, fixedWindow, o, time.Minute)
	assert.EqualValues(t, 4, stats(t, g).AvailablePermits)

	manual := o
	manual.ManualReplenishment = true
	g = newFixed(f, manual)
	acquire(f, g, 4).lease(t)
	g = reactivate(t, f, g, fixedWindow, manual, time.Hour)
	assert.Zero(t, stats(t, g).AvailablePermits, "manual replenishment keeps the saved count")
}

func TestFixedWindowThatEndedWhileInactiveIsReplenishedByTheFirstTick(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	o := limiter.FixedWindowOptions{PermitLimit: 4, Window: time.Minute}
	g := newFixed(f, o)
	acquire(f, g, 4).lease(t)
	f.advance(50 * time.Second)
	g = reactivate(t, f, g, fixedWindow, o, 20*time.Second) // 70 s after the window began, 20 s after the snapshot
	assert.Zero(t, stats(t, g).AvailablePermits, "the saved count")
	assert.Equal(t, 1, f.pendingTimers(), "the missed tick is due")
	f.advance(0)
	assert.EqualValues(t, 4, stats(t, g).AvailablePermits)
}

func TestSlidingWindowKeepsItsSegments(t *testing.T) {
	f := newRuntime(t, pb.SlidingWindowLimiterGrainType)
	o := limiter.SlidingWindowOptions{PermitLimit: 4, Window: 4 * time.Second, SegmentsPerWindow: 4}
	g := startGrain[limiter.SlidingWindowOptions, *pb.SlidingWindowOptions, *pb.SlidingWindowAcquireRequest](f, slidingWindow, o, nil)
	acquire(f, g, 1).lease(t)
	f.advance(time.Second)
	acquire(f, g, 2).lease(t)
	g = reactivate(t, f, g, slidingWindow, o, 500*time.Millisecond)
	assert.EqualValues(t, 1, stats(t, g).AvailablePermits)
	f.advance(2500 * time.Millisecond) // the first permit's segment slides out
	assert.EqualValues(t, 2, stats(t, g).AvailablePermits)
	f.advance(time.Second)
	assert.EqualValues(t, 4, stats(t, g).AvailablePermits)
}

func TestRestoreRulesOfTheTimeBasedLimiters(t *testing.T) {
	updated := epoch
	saved := limiter.State{AvailablePermits: 3, TotalSuccessfulLeases: 7, TotalFailedLeases: 2, LastReplenishment: epoch.Add(-time.Second)}
	bucket := limiter.TokenBucketOptions{TokenLimit: 10, TokensPerPeriod: 2, ReplenishmentPeriod: time.Second}
	for _, tc := range []struct {
		name      string
		got       limiter.State
		available int64
		last      time.Time
	}{
		{"bucket adds whole periods", restoreTokenBucket(bucket, saved, updated, updated.Add(3500*time.Millisecond)), 9, updated.Add(3 * time.Second)},
		{"bucket caps at the limit", restoreTokenBucket(bucket, saved, updated, updated.Add(time.Hour)), 10, time.Time{}},
		{"bucket survives a huge outage", restoreTokenBucket(limiter.TokenBucketOptions{TokenLimit: math.MaxInt64, TokensPerPeriod: math.MaxInt64, ReplenishmentPeriod: time.Millisecond}, saved, updated, updated.Add(200*365*24*time.Hour)), math.MaxInt64, time.Time{}},
		{"bucket ignores a clock that went back", restoreTokenBucket(bucket, saved, updated, updated.Add(-time.Hour)), 3, saved.LastReplenishment},
		{"manual bucket keeps the count", restoreTokenBucket(limiter.TokenBucketOptions{TokenLimit: 10, TokensPerPeriod: 2, ReplenishmentPeriod: time.Second, ManualReplenishment: true}, saved, updated, updated.Add(time.Hour)), 3, saved.LastReplenishment},
		{"window clamps the count", restoreFixedWindow(limiter.FixedWindowOptions{PermitLimit: 2, Window: time.Minute}, saved, updated, updated.Add(time.Second)), 2, saved.LastReplenishment},
		{"window refills after a window", restoreFixedWindow(limiter.FixedWindowOptions{PermitLimit: 5, Window: time.Minute}, saved, updated, updated.Add(time.Minute)), 5, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.available, tc.got.AvailablePermits)
			assert.Equal(t, tc.last, tc.got.LastReplenishment)
			assert.EqualValues(t, 7, tc.got.TotalSuccessfulLeases, "totals carry over")
			assert.EqualValues(t, 2, tc.got.TotalFailedLeases)
		})
	}
}

func TestTokenBucketRefillsForTheTimeItWasInactive(t *testing.T) {
	f := newRuntime(t, pb.TokenBucketLimiterGrainType)
	o := limiter.TokenBucketOptions{TokenLimit: 10, TokensPerPeriod: 2, ReplenishmentPeriod: time.Second}
	g := startGrain[limiter.TokenBucketOptions, *pb.TokenBucketOptions, *pb.TokenBucketAcquireRequest](f, tokenBucket, o, nil)
	acquire(f, g, 7).lease(t)
	g = reactivate(t, f, g, tokenBucket, o, 3500*time.Millisecond)
	assert.EqualValues(t, 9, stats(t, g).AvailablePermits, "3 + 3 periods x 2")
	f.advance(500 * time.Millisecond)
	assert.EqualValues(t, 10, stats(t, g).AvailablePermits, "the schedule continues from the last period counted")
}

func TestConcurrencyLeasesAreTakenAgainUnderTheirIDs(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	o := limiter.ConcurrencyOptions{PermitLimit: 5}
	g := newConcurrency(f, o)
	a := acquire(f, g, 2).lease(t)
	b := acquire(f, g, 1).lease(t)
	g = reactivate(t, f, g, concurrency, o, time.Second) // within the leases' time to live
	st := stats(t, g)
	assert.EqualValues(t, 2, st.AvailablePermits)
	assert.EqualValues(t, 2, st.ActiveLeases)
	reply, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: a.LeaseId})
	require.NoError(t, err)
	assert.True(t, reply.Released)
	assert.EqualValues(t, 4, stats(t, g).AvailablePermits)
	next := acquire(f, g, 1).lease(t)
	assert.NotEqual(t, b.LeaseId, next.LeaseId, "new ids never collide with restored ones")
}

// Saved leases are taken again while they fit the limit, in the order of
// their ids, which are random: which of two leases that no longer fit
// together survives is not the test's business, only that one does, with
// its permits counted.
func TestRestoredConcurrencyLeasesBeyondASmallerLimitAreDropped(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 5})
	three := acquire(f, g, 3).lease(t)
	two := acquire(f, g, 2).lease(t)
	g = reactivate(t, f, g, concurrency, limiter.ConcurrencyOptions{PermitLimit: 4}, 0) // the silo's defaults changed
	st := stats(t, g)
	assert.EqualValues(t, 1, st.ActiveLeases)
	kept := int64(0)
	for permits, lease := range map[int64]*pb.LeaseMetadata{3: three, 2: two} {
		reply, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: lease.LeaseId})
		require.NoError(t, err)
		if reply.Released {
			kept += permits
		}
	}
	assert.Contains(t, []int64{2, 3}, kept, "one of the two leases was taken again")
	assert.EqualValues(t, 4-kept, st.AvailablePermits, "the limit less the kept lease's permits")
	assert.EqualValues(t, 4, stats(t, g).AvailablePermits, "all back once it is released")
}

func TestStoredOptionsThatNoLongerValidateFallBackToTheDefaults(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	bad, err := contract.ConcurrencyToWire(limiter.ConcurrencyOptions{PermitLimit: -1}).AppendGranaryWire(nil)
	require.NoError(t, err)
	state, err := (&pb.LimiterState{Configured: true, Options: bad, AvailablePermits: 1}).AppendGranaryWire(nil)
	require.NoError(t, err)
	g := startGrain[limiter.ConcurrencyOptions, *pb.ConcurrencyOptions, *pb.ConcurrencyAcquireRequest](f, concurrency, twoPermits, state)
	assert.Equal(t, twoPermits, configuration(t, g))
	assert.False(t, g.configured)
}

func TestCorruptStateFailsTheActivation(t *testing.T) {
	g := newGrain[limiter.ConcurrencyOptions, *pb.ConcurrencyOptions, *pb.ConcurrencyAcquireRequest](concurrency, twoPermits, nil)
	assert.Error(t, g.LoadState([]byte{0xff}))
}
