package host

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
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

// blockingStore is a memory store whose writes wait, honouring their
// context, until it is opened; it counts the writes waiting.
type blockingStore struct {
	*persistence.MemoryStore
	open     chan struct{}
	once     sync.Once
	waiting  atomic.Int64
	mostSeen atomic.Int64
}

func newBlockingStore() *blockingStore {
	return &blockingStore{MemoryStore: persistence.NewMemoryStore(), open: make(chan struct{})}
}

func (s *blockingStore) Write(ctx context.Context, key persistence.Key, data []byte, etag string) (string, error) {
	n := s.waiting.Add(1)
	for {
		most := s.mostSeen.Load()
		if n <= most || s.mostSeen.CompareAndSwap(most, n) {
			break
		}
	}
	defer s.waiting.Add(-1)
	select {
	case <-s.open:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return s.MemoryStore.Write(ctx, key, data, etag)
}

func (s *blockingStore) unblock() { s.once.Do(func() { close(s.open) }) }

// logBuffer is a buffer a logger and a test may share.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stopFixture is a host of many dirty activations whose state goes through
// a persistence.Flusher to a store whose writes block, as a silo's does.
type stopFixture struct {
	host        *Host
	flusher     *persistence.Flusher
	store       *blockingStore
	logs        *logBuffer
	clock       *clock.Fake
	deactivated atomic.Int64
}

func newStopFixture(t *testing.T, activations int, onDeactivate func()) *stopFixture {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	f := &stopFixture{store: newBlockingStore(), logs: &logBuffer{}, clock: clk}
	log := slog.New(slog.NewTextHandler(f.logs, nil))
	fl, err := persistence.NewFlusher(f.store, persistence.FlusherOptions{}, persistence.WithClock(clk), persistence.WithLogger(log))
	require.NoError(t, err)
	require.NoError(t, fl.Start(context.Background()))
	f.flusher = fl
	var activated, invoked atomic.Int64
	kind := &Kind{Type: testType, Dispatcher: testDispatcher{}, New: func(id actor.GrainID) any {
		return &testGrain{id: id, activated: &activated, deactivated: &f.deactivated, invoked: &invoked, clock: clk, onDeactivate: onDeactivate}
	}}
	h, err := NewHost(HostOptions{}, []*Kind{kind}, WithClock(clk), WithStateStore(flusherStore{fl}), WithLogger(log))
	require.NoError(t, err)
	require.NoError(t, h.Start(context.Background()))
	f.host = h
	t.Cleanup(func() {
		f.store.unblock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, h.Stop(ctx))
		_ = fl.Stop(ctx)
	})

	payload, err := proto.Marshal(wrapperspb.Int64(1))
	require.NoError(t, err)
	replies := make(chanReplier, activations)
	for i := range activations {
		h.Deliver(&Request{Target: actor.GrainID{Type: testType, Key: fmt.Sprint(i)}, MethodID: mAdd, Payload: payload, Reply: replies})
	}
	for range activations {
		require.NoError(t, (<-replies).err)
	}
	require.Equal(t, activations, h.Stats().Active)
	return f
}

// While the host stops, a deactivation hands its final state write to the
// flusher's writers instead of making it in its own turn: every activation
// leaves, and Stop returns, although the store answers no write; the
// writes wait in the flusher, at most its Writers at a time, and the
// flusher's stop, cut short, says how many states it could not write.
func TestStopDoesNotWaitForTheStoreAndTheFlusherCountsWhatIsUnwritten(t *testing.T) {
	const n = 3000
	f := newStopFixture(t, n, nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, f.host.Stop(ctx), "no deactivation waits for the store")
	assert.EqualValues(t, n, f.deactivated.Load())
	assert.Zero(t, f.host.Stats().Active)

	writers := int64(f.flusher.Options().Writers)
	require.Eventually(t, func() bool { return f.store.waiting.Load() == writers }, testWait, testPoll,
		"the final writes go out through the flusher's writers")
	assert.LessOrEqual(t, f.store.mostSeen.Load(), writers)
	unwritten, keys := f.flusher.Unwritten(10)
	assert.Equal(t, n, unwritten)
	assert.Len(t, keys, 10)

	cancel()
	err := f.flusher.Stop(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), fmt.Sprintf("%d grain states not written", n))
	assert.Contains(t, f.logs.String(), fmt.Sprintf("grain states not written\" count=%d", n))
}

// Once the store answers, the final writes queued during the stop all
// land: nothing was dropped on the way.
func TestStopQueuesEveryFinalWrite(t *testing.T) {
	const n = 2000
	f := newStopFixture(t, n, nil)
	require.NoError(t, f.host.Stop(context.Background()))
	f.store.unblock()
	require.NoError(t, f.flusher.Stop(context.Background()))
	for i := range n {
		data, _, err := f.store.Read(context.Background(), persistence.Key{GrainType: testType, GrainKey: fmt.Sprint(i), Name: "state"})
		require.NoError(t, err)
		v := &wrapperspb.Int64Value{}
		require.NoError(t, proto.Unmarshal(data, v))
		require.EqualValues(t, 1, v.Value, "grain %d", i)
	}
}

