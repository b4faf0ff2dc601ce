package ratelimit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
)

// Leased holders with a window that outlasts the test: their slices stay
// good for its whole run, so what the tests see does not depend on timing.
var hourWindow = ratelimit.FixedWindowOptions{PermitLimit: 100, Window: time.Hour}

// hotFromTheStart leases from a holder's first acquisition.
var hotFromTheStart = ratelimit.LeaseOptions{MinRate: 1}

func closeHolder[O ratelimit.Options](t *testing.T, h *ratelimit.Holder[O]) {
	t.Helper()
	t.Cleanup(func() { require.NoError(t, h.Close(context.Background())) })
}

func TestALeasedHolderAnswersAHotKeyFromItsSlice(t *testing.T) {
	e := newEnv(t)
	for _, k := range entries {
		t.Run(k.String(), func(t *testing.T) {
			ctx := context.Background()
			h := ratelimit.FixedWindow(e.caller(k), "leased-"+k.String(), hourWindow).Leased(hotFromTheStart)
			closeHolder(t, h)
			before := e.calls.count(pb.FixedWindowLimiterGrainType, "LeaseQuota")
			acquires := e.calls.count(pb.FixedWindowLimiterGrainType, "AcquireAndCheckConfiguration")
			for i := range 60 {
				l, err := h.Acquire(ctx, 1)
				require.NoError(t, err)
				require.True(t, l.Acquired(), "acquisition %d", i)
				require.True(t, l.ReleaseOptional())
				require.Zero(t, l.ID())
			}
			// Slices grow with the demand the holder sees: a few answered
			// them all.
			slices := e.calls.count(pb.FixedWindowLimiterGrainType, "LeaseQuota") - before
			require.Positive(t, slices)
			require.Less(t, slices, 15)
			require.Equal(t, acquires, e.calls.count(pb.FixedWindowLimiterGrainType, "AcquireAndCheckConfiguration"), "no acquisition was a call")
			got, err := h.Configuration(ctx)
			require.NoError(t, err)
			require.Equal(t, hourWindow, got, "the slice request installed the bound options")
		})
	}
}

func TestLeasedHoldersTogetherGrantTheLimitExactly(t *testing.T) {
	e := newEnv(t)
	caller := e.caller(viaSilo)
	ctx := context.Background()
	holders := make([]*ratelimit.Holder[ratelimit.FixedWindowOptions], 4)
	for i := range holders {
		holders[i] = ratelimit.FixedWindow(caller, "shared", hourWindow).Leased(hotFromTheStart)
		closeHolder(t, holders[i])
	}
	granted := make([]int, len(holders))
	var wg sync.WaitGroup
	for i, h := range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l, err := h.TryAcquire(ctx, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if !l.Acquired() {
					if l.RetryAfter() <= 0 || l.Reason() != ratelimit.ReasonRateLimitExceeded {
						t.Errorf("rejection %v carries no retry-after", l)
					}
					return
				}
				granted[i]++
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range granted {
		total += n
	}
	require.Equal(t, int(hourWindow.PermitLimit), total, "granted per holder: %v", granted)
	st, err := holders[0].Statistics(ctx)
	require.NoError(t, err)
	require.Zero(t, st.AvailablePermits)
}

func TestClosingALeasedHolderGivesBackWhatItDidNotUse(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	h := ratelimit.FixedWindow(e.caller(viaGateway), "give-back", hourWindow).Leased(hotFromTheStart)
	for range 10 {
		l, err := h.Acquire(ctx, 1)
		require.NoError(t, err)
		require.True(t, l.Acquired())
	}
	st, err := h.Statistics(ctx)
	require.NoError(t, err)
	require.LessOrEqual(t, st.AvailablePermits, hourWindow.PermitLimit-10, "what was used, and what the slice holds")
	require.NoError(t, h.Close(ctx))
	require.NoError(t, h.Close(ctx), "twice")
	st, err = h.Statistics(ctx)
	require.NoError(t, err)
	require.Equal(t, hourWindow.PermitLimit-10, st.AvailablePermits)
	// A closed holder acquires per call.
	before := e.calls.count(pb.FixedWindowLimiterGrainType, "AcquireAndCheckConfiguration")
	l, err := h.Acquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, l.Acquired())
	require.Equal(t, before+1, e.calls.count(pb.FixedWindowLimiterGrainType, "AcquireAndCheckConfiguration"))
}

