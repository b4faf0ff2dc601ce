package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/limiter"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

func TestBoundOptionsConfigureTheGrainAndWinOverPerCallOptions(t *testing.T) {
	e := newEnv(t)
	for _, k := range entries {
		t.Run(k.String(), func(t *testing.T) {
			ctx := context.Background()
			bound := fixedOptions(3, 0)
			h := ratelimit.FixedWindow(e.caller(k), "bound-"+k.String(), bound)
			got, ok := h.Bound()
			require.True(t, ok)
			assert.Equal(t, bound, got)
			before, err := h.Configuration(ctx)
			require.NoError(t, err)
			assert.EqualValues(t, ratelimit.DefaultPermitLimit, before.PermitLimit, "unconfigured: the silo's defaults")

			l, err := h.AcquireAndCheckConfiguration(ctx, 1, fixedOptions(50, 0))
			require.NoError(t, err)
			assert.True(t, l.Acquired())
			after, err := h.Configuration(ctx)
			require.NoError(t, err)
			assert.Equal(t, bound, after, "the bound options won")

			unbound := ratelimit.FixedWindow(e.caller(k), "bound-"+k.String())
			l, err = unbound.AcquireAndCheckConfiguration(ctx, 1, bound)
			require.NoError(t, err)
			assert.True(t, l.Acquired(), "the same options leave the quota alone")
			st, err := unbound.Statistics(ctx)
			require.NoError(t, err)
			assert.EqualValues(t, 1, st.AvailablePermits)
		})
	}
}

func TestInvalidOptionsAreRefusedBeforeTheCall(t *testing.T) {
	e := newEnv(t)
	before := e.calls.count("", "AcquireAndCheckConfiguration") + e.calls.count("", "Configure")
	bad := ratelimit.FixedWindowOptions{PermitLimit: 0, Window: time.Nanosecond}
	h := ratelimit.FixedWindow(e.silo.Caller(), "invalid", bad)
	_, err := h.Acquire(context.Background(), 1)
	var oe *limiter.OptionsError
	require.ErrorAs(t, err, &oe)
	assert.True(t, oe.Has("PermitLimit") && oe.Has("Window"))
	unbound := ratelimit.FixedWindow(e.silo.Caller(), "invalid")
	assert.ErrorIs(t, unbound.Configure(context.Background(), bad), limiter.ErrInvalidOptions)
	_, err = unbound.AcquireAndCheckConfiguration(context.Background(), 1, bad)
	assert.ErrorIs(t, err, limiter.ErrInvalidOptions)
	_, err = unbound.Acquire(context.Background(), -1)
	assert.ErrorIs(t, err, ratelimit.ErrNegativeCount)
	assert.Equal(t, before, e.calls.count("", "AcquireAndCheckConfiguration")+e.calls.count("", "Configure"), "nothing was sent")
}

func TestRejectedLeaseExplainsItself(t *testing.T) {
	e := newEnv(t, withFakeClock())
	ctx := context.Background()
	h := ratelimit.FixedWindow(e.caller(viaGateway), "explain", ratelimit.FixedWindowOptions{PermitLimit: 1, Window: time.Minute})
	ok, err := h.Acquire(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, "", ok.Reason())
	assert.NoError(t, ok.Err())
	e.clock.Advance(15 * time.Second)

	l, err := h.Acquire(ctx, 1)
	require.NoError(t, err)
	require.False(t, l.Acquired())
	assert.Equal(t, ratelimit.ReasonRateLimitExceeded, l.Reason())
	assert.Equal(t, 45*time.Second, l.RetryAfter(), "the time left in the window")
	assert.Zero(t, l.ID())
	assert.Equal(t, h.GrainID(), l.Owner())
	names := map[string]string{}
	for name, value := range l.Metadata() {
		names[name] = value
	}
	assert.Equal(t, map[string]string{ratelimit.MetadataRetryAfter: "45s"}, names)
	var exceeded *ratelimit.ExceededError
	require.ErrorAs(t, l.Err(), &exceeded)
	assert.Equal(t, ratelimit.ExceededError{Reason: ratelimit.ReasonRateLimitExceeded, RetryAfter: 45 * time.Second}, *exceeded)
	assert.ErrorIs(t, l.Err(), ratelimit.ErrLimitExceeded)
	assert.Contains(t, l.String(), "retry after 45s")
}

func TestConcurrencyQueueFullRejectionCarriesItsReason(t *testing.T) {
	e := newEnv(t)
	h := ratelimit.Concurrency(e.silo.Caller(), "full", ratelimit.ConcurrencyOptions{PermitLimit: 1})
	held, err := h.Acquire(context.Background(), 1)
	require.NoError(t, err)
	defer held.Release(context.Background())
	l, err := h.Acquire(context.Background(), 1)
	require.NoError(t, err)
	assert.Equal(t, ratelimit.ReasonQueueLimitReached, l.Reason())
	assert.Zero(t, l.RetryAfter())
}

