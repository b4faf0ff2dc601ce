package persistence

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/storefault"
)

// CloseQueued takes the final snapshot in the owner's turn and leaves the
// write to the flusher's writers; a write that fails is tried again at the
// next period, from the snapshot it kept (the owner is gone), and the
// record closes once it is written.
func TestCloseQueuedRetriesAFailedFinalWriteAtTheNextPeriod(t *testing.T) {
	var faulty *storefault.Store[Key]
	fx := newFixture(t, func(s Store) Store { faulty = storefault.New[Key](s); return faulty })
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)
	faulty.FailNext(storefault.OpWrite, 1, errors.New("disk on fire"))

	var closed atomic.Int32
	o.do(t, func() {
		o.state = 7
		r.MarkDirty()
		require.NoError(t, r.CloseQueued(func() { closed.Add(1) }))
	})
	o.stop() // the owner is gone: the retry cannot ask it for a snapshot
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesFailed == 1 })
	n, keys := fx.f.Unwritten(10)
	assert.Equal(t, 1, n)
	assert.Equal(t, []Key{testKey}, keys)
	assert.Zero(t, closed.Load(), "not closed while the final write has not landed")

	fx.period()
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesSucceeded == 1 && s.Records == 0 })
	assert.Equal(t, "7", fx.stored(t, testKey))
	assert.EqualValues(t, 1, closed.Load(), "told once the final write landed")
	n, _ = fx.f.Unwritten(10)
	assert.Zero(t, n)
	require.NoError(t, fx.f.Stop(context.Background()))
}
