package cancel

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCancelRegistryCollidingIDs registers ids that share a ring slot, so
// all but the first sit in the overflow map, and checks that cancels,
// duplicates and Done reach exactly the call they name.
func TestCancelRegistryCollidingIDs(t *testing.T) {
	r := NewRegistry(nil)
	ids := []uint64{1, 1 + activeSlots, 1 + 2*activeSlots}
	ctxs := make([]context.Context, len(ids))
	for i, id := range ids {
		ctx, err := r.Register(id)
		require.NoError(t, err)
		ctxs[i] = ctx
	}
	assert.Equal(t, 3, r.Stats().Active)

	assert.True(t, r.Cancel(ids[1]), "an overflowed call is found")
	assert.NoError(t, ctxs[0].Err(), "the slot's holder is not cancelled")
	assert.ErrorIs(t, ctxs[1].Err(), context.Canceled)
	assert.NoError(t, ctxs[2].Err())

	r.Done(ids[0])
	assert.Equal(t, 2, r.Stats().Active)
	_, err := r.Register(ids[1])
	require.ErrorIs(t, err, ErrDuplicateCall, "still active in the overflow map though its slot is free")
	_, err = r.Register(ids[2])
	require.ErrorIs(t, err, ErrDuplicateCall)

	late, err := r.Register(1 + 3*activeSlots)
	require.NoError(t, err, "a new id takes the freed slot")
	assert.True(t, r.Cancel(ids[2]), "an overflowed call is found behind the slot's new holder")
	assert.NoError(t, late.Err())

	r.Done(ids[1])
	r.Done(ids[2])
	r.Done(1 + 3*activeSlots)
	st := r.Stats()
	assert.Zero(t, st.Active)
	assert.Zero(t, st.Early)
	assert.EqualValues(t, 2, st.Cancelled)
	assert.ErrorIs(t, late.Err(), context.Canceled, "done releases the context")
}

// TestCancelRegistryEdgeIDs: id 0 is what an empty ring slot looks like,
// and the largest id selects the last slot; neither may confuse the
// registry.
func TestCancelRegistryEdgeIDs(t *testing.T) {
	now := time.Unix(100, 0)
	r := NewRegistry(func() time.Time { return now })
	assert.False(t, r.Cancel(0), "nothing is registered under 0")
	assert.Equal(t, 1, r.Stats().Early, "so the cancel is remembered")
	ctx, err := r.Register(0)
	require.NoError(t, err)
	assert.ErrorIs(t, ctx.Err(), context.Canceled, "the early cancel for 0 is honoured")
	_, err = r.Register(0)
	require.ErrorIs(t, err, ErrDuplicateCall)
	assert.True(t, r.Cancel(0), "the call under 0 is found while active")
	r.Done(0)
	r.Done(0) // a second Done is a no-op
	assert.Zero(t, r.Stats().Active)

	top, err := r.Register(math.MaxUint64)
	require.NoError(t, err)
	other, err := r.Register(math.MaxUint64 - activeSlots)
	require.NoError(t, err)
	assert.True(t, r.Cancel(math.MaxUint64-activeSlots))
	assert.NoError(t, top.Err())
	assert.ErrorIs(t, other.Err(), context.Canceled)
	r.Done(math.MaxUint64)
	r.Done(math.MaxUint64 - activeSlots)
	assert.Zero(t, r.Stats().Active)
}

// TestCancelRegistryCancelAllKeepsCallsUntilDone: CancelAll cancels calls
// in the ring and in the overflow map alike, leaves them registered (a
// duplicate is still refused) until each one's Done, keeps early cancels,
// and cancels calls registered after it: their connection is gone.
func TestCancelRegistryCancelAllKeepsCallsUntilDone(t *testing.T) {
	r := NewRegistry(nil)
	ids := []uint64{3, 3 + activeSlots, 4, 7 + 5*activeSlots}
	ctxs := make([]context.Context, len(ids))
	for i, id := range ids {
		ctx, err := r.Register(id)
		require.NoError(t, err)
		ctxs[i] = ctx
	}
	assert.False(t, r.Cancel(1000))

	r.CancelAll()
	for i, ctx := range ctxs {
		assert.ErrorIs(t, ctx.Err(), context.Canceled, "call %d", ids[i])
	}
	st := r.Stats()
	assert.Equal(t, len(ids), st.Active, "cancelled calls stay registered until Done")
	assert.Equal(t, 1, st.Early)
	for _, id := range ids {
		_, err := r.Register(id)
		require.ErrorIs(t, err, ErrDuplicateCall, "id %d", id)
	}
	for _, id := range ids {
		r.Done(id)
	}
	assert.Zero(t, r.Stats().Active)
	ctx, err := r.Register(ids[1])
	require.NoError(t, err)
	assert.ErrorIs(t, ctx.Err(), context.Canceled, "a call registered after CancelAll starts cancelled")
	r.Done(ids[1])
}

// TestCancelRegistryConcurrentCollidingCalls runs callers whose ids collide
// in the ring next to cancels and CancelAll; under -race it checks the
// registry's locking, and at the end that every call was released.
func TestCancelRegistryConcurrentCollidingCalls(t *testing.T) {
	r := NewRegistry(nil)
	const workers, calls = 8, 300
	var wg sync.WaitGroup
	for w := range uint64(workers) {
		wg.Go(func() {
			for i := range uint64(calls) {
				id := 1 + (i*workers+w)*activeSlots/4 // a quarter of the ring: many collide
				ctx, err := r.Register(id)
				if !assert.NoError(t, err) {
					return
				}
				if i%3 == 0 {
					assert.True(t, r.Cancel(id))
					assert.ErrorIs(t, ctx.Err(), context.Canceled)
				}
				if i%50 == 0 {
					r.CancelAll()
					assert.ErrorIs(t, ctx.Err(), context.Canceled)
				}
				r.Done(id)
				assert.ErrorIs(t, ctx.Err(), context.Canceled)
			}
		})
	}
	wg.Wait()
	st := r.Stats()
	assert.Zero(t, st.Active)
	assert.EqualValues(t, workers*calls, st.Registered)
	assert.GreaterOrEqual(t, st.Cancelled, int64(workers*calls/3))
}
