package persistence

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/storefault"
)

// gateStore records every write attempt in order and can hold writes for
// one key until released.
type gateStore struct {
	Store
	hold    Key
	entered chan struct{} // receives once a held write has started
	release chan struct{}
	once    sync.Once

	mu struct {
		sync.Mutex
		log map[Key][]string
	}
}

func newGateStore(inner Store, hold Key) *gateStore {
	g := &gateStore{Store: inner, hold: hold, entered: make(chan struct{}, 16), release: make(chan struct{})}
	g.mu.log = make(map[Key][]string)
	return g
}

// newGatedFixture returns a fixture whose store holds writes for key.
func newGatedFixture(t *testing.T, hold Key) (*fixture, *gateStore) {
	return newGatedFixtureWith(t, hold, FlusherOptions{})
}

// newGatedFixtureWith is newGatedFixture with the flusher's options.
func newGatedFixtureWith(t *testing.T, hold Key, opts FlusherOptions) (*fixture, *gateStore) {
	var gate *gateStore
	fx := newFixtureWith(t, opts, func(s Store) Store { gate = newGateStore(s, hold); return gate })
	t.Cleanup(gate.open) // before the fixture's Stop, which would wait on it
	return fx, gate
}

// open lets held writes through, now and later.
func (g *gateStore) open() { g.once.Do(func() { close(g.release) }) }

// waitEntered waits until a held write has started.
func (g *gateStore) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(waitFor):
		t.Fatal("no held write started")
	}
}

func (g *gateStore) Write(ctx context.Context, key Key, data []byte, etag string) (string, error) {
	g.mu.Lock()
	g.mu.log[key] = append(g.mu.log[key], string(data))
	g.mu.Unlock()
	if key == g.hold {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.Store.Write(ctx, key, data, etag)
}

func (g *gateStore) writes(key Key) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.mu.log[key]...)
}

// TestRecordFlushWaitsForWriteInFlight checks that an on-demand Flush never
// overtakes a background write of the same record: the older snapshot lands
// first and the newer one overwrites it, with the etag chain intact.
func TestRecordFlushWaitsForWriteInFlight(t *testing.T) {
	fx, gate := newGatedFixture(t, testKey)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)

	o.do(t, func() { o.state = 1; r.MarkDirty() })
	fx.period()
	gate.waitEntered(t) // the background write of "1" is in flight

	flushed := make(chan error, 1)
	require.True(t, o.schedule(func() {
		o.state = 2
		r.MarkDirty()
		flushed <- r.Flush(context.Background())
	}))
	gate.open()
	require.NoError(t, <-flushed)

	assert.Equal(t, []string{"1", "2"}, gate.writes(testKey))
	assert.Equal(t, "2", fx.stored(t, testKey))
	// Both writes carried the right etag.
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesSucceeded == 2 && s.WritesFailed == 0 })
}

// TestRecordFlushSupersedesQueuedSnapshot checks that a snapshot queued for
// the writer but not yet written is dropped when the owner flushes a newer
// one, so the stale bytes never overwrite the new ones.
func TestRecordFlushSupersedesQueuedSnapshot(t *testing.T) {
	blocker := keyN(1)
	// With one writer, the blocker's write keeps testKey's snapshot queued:
	// more writers would write it beside the blocker's.
	fx, gate := newGatedFixtureWith(t, blocker, FlusherOptions{Writers: 1})
	// The blocker's owner runs turns inline, so its snapshot is queued while
	// the writer is still collecting, ahead of testKey's: the writer then
	// stalls in the blocker's write with testKey's snapshot queued behind.
	inline := func(fn func()) bool { fn(); return true }
	rBlock, _, err := fx.f.Open(context.Background(), blocker, inline, func() ([]byte, error) { return []byte("b"), nil })
	require.NoError(t, err)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)

	rBlock.MarkDirty()
	o.do(t, func() { o.state = 1; r.MarkDirty() })
	fx.period()
	gate.waitEntered(t)
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.mu.hasData
	}, waitFor, pollEvery)

	o.do(t, func() { o.state = 2; require.NoError(t, r.Flush(context.Background())) })
	gate.open()
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesSucceeded == 2 })
	o.do(t, func() { require.NoError(t, r.Close(context.Background())) })

	assert.Equal(t, []string{"2"}, gate.writes(testKey), "the superseded snapshot is never written")
	assert.Equal(t, "2", fx.stored(t, testKey))
}

