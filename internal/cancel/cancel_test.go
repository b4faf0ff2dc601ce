package cancel

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCancelRegistry(t *testing.T) {
	now := time.Unix(100, 0)
	r := NewRegistry(func() time.Time { return now })

	t.Run("cancel reaches the running call", func(t *testing.T) {
		ctx, err := r.Register(1)
		require.NoError(t, err)
		require.NoError(t, ctx.Err())
		assert.True(t, r.Cancel(1))
		assert.ErrorIs(t, ctx.Err(), context.Canceled)
		r.Done(1)
	})

	t.Run("contexts are fresh per invocation", func(t *testing.T) {
		a, err := r.Register(2)
		require.NoError(t, err)
		r.Done(2)
		assert.Error(t, a.Err(), "done releases the context")
		b, err := r.Register(3)
		require.NoError(t, err)
		assert.NoError(t, b.Err(), "a new call never sees an old call's cancellation")
		assert.NotSame(t, a, b)
		r.Done(3)
	})

	t.Run("duplicate active id is an error", func(t *testing.T) {
		_, err := r.Register(4)
		require.NoError(t, err)
		_, err = r.Register(4)
		require.ErrorIs(t, err, ErrDuplicateCall)
		r.Done(4)
		_, err = r.Register(4)
		require.NoError(t, err, "an id may be registered again once done")
		r.Done(4)
	})

	t.Run("early cancel is honoured", func(t *testing.T) {
		assert.False(t, r.Cancel(10))
		ctx, err := r.Register(10)
		require.NoError(t, err)
		assert.ErrorIs(t, ctx.Err(), context.Canceled)
		r.Done(10)
		assert.Zero(t, r.Stats().Early, "the early cancel was consumed")
	})

	t.Run("late cancel reaches no later call", func(t *testing.T) {
		_, err := r.Register(20)
		require.NoError(t, err)
		r.Done(20)
		assert.False(t, r.Cancel(20))
		ctx, err := r.Register(21)
		require.NoError(t, err)
		assert.NoError(t, ctx.Err())
		r.Done(21)
	})

	st := r.Stats()
	assert.Zero(t, st.Active)
}

func TestCancelRegistryBoundsEarlyCancels(t *testing.T) {
	now := time.Unix(100, 0)
	r := NewRegistry(func() time.Time { return now })
	r.max = 4
	for id := uint64(1); id <= 10; id++ {
		r.Cancel(id)
	}
	assert.Equal(t, 4, r.Stats().Early, "never more than the bound")
	now = now.Add(2 * DefaultEarlyCancelTTL)
	r.Cancel(100)
	assert.Equal(t, 1, r.Stats().Early, "expired entries are dropped")
}

// BenchmarkCancelRegistryInFlight registers and finishes calls as a busy
// connection does: ids counting up, 16 calls in flight.
func BenchmarkCancelRegistryInFlight(b *testing.B) {
	r := NewRegistry(nil)
	const inFlight = 16
	for id := uint64(1); id <= inFlight; id++ {
		if _, err := r.Register(id); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range uint64(b.N) {
		id := i + 1
		r.Done(id)
		if _, err := r.Register(id + inFlight); err != nil {
			b.Fatal(err)
		}
	}
}

// A cancel for an unknown id costs constant work however many came before:
// each remembered cancel is looked at once more, when it is forgotten,
// and the registry stays within its bound.
func TestUnknownCancelsCostConstantWork(t *testing.T) {
	now := time.Unix(100, 0)
	r := NewRegistry(func() time.Time { return now })
	const cancels = 50_000
	for i := range uint64(cancels) {
		r.Cancel(1_000_000 + i)
		if i%1000 == 0 {
			now = now.Add(time.Millisecond) // well within the ttl: nothing expires on its own
		}
	}
	r.mu.Lock()
	steps, remembered, queued := r.mu.steps, len(r.mu.early), len(r.mu.order)-r.mu.orderHead
	r.mu.Unlock()
	assert.LessOrEqual(t, steps, int64(cancels), "each cancel forgot at most one older one, on average")
	assert.Equal(t, DefaultMaxEarlyCancels, remembered, "bounded")
	assert.Equal(t, DefaultMaxEarlyCancels, queued)
	assert.EqualValues(t, cancels, r.Stats().EarlyCancels)

	// The newest are the ones kept: a request whose cancel came last is
	// still cancelled on arrival, one whose cancel came first is not.
	ctx, err := r.Register(1_000_000 + cancels - 1)
	require.NoError(t, err)
	assert.ErrorIs(t, ctx.Err(), context.Canceled)
	ctx, err = r.Register(1_000_000)
	require.NoError(t, err)
	assert.NoError(t, ctx.Err())

	// Once their time is up, remembered cancels go as new ones arrive.
	now = now.Add(DefaultEarlyCancelTTL)
	r.Cancel(1)
	r.mu.Lock()
	remembered = len(r.mu.early)
	r.mu.Unlock()
	assert.Equal(t, 1, remembered, "every expired cancel was forgotten")
}
