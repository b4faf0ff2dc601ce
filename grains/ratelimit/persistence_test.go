package ratelimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/persistence"
)

func TestStateSurvivesDeactivationWithoutExtraPermits(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, alg := range algorithms {
		t.Run(alg.name, func(t *testing.T) {
			h := alg.holder(e.silo.Caller(), "survive", 4, 0, true)
			var held []*ratelimit.Lease
			for range 2 {
				l, err := h.Acquire(ctx, 1)
				require.NoError(t, err)
				require.True(t, l.Acquired())
				held = append(held, l)
			}
			before, err := h.Statistics(ctx)
			require.NoError(t, err)
			e.deactivate(h.GrainID())
			after, err := h.Statistics(ctx)
			require.NoError(t, err)
			assert.Equal(t, before, after, "permits, totals and leases restored")
			for range 2 {
				l, err := h.Acquire(ctx, 1)
				require.NoError(t, err)
				assert.True(t, l.Acquired())
			}
			l, err := h.Acquire(ctx, 1)
			require.NoError(t, err)
			assert.False(t, l.Acquired(), "no extra permits from a reactivation")
			if alg.releases {
				require.NoError(t, held[0].Release(ctx))
				st, err := h.Statistics(ctx)
				require.NoError(t, err)
				assert.EqualValues(t, 1, st.AvailablePermits, "a lease taken before the reactivation is released after it")
			}
		})
	}
}

func TestSnapshotsAreFlushedEveryPeriod(t *testing.T) {
	e := newEnv(t, withFakeClock())
	h := ratelimit.FixedWindow(e.silo.Caller(), "flushed")
	l, err := h.Acquire(context.Background(), 1)
	require.NoError(t, err)
	require.True(t, l.Acquired())
	assert.Zero(t, e.records(), "nothing is written on the acquisition's path")
	eventually(t, func() bool {
		e.clock.Advance(flushPeriod)
		return e.records() == 1
	}, "the flusher writes the dirty state")
}

// flushPeriod is the silo's default flush period.
const flushPeriod = 50 * time.Millisecond

func TestAFailingStoreLosesNoInMemoryStateAndCatchesUp(t *testing.T) {
	e := newEnv(t, withFakeClock())
	ctx := context.Background()
	h := ratelimit.Concurrency(e.silo.Caller(), "faulty")
	_, err := h.Statistics(ctx) // activate
	require.NoError(t, err)
	down := errors.New("store down")
	e.store.FailNext(persistence.OpWrite, 1000, down)
	require.NoError(t, h.Configure(ctx, ratelimit.ConcurrencyOptions{PermitLimit: 3}), "applied in memory; the write is retried")
	l, err := h.Acquire(ctx, 2)
	require.NoError(t, err)
	require.True(t, l.Acquired())
	writes := e.store.Calls(persistence.OpWrite)
	e.clock.Advance(flushPeriod)
	eventually(t, func() bool { return e.store.Calls(persistence.OpWrite) > writes }, "the flusher keeps trying")
	st, err := h.Statistics(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.AvailablePermits, "nothing lost in memory")
	assert.Zero(t, e.records())

	e.store.FailNext(persistence.OpWrite, 0, nil) // the store comes back
	eventually(t, func() bool {
		e.clock.Advance(flushPeriod)
		return e.records() == 1
	}, "the state catches up")
	e.deactivate(h.GrainID())
	o, err := h.Configuration(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 3, o.PermitLimit)
	st, err = h.Statistics(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.AvailablePermits)
	assert.EqualValues(t, 1, st.ActiveLeases)
	require.NoError(t, l.Release(ctx))
}

func TestAFailedDeleteChangesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	h := ratelimit.SlidingWindow(e.silo.Caller(), "delete", slidingOptions(3, 0))
	l, err := h.Acquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, l.Acquired())
	e.store.FailNext(persistence.OpDelete, 1, errors.New("store down"))
	require.Error(t, h.DeleteState(ctx))
	o, err := h.Configuration(ctx)
	require.NoError(t, err)
	assert.Equal(t, slidingOptions(3, 0), o)
	st, err := h.Statistics(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2, st.AvailablePermits)
}
