package ratelimitapi_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi"
	apiv1 "github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1"
)

// A caller of a server that refuses changes may acquire and release its
// own concurrency leases, and no more: the id of its lease tells it
// nothing of the ids other callers hold, so it cannot release theirs
// (which would let it past the limit while they still run). Lease ids
// used to count up from a random start, so the neighbours of one's own
// lease were the others'.
func TestACallerCannotReleaseLeasesItDoesNotHoldByGuessingTheirIDs(t *testing.T) {
	configs := mustConfigs(t, ratelimit.Named("pool", ratelimit.ConcurrencyOptions{PermitLimit: 3}))
	e := newEnv(t, envConfig{configs: configs, options: ratelimitapi.Options{DisableChanges: true}})
	c := e.grpc()
	ctx := context.Background()
	acquire := func() uint64 {
		t.Helper()
		lease, err := c.Acquire(ctx, connect.NewRequest(&apiv1.AcquireRequest{Key: "pool", Config: "pool"}))
		require.NoError(t, err)
		require.True(t, lease.Msg.Acquired)
		return lease.Msg.LeaseId
	}
	before := acquire() // another caller's
	own := acquire()
	after := acquire() // another caller's, once more

	const span = 64
	for d := uint64(1); d <= span; d++ {
		for _, guess := range []uint64{own - d, own + d} {
			r, err := c.Release(ctx, connect.NewRequest(&apiv1.ReleaseRequest{Algorithm: apiv1.Algorithm_ALGORITHM_CONCURRENCY, Key: "pool", LeaseId: guess}))
			require.NoError(t, err)
			assert.False(t, r.Msg.Released, "lease %d, %d away from the caller's own", guess, int64(guess-own))
		}
	}
	st, err := c.Statistics(ctx, connect.NewRequest(&apiv1.StatisticsRequest{Algorithm: apiv1.Algorithm_ALGORITHM_CONCURRENCY, Key: "pool"}))
	require.NoError(t, err)
	assert.EqualValues(t, 3, st.Msg.ActiveLeases, "every lease is still held")
	for _, id := range []uint64{before, own, after} {
		r, err := c.Release(ctx, connect.NewRequest(&apiv1.ReleaseRequest{Algorithm: apiv1.Algorithm_ALGORITHM_CONCURRENCY, Key: "pool", LeaseId: id}))
		require.NoError(t, err)
		assert.True(t, r.Msg.Released, "its holder releases lease %d", id)
	}
}
