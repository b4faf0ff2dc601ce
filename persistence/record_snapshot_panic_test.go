package persistence

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// panicsOnce returns o's snapshot function, except that its first call
// panics, as a buggy SaveState does. It runs only inside o's turns.
func panicsOnce(o *testOwner) func() ([]byte, error) {
	panicNext := true
	return func() ([]byte, error) {
		if panicNext {
			panicNext = false
			panic("grain SaveState bug")
		}
		return o.snapshot()
	}
}

// The actor host contains a panic of a grain's SaveState (the snapshot
// function) and goes on: it then deactivates the grain, which closes the
// record. A snapshot that panicked inside Record.Flush must therefore not
// leave the record's single write slot taken (the final Close, and any
// later Flush, would wait on it until its context ends, and the state would
// never be written): the record is left dirty and usable, and the panic goes
// on to the owner.
func TestFlushWithPanickingSnapshotKeepsRecordUsable(t *testing.T) {
	fx := newFixture(t, nil)
	o := newTestOwner(t)
	snapshot := panicsOnce(o)
	r, _, err := fx.f.Open(context.Background(), testKey, o.schedule, snapshot)
	require.NoError(t, err)

	o.do(t, func() {
		o.state = 7
		r.MarkDirty()
		assert.PanicsWithValue(t, "grain SaveState bug", func() { _ = r.Flush(context.Background()) },
			"the panic goes on to the owner, whose host contains it")
	})
	assert.True(t, r.Dirty(), "nothing was written: the state must stay dirty")

	o.do(t, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = r.Close(ctx)
	})
	require.NoError(t, err, "Close waited for a write slot that the panicked Flush never gave back")
	assert.Equal(t, "7", fx.stored(t, testKey), "the final flush wrote the state")
}

// The same for the background snapshot turn: the host contains the panic of
// SaveState in a turn the flusher scheduled. The record must stay dirty and
// be retried on a later period, not be left marked as waiting for a
// snapshot for ever (collect would never ask for one again, and Stop's
// final flush would wait on it until its context ended).
func TestBackgroundSnapshotPanicIsRetried(t *testing.T) {
	fx := newFixture(t, nil)
	o := newTestOwner(t)
	snapshot := panicsOnce(o)
	var turns atomic.Int64 // snapshot turns run, panicking or not
	schedule := func(fn func()) bool {
		return o.schedule(func() {
			defer turns.Add(1)
			defer func() { _ = recover() }() // the host contains grain panics
			fn()
		})
	}
	r, _, err := fx.f.Open(context.Background(), testKey, schedule, snapshot)
	require.NoError(t, err)
	t.Cleanup(func() { // runs before the fixture's own Stop, which would wait for ever
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.NoError(t, fx.f.Stop(ctx), "Stop's final flush waited on the record")
	})

	o.do(t, func() { o.state = 3; r.MarkDirty() })
	fx.period() // the snapshot turn panics
	require.Eventually(t, func() bool { return turns.Load() == 1 }, time.Second, pollEvery, "the snapshot turn ran")
	o.do(t, func() { o.state = 4; r.MarkDirty() })
	fx.period() // the record is still dirty and listed: a new turn
	require.Eventually(t, func() bool { return fx.stored(t, testKey) == "4" }, time.Second, pollEvery,
		"the state was never written after one snapshot panicked; stored %q", fx.stored(t, testKey))
}
