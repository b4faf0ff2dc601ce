package host

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/persistence"
)

// While its host stops, an activation hands its final write to the
// flusher's writers. Its registration must outlive that write: once the
// directory forgets it, the grain's next activation, on another silo,
// loads the state, and a write still on its way lands after that load.
// The new activation then fails its first write on the changed ETag and
// deactivates, and the changes it acknowledged meanwhile are lost (the
// churn test's counter/churn-48).
func TestAStoppingHostUnregistersOnlyOnceTheFinalWriteLanded(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	store := newBlockingStore()
	fl, err := persistence.NewFlusher(store, persistence.FlusherOptions{}, persistence.WithClock(clk), persistence.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	require.NoError(t, fl.Start(context.Background()))
	var activated, deactivated, invoked atomic.Int64
	kind := &Kind{Type: testType, Dispatcher: testDispatcher{}, New: func(id actor.GrainID) any {
		return &testGrain{id: id, activated: &activated, deactivated: &deactivated, invoked: &invoked, clock: clk}
	}}
	dir := &scriptedDirectory{}
	h, err := NewHost(HostOptions{}, []*Kind{kind}, WithClock(clk), WithStateStore(flusherStore{fl}), WithDirectory(dir), WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	require.NoError(t, h.Start(context.Background()))
	t.Cleanup(func() {
		store.unblock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, h.Stop(ctx))
		_ = fl.Stop(ctx)
	})

	payload, err := proto.Marshal(wrapperspb.Int64(1))
	require.NoError(t, err)
	replies := make(chanReplier, 1)
	id := actor.GrainID{Type: testType, Key: "g"}
	h.Deliver(&Request{Target: id, MethodID: mAdd, Payload: payload, Reply: replies})
	require.NoError(t, (<-replies).err)

	require.NoError(t, h.Stop(context.Background()))
	require.Eventually(t, func() bool { return store.waiting.Load() == 1 }, testWait, testPoll, "the final write is on its way")
	dir.mu.Lock()
	unregistered := append([]actor.GrainID(nil), dir.unregistered...)
	dir.mu.Unlock()
	assert.Empty(t, unregistered, "unregistered while its final write has not landed")
	assert.Equal(t, []actor.GrainID{id}, h.Registered(), "a rebuild still finds the grain here while its write is on its way")

	store.unblock()
	require.Eventually(t, func() bool {
		dir.mu.Lock()
		defer dir.mu.Unlock()
		return len(dir.unregistered) == 1
	}, testWait, testPoll, "unregistered once the write landed")
	assert.Empty(t, h.Registered())
}