// Stop keeps at most stopWindow deactivations under way, and returns when
// its context ends, even while deactivations hang and most activations
// were never asked; the error counts the grains left. A later Stop goes
// on with them.
func TestStopReturnsByItsDeadlineWithDeactivationsHanging(t *testing.T) {
	const n = stopWindow + 500
	release := make(chan struct{})
	var entered atomic.Int64
	f := newStopFixture(t, n, func() {
		entered.Add(1)
		<-release
	})

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- f.host.Stop(ctx) }()
	require.Eventually(t, func() bool { return entered.Load() == stopWindow }, testWait, testPoll)
	assert.Equal(t, n, f.host.Stats().Active, "the host's lock is free while the stop waits")
	cancel()
	var err error
	require.Eventually(t, func() bool {
		select {
		case err = <-stopped:
			return true
		default:
			return false
		}
	}, testWait, testPoll, "Stop returns once its context ends")
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), fmt.Sprintf("%d grains did not deactivate in time", n))
	assert.EqualValues(t, stopWindow, entered.Load(), "no more deactivations than the window were asked for")

	close(release)
	f.store.unblock()
	require.NoError(t, f.host.Stop(context.Background()), "a later Stop finishes the job")
	assert.EqualValues(t, n, f.deactivated.Load())
}

// A stop whose context has already ended asks no activation to deactivate.
func TestStopWithAnEndedContextAsksNothing(t *testing.T) {
	const n = 100
	f := newStopFixture(t, n, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, f.host.Stop(ctx), context.Canceled)
	assert.Zero(t, f.deactivated.Load())
	assert.Equal(t, n, f.host.Stats().Active)
	f.store.unblock()
	require.NoError(t, f.host.Stop(context.Background()))
	assert.EqualValues(t, n, f.deactivated.Load())
}

// BenchmarkStop measures a stop of many activations whose state goes
// through a flusher to the memory store, per activation.
func BenchmarkStop(b *testing.B) {
	quiet := slog.New(slog.DiscardHandler)
	payload, err := proto.Marshal(wrapperspb.Int64(1))
	require.NoError(b, err)
	for b.Loop() {
		b.StopTimer()
		clk := clock.NewFake(time.Unix(1_000_000, 0))
		fl, err := persistence.NewFlusher(persistence.NewMemoryStore(), persistence.FlusherOptions{}, persistence.WithClock(clk), persistence.WithLogger(quiet))
		require.NoError(b, err)
		require.NoError(b, fl.Start(context.Background()))
		var activated, deactivated, invoked atomic.Int64
		kind := &Kind{Type: testType, Dispatcher: testDispatcher{}, New: func(id actor.GrainID) any {
			return &testGrain{id: id, activated: &activated, deactivated: &deactivated, invoked: &invoked, clock: clk}
		}}
		h, err := NewHost(HostOptions{}, []*Kind{kind}, WithClock(clk), WithStateStore(flusherStore{fl}), WithLogger(quiet))
		require.NoError(b, err)
		require.NoError(b, h.Start(context.Background()))
		const n = 20000
		replies := make(chanReplier, n)
		for i := range n {
			h.Deliver(&Request{Target: actor.GrainID{Type: testType, Key: fmt.Sprint(i)}, MethodID: mAdd, Payload: payload, Reply: replies})
		}
		for range n {
			require.NoError(b, (<-replies).err)
		}
		b.StartTimer()
		require.NoError(b, h.Stop(context.Background()))
		require.NoError(b, fl.Stop(context.Background()))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/20000, "ns/activation")
}

// A grain that says its state is at rest is collected at the collector's
// next pass that finds it untouched, long before the collection age; a
// call after it withdraws that.
func TestCollectSoonGrainIsCollectedAtTheNextQuietPass(t *testing.T) {
	f := newFixture(t, HostOptions{CollectionAge: time.Hour, CollectionQuantum: time.Minute})
	for _, key := range []string{"rest", "busy"} {
		_, err := f.call(key, mRest, 0)
		require.NoError(t, err)
	}
	_, err := f.call("busy", mGet, 0)
	require.NoError(t, err)
	f.clock.Advance(time.Minute) // both were touched since the last pass
	require.True(t, f.host.IsActive(actor.GrainID{Type: testType, Key: "rest"}))
	f.clock.Advance(time.Minute)
	f.waitLeft("rest")
	assert.True(t, f.host.IsActive(actor.GrainID{Type: testType, Key: "busy"}), "a call withdrew its CollectSoon")
}

// Idle collection asks in batches, at most stopWindow deactivations under
// way, as a stop does; a deactivation that hangs holds only its own slot.
func TestIdleCollectionKeepsAWindowOfDeactivations(t *testing.T) {
	const n = stopWindow + 200
	release := make(chan struct{})
	var entered atomic.Int64
	f := newStopFixture(t, n, func() {
		entered.Add(1)
		<-release
	})
	f.store.unblock()
	f.clock.Advance(DefaultCollectionQuantum) // the first pass turns the calls into times
	f.clock.Advance(DefaultCollectionAge)
	require.Eventually(t, func() bool { return entered.Load() == stopWindow }, testWait, testPoll)
	assert.Equal(t, n, f.host.Stats().Active)
	close(release)
	require.Eventually(t, func() bool { return f.host.Stats().Active == 0 }, testWait, testPoll, "the pass goes on as deactivations finish")
	assert.EqualValues(t, n, entered.Load())
}
