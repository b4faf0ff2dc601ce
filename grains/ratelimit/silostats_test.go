package ratelimit_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/silo"
)

func TestSiloStatsCountAcquisitionsFromEveryEntry(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, k := range entries {
		h := ratelimit.FixedWindow(e.caller(k), "stats:"+k.String(), ratelimit.FixedWindowOptions{PermitLimit: 1, Window: 1 << 40, ManualReplenishment: true})
		granted, err := h.Acquire(ctx, 1)
		require.NoError(t, err)
		require.True(t, granted.Acquired())
		rejected, err := h.Acquire(ctx, 1)
		require.NoError(t, err)
		require.False(t, rejected.Acquired())
	}
	st, ok := ratelimit.SiloStats(e.silo)
	require.True(t, ok)
	assert.Equal(t, ratelimit.AcquisitionStats{Granted: 2, Rejected: 2}, st)

	pool := ratelimit.Concurrency(e.silo.Caller(), "stats:pool", ratelimit.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
	held, queued := holdAndQueue(t, pool)
	st, _ = ratelimit.SiloStats(e.silo)
	assert.Equal(t, uint64(1), st.Queued)
	assert.Equal(t, int64(1), st.Waiting, "the queue depth")
	require.NoError(t, held.Release(ctx))
	lease := <-queued
	require.True(t, lease.Acquired())
	require.NoError(t, lease.Release(ctx))
	st, _ = ratelimit.SiloStats(e.silo)
	assert.Equal(t, ratelimit.AcquisitionStats{Granted: 4, Rejected: 2, Queued: 1}, st)
}

func TestSiloStatsOfAnUnregisteredSilo(t *testing.T) {
	s, err := silo.New(silo.Options{DisableGateway: true}, silo.WithLogger(quiet))
	require.NoError(t, err)
	_, ok := ratelimit.SiloStats(s)
	assert.False(t, ok)
}