func TestTheHoldersOwnDeadlineReturnsARejectedLease(t *testing.T) {
	e := newEnv(t, withFakeClock(), withResponseTimeout(time.Second))
	for _, k := range entries {
		t.Run(k.String(), func(t *testing.T) {
			h := ratelimit.Concurrency(e.caller(k), "own-deadline-"+k.String(), ratelimit.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
			held, got := holdAndQueue(t, h)
			defer held.Release(context.Background())
			e.clock.Advance(800 * time.Millisecond) // 80% of the response timeout
			l := <-got
			assert.False(t, l.Acquired())
			assert.Equal(t, ratelimit.ReasonLeaseNotAcquired, l.Reason())
			waitForWaiting(t, h, 0)
		})
	}
}

func TestCallerCancellationReturnsCanceledAndLeavesNothingQueued(t *testing.T) {
	e := newEnv(t)
	for _, alg := range algorithms {
		for _, k := range entries {
			t.Run(alg.name+"/"+k.String(), func(t *testing.T) {
				h := alg.holder(e.caller(k), "cancel-"+k.String(), 1, 1, true)
				held, err := h.Acquire(context.Background(), 1)
				require.NoError(t, err)
				ctx, cancel := context.WithCancel(context.Background())
				errs := make(chan error, 1)
				go func() {
					_, err := h.Acquire(ctx, 1)
					errs <- err
				}()
				waitForWaiting(t, h, 1)
				cancel()
				assert.ErrorIs(t, <-errs, context.Canceled)
				waitForWaiting(t, h, 0)
				require.NoError(t, held.Release(context.Background()))
				_, err = h.Acquire(ctx, 1)
				assert.ErrorIs(t, err, context.Canceled, "a cancelled context is refused before the call")
			})
		}
	}
}

func TestExpiredDeadlineNeitherAcquiresNorReconfigures(t *testing.T) {
	e := newEnv(t)
	h := ratelimit.Concurrency(e.silo.Caller(), "expired")
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	before := e.calls.count("", "Acquire") + e.calls.count("", "Configure")
	_, err := h.Acquire(ctx, 1)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Error(t, h.Configure(ctx, ratelimit.ConcurrencyOptions{PermitLimit: 3}))
	assert.Equal(t, before, e.calls.count("", "Acquire")+e.calls.count("", "Configure"), "nothing reached the grain")
	o, err := h.Configuration(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, ratelimit.DefaultPermitLimit, o.PermitLimit)
	st, err := h.Statistics(context.Background())
	require.NoError(t, err)
	assert.Zero(t, st.TotalSuccessfulLeases)
}

func TestNoAnswerWithinTheResponseTimeoutIsARejectedLease(t *testing.T) {
	block := make(chan struct{})
	blocking := silo.WithIncomingFilters(func(ctx context.Context, call *proxy.IncomingCall, next proxy.IncomingInvoker) (proto.Message, error) {
		if call.Method.Name == "Statistics" {
			<-block // holds the grain's turn
		}
		return next(ctx, call)
	})
	e := newEnv(t, withFakeClock(), withResponseTimeout(time.Second), withSiloOptions(blocking))
	c := e.client()
	h := ratelimit.FixedWindow(c, "slow")
	_, err := h.Acquire(context.Background(), 1)
	require.NoError(t, err)
	defer close(block)
	go func() { _, _ = h.Statistics(context.Background()) }()
	got := make(chan *ratelimit.Lease, 1)
	eventually(t, func() bool { return c.Stats().Pending == 1 })
	go func() {
		l, err := h.Acquire(context.Background(), 1)
		assert.NoError(t, err)
		got <- l
	}()
	eventually(t, func() bool { return c.Stats().Pending == 2 })
	// Past the response timeout, and the sweep of pending calls that
	// notices it (up to one sweep interval late).
	e.clock.Advance(time.Second + 50*time.Millisecond)
	l := <-got
	assert.False(t, l.Acquired())
	assert.Equal(t, ratelimit.ReasonTimeLimitExceeded, l.Reason())
	assert.True(t, l.ReleaseOptional())
}

func TestNamedConfigurations(t *testing.T) {
	e := newEnv(t)
	strict := ratelimit.FixedWindowOptions{PermitLimit: 1, Window: time.Hour}
	pool := ratelimit.ConcurrencyOptions{PermitLimit: 2}
	configs, err := ratelimit.NewConfigs(
		ratelimit.Named("Strict", strict),
		ratelimit.Named("pool", pool),
		ratelimit.Named("shared", strict),
		ratelimit.Named("SHARED", pool),
	)
	require.NoError(t, err)

	o, ok := ratelimit.Lookup[ratelimit.FixedWindowOptions](configs, "STRICT")
	assert.True(t, ok, "names compare case-insensitively")
	assert.Equal(t, strict, o)
	_, ok = ratelimit.Lookup[ratelimit.TokenBucketOptions](configs, "strict")
	assert.False(t, ok, "a name belongs to the algorithms it was registered for")

	l, err := configs.Limiter(e.silo.Caller(), "strict", "user-1")
	require.NoError(t, err)
	h, ok := l.(*ratelimit.Holder[ratelimit.FixedWindowOptions])
	require.True(t, ok, "%T", l)
	bound, _ := h.Bound()
	assert.Equal(t, strict, bound)
	first, err := l.AcquireAndConfigure(context.Background(), 1)
	require.NoError(t, err)
	assert.True(t, first.Acquired())
	second, err := l.Acquire(context.Background(), 1)
	require.NoError(t, err)
	assert.False(t, second.Acquired(), "the configuration's limit applies")

	_, err = configs.Limiter(e.silo.Caller(), "missing", "k")
	assert.ErrorIs(t, err, ratelimit.ErrConfigNotFound)
	_, err = configs.Limiter(e.silo.Caller(), "shared", "k")
	assert.ErrorIs(t, err, ratelimit.ErrAmbiguousConfig)
	p, err := ratelimit.ByName[ratelimit.ConcurrencyOptions](configs, e.silo.Caller(), "Shared", "k")
	require.NoError(t, err)
	bp, _ := p.Bound()
	assert.Equal(t, pool, bp)
	_, err = ratelimit.ByName[ratelimit.SlidingWindowOptions](configs, e.silo.Caller(), "shared", "k")
	assert.ErrorIs(t, err, ratelimit.ErrConfigNotFound)

	_, err = ratelimit.NewConfigs(
		ratelimit.Named(" ", strict),
		ratelimit.Named("bad", ratelimit.TokenBucketOptions{}),
		ratelimit.Named("twice", pool),
		ratelimit.Named("TWICE", pool),
	)
	require.ErrorIs(t, err, ratelimit.ErrInvalidConfig)
	var joined interface{ Unwrap() []error }
	require.True(t, errors.As(err, &joined))
	assert.Len(t, joined.Unwrap(), 3, "every problem is reported: %v", err)
}

func TestTryReplenishRunsManualReplenishment(t *testing.T) {
	e := newEnv(t, withFakeClock())
	ctx := context.Background()
	h := ratelimit.TokenBucket(e.silo.Caller(), "manual", tokenOptions(2, 0))
	l, err := h.Acquire(ctx, 2)
	require.NoError(t, err)
	require.True(t, l.Acquired())
	e.clock.Advance(time.Hour)
	done, err := h.TryReplenish(ctx)
	require.NoError(t, err)
	assert.True(t, done)
	st, err := h.Statistics(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.AvailablePermits, "one period's tokens")

	auto := ratelimit.TokenBucket(e.silo.Caller(), "auto")
	done, err = auto.TryReplenish(ctx)
	require.NoError(t, err)
	assert.False(t, done, "automatic replenishment ignores it")
	done, err = ratelimit.Concurrency(e.silo.Caller(), "none").TryReplenish(ctx)
	require.NoError(t, err)
	assert.False(t, done)
}

// waitForWaiting polls the grain until it holds n calls.
func waitForWaiting(t testing.TB, h ratelimit.Limiter, n int64) {
	t.Helper()
	eventually(t, func() bool {
		st, err := h.Statistics(context.Background())
		return err == nil && st.WaitingCalls == n
	}, "waiting for %d held calls", n)
}

func TestAHolderBuiltBeforeTheSiloStartsUsesTheSilosResponseTimeout(t *testing.T) {
	var h *ratelimit.Holder[ratelimit.ConcurrencyOptions]
	e := newEnv(t, withFakeClock(), withResponseTimeout(500*time.Millisecond), withGrains(func(s *silo.Silo) error {
		h = ratelimit.Concurrency(s.Caller(), "early", ratelimit.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
		return nil
	}))
	held, got := holdAndQueue(t, h)
	defer held.Release(context.Background())
	e.clock.Advance(399 * time.Millisecond)
	// A deadline that fell due has posted its expiry turn by now, ahead of
	// this call in the grain's mailbox.
	st, err := h.Statistics(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.WaitingCalls, "still waiting short of 80% of the silo's 500 ms response timeout")
	e.clock.Advance(time.Millisecond)
	assert.Equal(t, ratelimit.ReasonLeaseNotAcquired, (<-got).Reason())
}