func TestAColdLeasedHolderAcquiresPerCall(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	h := ratelimit.FixedWindow(e.caller(viaSilo), "cold", hourWindow).Leased(ratelimit.LeaseOptions{MinRate: 1 << 40})
	closeHolder(t, h)
	for range 5 {
		l, err := h.Acquire(ctx, 1)
		require.NoError(t, err)
		require.True(t, l.Acquired())
		require.NotZero(t, l.ID(), "the grain's lease, not a local one")
	}
	require.Equal(t, 5, e.calls.count(pb.FixedWindowLimiterGrainType, "AcquireAndCheckConfiguration"))
	require.Zero(t, e.calls.count(pb.FixedWindowLimiterGrainType, "LeaseQuota"))
}

func TestALeasedHolderOfAQueueingLimiterLeavesWaitersExact(t *testing.T) {
	e := newEnv(t, withResponseTimeout(500*time.Millisecond)) // the waiter's budget runs out soon
	ctx := context.Background()
	o := ratelimit.FixedWindowOptions{PermitLimit: 1, QueueLimit: 1, Window: time.Hour}
	plain := ratelimit.FixedWindow(e.caller(viaSilo), "queued", o)
	_, queued := holdAndQueue(t, plain)
	h := ratelimit.FixedWindow(e.caller(viaSilo), "queued", o).Leased(hotFromTheStart)
	closeHolder(t, h)
	// The grain leases nothing while a waiter is queued: the attempt is
	// answered per call, as without leasing.
	l, err := h.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.False(t, l.Acquired())
	require.Equal(t, 1, e.calls.count(pb.FixedWindowLimiterGrainType, "LeaseQuota"))
	require.Equal(t, 1, e.calls.count(pb.FixedWindowLimiterGrainType, "TryAcquire"))
	select {
	case l := <-queued:
		require.False(t, l.Acquired(), "the waiter's budget ran out")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not answered")
	}
}

func TestALeasedConcurrencyHolderIsExact(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	h := ratelimit.Concurrency(e.caller(viaSilo), "leased-concurrency", ratelimit.ConcurrencyOptions{PermitLimit: 1}).Leased(hotFromTheStart)
	closeHolder(t, h)
	l, err := h.Acquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, l.Acquired())
	require.False(t, l.ReleaseOptional(), "a concurrency lease")
	second, err := h.TryAcquire(ctx, 1)
	require.NoError(t, err)
	require.False(t, second.Acquired())
	require.NoError(t, l.Release(ctx))
}

func TestANamedConfigurationLeases(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	configs, err := ratelimit.NewConfigs(ratelimit.Named("hot", hourWindow).Leased(hotFromTheStart))
	require.NoError(t, err)
	byName, err := ratelimit.ByName[ratelimit.FixedWindowOptions](configs, e.caller(viaSilo), "HOT", "named-1")
	require.NoError(t, err)
	closeHolder(t, byName)
	any, err := configs.Limiter(e.caller(viaSilo), "hot", "named-2")
	require.NoError(t, err)
	for _, l := range []ratelimit.Limiter{byName, any} {
		for range 20 {
			lease, err := l.Acquire(ctx, 1)
			require.NoError(t, err)
			require.True(t, lease.Acquired())
		}
	}
	require.NoError(t, any.(*ratelimit.Holder[ratelimit.FixedWindowOptions]).Close(ctx))
	require.GreaterOrEqual(t, e.calls.count(pb.FixedWindowLimiterGrainType, "LeaseQuota"), 2, "slices for both holders")
	require.Zero(t, e.calls.count(pb.FixedWindowLimiterGrainType, "AcquireAndCheckConfiguration"), "no acquisition was a call")
}

func TestForKeyOfALeasedHolderLeasesItsOwnKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	h := ratelimit.FixedWindow(e.caller(viaSilo), "for-key-a", hourWindow).Leased(hotFromTheStart)
	other := h.ForKey("for-key-b")
	for i, l := range []*ratelimit.Holder[ratelimit.FixedWindowOptions]{h, other} {
		for range 1 + 4*i {
			lease, err := l.Acquire(ctx, 1)
			require.NoError(t, err)
			require.True(t, lease.Acquired())
		}
		_, _, leased := ratelimit.LeasedStats(l)
		require.True(t, leased)
		require.NoError(t, l.Close(ctx))
	}
	for i, key := range []string{"for-key-a", "for-key-b"} {
		st, err := ratelimit.FixedWindow(e.caller(viaSilo), key).Statistics(ctx)
		require.NoError(t, err)
		require.Equal(t, hourWindow.PermitLimit-1-4*int64(i), st.AvailablePermits, fmt.Sprintf("%s: what its holder used", key))
	}
}
