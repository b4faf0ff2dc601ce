package persistence

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/granary-go/granary/clock"
	"github.com/stretchr/testify/require"
)

const (
	waitFor   = 5 * time.Second
	pollEvery = time.Millisecond
)

// testOwner plays an activation: one goroutine runs its turns one at a time
// from an unbounded mailbox. Its fields below the mailbox are touched only
// inside turns, without locks, so the race detector catches a flusher that
// reads state outside a turn.
type testOwner struct {
	mu struct {
		sync.Mutex
		mailbox []func()
		gone    bool
	}
	wake chan struct{}
	done chan struct{}

	state       int
	snapshotErr error
	snapshots   int
}

func newTestOwner(t *testing.T) *testOwner {
	t.Helper()
	o := &testOwner{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go o.loop()
	t.Cleanup(o.stop)
	return o
}

func (o *testOwner) loop() {
	defer close(o.done)
	for {
		o.mu.Lock()
		if o.mu.gone {
			o.mu.Unlock()
			return
		}
		if len(o.mu.mailbox) == 0 {
			o.mu.Unlock()
			<-o.wake
			continue
		}
		fn := o.mu.mailbox[0]
		o.mu.mailbox = o.mu.mailbox[1:]
		o.mu.Unlock()
		fn()
	}
}

// schedule is the function handed to Flusher.Open.
func (o *testOwner) schedule(fn func()) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.gone {
		return false
	}
	o.mu.mailbox = append(o.mu.mailbox, fn)
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return true
}

// snapshot is the function handed to Flusher.Open.
func (o *testOwner) snapshot() ([]byte, error) {
	o.snapshots++
	if o.snapshotErr != nil {
		return nil, o.snapshotErr
	}
	return []byte(strconv.Itoa(o.state)), nil
}

// do runs fn as a turn and waits for it.
func (o *testOwner) do(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan struct{})
	require.True(t, o.schedule(func() { defer close(done); fn() }), "owner is gone")
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("turn did not run")
	}
}

// stop makes the owner gone: queued turns are dropped and schedule fails.
func (o *testOwner) stop() {
	o.mu.Lock()
	o.mu.gone = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	<-o.done
}

func (o *testOwner) open(t *testing.T, f *Flusher, key Key) *Record {
	t.Helper()
	r, _, err := f.Open(context.Background(), key, o.schedule, o.snapshot)
	require.NoError(t, err)
	return r
}

// logCapture is a slog handler that keeps records for assertions.
type logCapture struct {
	mu      sync.Mutex
	records []slog.Record
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *logCapture) WithGroup(string) slog.Handler            { return c }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.records = append(c.records, r.Clone())
	return nil
}

// count returns how many records at level mention key.
func (c *logCapture) count(level slog.Level, key Key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.records {
		if r.Level != level {
			continue
		}
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "key" && a.Value.String() == key.String() {
				n++
			}
			return true
		})
	}
	return n
}

type fixture struct {
	store *MemoryStore
	clock *clock.Fake
	logs  *logCapture
	f     *Flusher
}

// newFixture returns a started flusher on a fake clock, stopped at cleanup.
// wrap, if given, wraps the memory store.
func newFixture(t *testing.T, wrap func(Store) Store) *fixture {
	t.Helper()
	return newFixtureWith(t, FlusherOptions{}, wrap)
}

// newFixtureWith is newFixture with the flusher's options.
func newFixtureWith(t *testing.T, opts FlusherOptions, wrap func(Store) Store) *fixture {
	t.Helper()
	fx := &fixture{
		store: NewMemoryStore(),
		clock: clock.NewFake(time.Unix(1_700_000_000, 0)),
		logs:  &logCapture{},
	}
	var store Store = fx.store
	if wrap != nil {
		store = wrap(store)
	}
	f, err := NewFlusher(store, opts, WithClock(fx.clock), WithLogger(slog.New(fx.logs)))
	require.NoError(t, err)
	require.NoError(t, f.Start(context.Background()))
	t.Cleanup(func() { _ = f.Stop(context.Background()) })
	fx.f = f
	return fx
}

// period advances the fake clock by one flush period.
func (fx *fixture) period() { fx.clock.Advance(fx.f.Options().Period) }

func (fx *fixture) stored(t *testing.T, key Key) string {
	t.Helper()
	data, _, err := fx.store.Read(context.Background(), key)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(data)
}

func (fx *fixture) waitStats(t *testing.T, cond func(FlusherStats) bool) {
	t.Helper()
	require.Eventually(t, func() bool { return cond(fx.f.Stats()) }, waitFor, pollEvery, "stats: %+v", fx.f.Stats())
}

func keyN(i int) Key { return Key{GrainType: "counter", GrainKey: strconv.Itoa(i), Name: "state"} }

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err, s)
	return n
}