// TestRecordCloseWaitsForWriteInFlight checks that Close returns only once a
// background write has landed, so a new activation reads the latest state.
func TestRecordCloseWaitsForWriteInFlight(t *testing.T) {
	fx, gate := newGatedFixture(t, testKey)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)

	o.do(t, func() { o.state = 1; r.MarkDirty() })
	fx.period()
	gate.waitEntered(t)

	closed := make(chan error, 1)
	require.True(t, o.schedule(func() { closed <- r.Close(context.Background()) }))
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a write was in flight", err)
	default:
	}
	gate.open()
	require.NoError(t, <-closed)
	assert.Equal(t, "1", fx.stored(t, testKey))
	assert.Equal(t, []string{"1"}, gate.writes(testKey), "the record was clean, so Close wrote nothing more")
}

// TestRecordFlushHonoursContextWhileWaiting checks that an owner waiting for
// a write in flight can give up.
func TestRecordFlushHonoursContextWhileWaiting(t *testing.T) {
	fx, gate := newGatedFixture(t, testKey)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)
	o.do(t, func() { o.state = 1; r.MarkDirty() })
	fx.period()
	gate.waitEntered(t)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o.do(t, func() {
		assert.ErrorIs(t, r.Flush(ctx), context.Canceled)
		assert.ErrorIs(t, r.Clear(ctx), context.Canceled)
	})
	gate.open()
	fx.waitStats(t, func(s FlusherStats) bool { return s.WritesSucceeded == 1 })
}

// TestFlusherStopRewritesStateChangedBehindQueuedSnapshot checks that Stop
// does not settle for a snapshot that was already queued when the state
// changed again: the final flush must write the latest state.
func TestFlusherStopRewritesStateChangedBehindQueuedSnapshot(t *testing.T) {
	blocker := keyN(1)
	fx, gate := newGatedFixtureWith(t, blocker, FlusherOptions{Writers: 1}) // one writer: testKey's snapshot waits behind the blocker's write
	inline := func(fn func()) bool { fn(); return true }
	rBlock, _, err := fx.f.Open(context.Background(), blocker, inline, func() ([]byte, error) { return []byte("b"), nil })
	require.NoError(t, err)
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)

	rBlock.MarkDirty()
	o.do(t, func() { o.state = 1; r.MarkDirty() })
	fx.period()
	gate.waitEntered(t)
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.mu.hasData // "1" is queued behind the stalled write
	}, waitFor, pollEvery)
	o.do(t, func() { o.state = 2; r.MarkDirty() })

	stopped := make(chan error, 1)
	go func() { stopped <- fx.f.Stop(context.Background()) }()
	gate.open()
	require.NoError(t, <-stopped)
	assert.Equal(t, "2", fx.stored(t, testKey))
	assert.False(t, r.Dirty())
}

// TestFlusherStopTriesAFailingRecordOnce checks that the final flush does
// not spin on a record whose write keeps failing.
func TestFlusherStopTriesAFailingRecordOnce(t *testing.T) {
	var faulty *storefault.Store[Key]
	fx := newFixture(t, func(s Store) Store { faulty = storefault.New[Key](s); return faulty })
	o := newTestOwner(t)
	r := o.open(t, fx.f, testKey)
	faulty.FailNext(storefault.OpWrite, 1000, errors.New("down"))
	o.do(t, func() { o.state = 1; r.MarkDirty() })
	require.Error(t, fx.f.Stop(context.Background()))
	assert.Equal(t, 1, faulty.Calls(storefault.OpWrite))
	assert.True(t, r.Dirty())
}
