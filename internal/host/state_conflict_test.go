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

// A silo the cluster took for dead still runs its activation while the
// grain is activated again elsewhere, from the state stored before. The
// new activation's load fences the old one: the survivor's next write
// (an add it acknowledged) fails and it deactivates, so the store goes on
// from what the new activation loaded, and the new one's own writes land.
// Without the fence the survivor's write would land under the new
// activation, which would serve the older state and lose its own changes
// at its first write.
func TestANewActivationFencesTheWritesOfOneStillRunningElsewhere(t *testing.T) {
	// Each silo has a clock of its own, so that the survivor's write is
	// tried before the new activation's.
	clk, successorClock := clock.NewFake(time.Unix(1_000_000, 0)), clock.NewFake(time.Unix(1_000_000, 0))
	mem := persistence.NewMemoryStore()
	var activated, deactivated, invoked atomic.Int64
	var failOnce atomic.Bool
	kind := &Kind{Type: testType, Dispatcher: testDispatcher{}, New: func(id actor.GrainID) any {
		return &testGrain{id: id, activated: &activated, deactivated: &deactivated, invoked: &invoked, failOnce: &failOnce, clock: clk}
	}}
	survivor, survivorFlusher := startFlusherHost(t, clk, mem, kind)
	successor, successorFlusher := startFlusherHost(t, successorClock, mem, kind)

	id := actor.GrainID{Type: testType, Key: "a"}
	key := persistence.Key{GrainType: testType, GrainKey: "a", Name: "state"}
	add := func(h *Host, v int64) int64 {
		payload, err := proto.Marshal(wrapperspb.Int64(v))
		require.NoError(t, err)
		rc := make(chanReplier, 1)
		h.Deliver(&Request{Target: id, MethodID: mAdd, Payload: payload, Reply: rc})
		r := <-rc
		require.NoError(t, r.err)
		return r.reply.(*wrapperspb.Int64Value).Value
	}
	stored := func() int64 {
		data, _, err := mem.Read(context.Background(), key)
		require.NoError(t, err)
		var v wrapperspb.Int64Value
		require.NoError(t, proto.Unmarshal(data, &v))
		return v.Value
	}

	add(survivor, 4)
	clk.Advance(persistence.DefaultPeriod)
	require.Eventually(t, func() bool { return survivorFlusher.Stats().WritesSucceeded == 1 }, 5*time.Second, time.Millisecond)

	// The grain is activated again on another silo, from the stored 4, while
	// the survivor acknowledges one more add that it has not written yet.
	assert.EqualValues(t, 5, add(survivor, 1))
	assert.EqualValues(t, 5, add(successor, 1), "the new activation starts from the stored state")

	clk.Advance(persistence.DefaultPeriod)
	require.Eventually(t, func() bool { return !survivor.IsActive(id) }, 5*time.Second, time.Millisecond,
		"the survivor's write conflicts and it deactivates")
	assert.Positive(t, survivorFlusher.Stats().WritesFailed)
	assert.EqualValues(t, 4, stored(), "the survivor's write did not land")
	successorClock.Advance(persistence.DefaultPeriod)
	require.Eventually(t, func() bool { return successorFlusher.Stats().WritesSucceeded == 1 }, 5*time.Second, time.Millisecond,
		"the new activation's write lands")
	assert.EqualValues(t, 5, stored(), "the store holds what the new activation made of the state it loaded")
	assert.True(t, successor.IsActive(id))
	assert.Zero(t, successorFlusher.Stats().WritesFailed)
}
