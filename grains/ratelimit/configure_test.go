package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/proxy"
)

func TestConfigureWaitsBehindQueuedAcquisitionsThenResetsQuota(t *testing.T) {
	e := newEnv(t)
	for _, k := range entries {
		t.Run(k.String(), func(t *testing.T) {
			ctx := context.Background()
			h := ratelimit.Concurrency(e.caller(k), "configure-"+k.String())
			require.NoError(t, h.Configure(ctx, ratelimit.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1}))
			held, queued := holdAndQueue(t, h)
			configured := make(chan error, 1)
			go func() { configured <- h.Configure(ctx, ratelimit.ConcurrencyOptions{PermitLimit: 4}) }()
			waitForWaiting(t, h, 2)
			o, err := h.Configuration(ctx)
			require.NoError(t, err)
			assert.EqualValues(t, 1, o.PermitLimit, "the change waits")

			require.NoError(t, held.Release(ctx))
			l := <-queued
			assert.True(t, l.Acquired(), "the acquisition ahead of the change ran first")
			require.NoError(t, <-configured)
			o, err = h.Configuration(ctx)
			require.NoError(t, err)
			assert.EqualValues(t, 4, o.PermitLimit)
			st, err := h.Statistics(ctx)
			require.NoError(t, err)
			assert.EqualValues(t, 4, st.AvailablePermits, "a change resets quota and leases")
			assert.Zero(t, st.ActiveLeases)
			assert.Zero(t, st.TotalSuccessfulLeases, "and counters")
			require.NoError(t, l.Release(ctx), "releasing a forgotten lease is harmless")
			st, err = h.Statistics(ctx)
			require.NoError(t, err)
			assert.EqualValues(t, 4, st.AvailablePermits)
		})
	}
}

func TestConfigurationWaitsWithinItsBudget(t *testing.T) {
	e := newEnv(t, withFakeClock(), withResponseTimeout(time.Second))
	ctx := context.Background()
	// queueBehind holds the limiter's one permit, queues an acquisition
	// (budget 800 ms), lets the clock move by before, then asks for a
	// change.
	queueBehind := func(key string, before time.Duration) (*ratelimit.Lease, <-chan *ratelimit.Lease, chan error, *ratelimit.Holder[ratelimit.ConcurrencyOptions]) {
		h := ratelimit.Concurrency(e.caller(viaGateway), key, ratelimit.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
		held, queued := holdAndQueue(t, h)
		e.clock.Advance(before)
		configured := make(chan error, 1)
		go func() { configured <- h.Configure(ctx, ratelimit.ConcurrencyOptions{PermitLimit: 9}) }()
		waitForWaiting(t, h, 2)
		return held, queued, configured, h
	}

	t.Run("runs once the queue empties", func(t *testing.T) {
		held, queued, configured, h := queueBehind("in-budget", 400*time.Millisecond)
		defer held.Release(ctx)
		e.clock.Advance(400 * time.Millisecond) // the queued acquisition's budget runs out
		assert.False(t, (<-queued).Acquired())
		require.NoError(t, <-configured, "that emptied the queue within the change's budget")
		o, err := h.Configuration(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 9, o.PermitLimit)
	})
	t.Run("changes nothing when its budget runs out", func(t *testing.T) {
		held, queued, configured, h := queueBehind("out-of-budget", 0)
		defer held.Release(ctx)
		e.clock.Advance(800 * time.Millisecond) // both budgets end at once
		assert.ErrorIs(t, <-configured, proxy.ErrTimeout, "an expired budget does not reconfigure")
		assert.False(t, (<-queued).Acquired())
		o, err := h.Configuration(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 1, o.PermitLimit)
		st, err := h.Statistics(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 1, st.ActiveLeases, "nothing was reset")
		assert.Zero(t, st.WaitingCalls)
	})
}

func TestInvalidConfigurationChangesNothingOnTheGrain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, alg := range algorithms {
		t.Run(alg.name, func(t *testing.T) {
			h := alg.holder(e.silo.Caller(), "intact", 1, 0, true)
			l, err := h.Acquire(ctx, 1)
			require.NoError(t, err)
			require.True(t, l.Acquired())
			before, err := h.Statistics(ctx)
			require.NoError(t, err)
			// The grain validates too: a caller that skips the holder.
			_, err = h.Acquire(ctx, 2)
			assert.ErrorIs(t, err, ratelimit.ErrCountExceedsLimit)
			after, err := h.Statistics(ctx)
			require.NoError(t, err)
			assert.Equal(t, before, after)
			l, err = h.Acquire(ctx, 1)
			require.NoError(t, err)
			assert.False(t, l.Acquired(), "the quota is still spent")
			require.NoError(t, l.Release(ctx))
		})
	}
}

func TestResetKeepsOptionsAndDeleteStateReturnsToDefaults(t *testing.T) {
	e := newEnv(t, withDefaults(ratelimit.Defaults{TokenBucket: tokenOptions(3, 0)}))
	ctx := context.Background()
	h := ratelimit.TokenBucket(e.silo.Caller(), "reset")
	require.NoError(t, h.Configure(ctx, tokenOptions(5, 0)))
	assert.Equal(t, 1, e.records(), "a change is stored at once")
	l, err := h.Acquire(ctx, 5)
	require.NoError(t, err)
	require.True(t, l.Acquired())

	require.NoError(t, h.Reset(ctx))
	o, err := h.Configuration(ctx)
	require.NoError(t, err)
	assert.Equal(t, tokenOptions(5, 0), o)
	st, err := h.Statistics(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 5, st.AvailablePermits)

	require.NoError(t, h.DeleteState(ctx))
	assert.Zero(t, e.records(), "the stored state is gone")
	o, err = h.Configuration(ctx)
	require.NoError(t, err)
	assert.Equal(t, tokenOptions(3, 0), o, "the silo's defaults")
	e.deactivate(h.GrainID())
	o, err = h.Configuration(ctx)
	require.NoError(t, err)
	assert.Equal(t, tokenOptions(3, 0), o, "and they stay after reactivation")
}
