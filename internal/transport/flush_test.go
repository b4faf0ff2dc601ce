package transport

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Flush returns once what was queued has been handed to the socket, not
// before: a graceful close is Flush, then Close.
func TestFlushWaitsForQueuedFramesToBeWritten(t *testing.T) {
	gate := newGate()
	peer := newRecorder()
	a, _ := pipePair(t, Options{}, gate, newRecorder(), peer)
	require.NoError(t, a.Send(body("one")))
	gate.waitEntered(t) // the writer holds "one" mid-write
	require.NoError(t, a.Send(body("two")))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, a.Flush(ctx), context.Canceled, "frames are still queued")
	flushed := make(chan error, 1)
	go func() { flushed <- a.Flush(context.Background()) }()
	gate.release()
	require.NoError(t, <-flushed)
	st := a.Stats()
	assert.Equal(t, st.FramesQueued, st.FramesWritten, "every queued frame was written")
	assert.Equal(t, []byte("one"), peer.next(t))
	assert.Equal(t, []byte("two"), peer.next(t))
	require.NoError(t, a.Flush(context.Background()), "nothing queued: at once")
}

func TestFlushEndsWithItsContextOrTheConnection(t *testing.T) {
	gate := newGate()
	a, _ := pipePair(t, Options{}, gate, newRecorder(), newRecorder())
	require.NoError(t, a.Send(body("stuck")))
	gate.waitEntered(t)
	flushed := make(chan error, 1)
	go func() { flushed <- a.Flush(context.Background()) }()
	a.Close()
	assert.ErrorIs(t, <-flushed, ErrClosed)
	assert.ErrorIs(t, a.Flush(context.Background()), ErrClosed)
}
