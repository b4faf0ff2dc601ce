package host

import (
	"context"
	"io"
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

// flusherStore adapts persistence's flusher to the host, as package silo
// does.
type flusherStore struct{ f *persistence.Flusher }

func (s flusherStore) OpenState(ctx context.Context, id actor.GrainID, schedule func(func()) bool, snapshot func() ([]byte, error)) (StateRecord, []byte, error) {
	rec, data, err := s.f.Open(ctx, persistence.Key{GrainType: id.Type, GrainKey: id.Key, Name: "state"}, schedule, snapshot)
	if err != nil {
		return nil, nil, err
	}
	return rec, data, nil
}

// startFlusherHost starts a host of kind whose state goes through a
// persistence.Flusher on store, as in a silo, and stops both at the end of
// the test.
func startFlusherHost(t *testing.T, clk clock.Clock, store persistence.Store, kind *Kind) (*Host, *persistence.Flusher) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	fl, err := persistence.NewFlusher(store, persistence.FlusherOptions{}, persistence.WithClock(clk), persistence.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, fl.Start(context.Background()))
	h, err := NewHost(HostOptions{}, []*Kind{kind}, WithClock(clk), WithStateStore(flusherStore{fl}), WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, h.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, h.Stop(ctx))
		_ = fl.Stop(ctx)
	})
	return h, fl
}

// An ETag conflict proves the activation's state stale: someone else wrote
// it since it was read. The flusher stops background writes of the record
// and tells the host, which deactivates the activation, so that the next
// call reloads the stored state instead of serving from the stale copy and
// never writing again.
func TestBackgroundConflictDeactivatesStaleActivation(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	mem := persistence.NewMemoryStore()
	var activated, deactivated, invoked atomic.Int64
	var failOnce atomic.Bool
	kind := &Kind{Type: testType, Dispatcher: testDispatcher{}, New: func(id actor.GrainID) any {
		return &testGrain{id: id, activated: &activated, deactivated: &deactivated, invoked: &invoked, failOnce: &failOnce, clock: clk}
	}}
	h, fl := startFlusherHost(t, clk, mem, kind)

	id := actor.GrainID{Type: testType, Key: "a"}
	key := persistence.Key{GrainType: testType, GrainKey: "a", Name: "state"}
	add := func(v int64) int64 {
		payload, err := proto.Marshal(wrapperspb.Int64(v))
		require.NoError(t, err)
		rc := make(chanReplier, 1)
		h.Deliver(&Request{Target: id, MethodID: mAdd, Payload: payload, Reply: rc})
		r := <-rc
		require.NoError(t, r.err)
		return r.reply.(*wrapperspb.Int64Value).Value
	}
	add(5)
	clk.Advance(persistence.DefaultPeriod)
	require.Eventually(t, func() bool { return fl.Stats().WritesSucceeded == 1 }, 5*time.Second, time.Millisecond)

	// Someone else (a second activation elsewhere, an operator) writes the
	// state: this activation's copy is now stale.
	_, etag, err := mem.Read(context.Background(), key)
	require.NoError(t, err)
	other, err := proto.Marshal(wrapperspb.Int64(100))
	require.NoError(t, err)
	_, err = mem.Write(context.Background(), key, other, etag)
	require.NoError(t, err)

	add(1)
	clk.Advance(persistence.DefaultPeriod)
	require.Eventually(t, func() bool { return deactivated.Load() == 1 && !h.IsActive(id) }, 5*time.Second, time.Millisecond,
		"an activation whose state write conflicted deactivates")
	assert.Positive(t, fl.Stats().WritesFailed, "the background write conflicted")
	assert.EqualValues(t, 101, add(1), "the next call reloaded the stored state")
	assert.EqualValues(t, 2, activated.Load())
}
