package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testType = "test.Grain"

// Methods of the test grain.
const (
	mAdd uint32 = iota + 1
	mGet
	mBlock         // waits until released or its context is cancelled
	mPanic         // panics
	mDefer         // defers; answered by a timer after the payload's milliseconds
	mBudget        // answers with the budget it saw, in nanoseconds (-1 if none)
	mLeave         // asks to be deactivated
	mDeferCC       // defers and answers "cancelled" from OnCancel
	mDeadline      // advances the fake clock by the payload's seconds, then answers with its deadline
	mDeferDeadline // defers, advances the clock, answers with the deadline
	mKeepCtx       // hands its ctx to the test through kept, then answers
	mRest          // says its state is at rest (CollectSoon)
)

type testGrain struct {
	id          actor.GrainID
	gc          *actor.Context
	n           int64
	activated   *atomic.Int64
	deactivated *atomic.Int64
	invoked     *atomic.Int64
	release     chan struct{}
	started     chan struct{}
	failOnce    *atomic.Bool
	clock       *clock.Fake
	kept        chan context.Context
	// onDeactivate, when set, runs first in OnDeactivate.
	onDeactivate func()
}

func (g *testGrain) OnActivate(ctx context.Context, gc *actor.Context) error {
	if g.failOnce != nil && g.failOnce.CompareAndSwap(true, false) {
		return errors.New("boom")
	}
	g.gc = gc
	g.activated.Add(1)
	return nil
}

func (g *testGrain) OnDeactivate(ctx context.Context, gc *actor.Context) error {
	if g.onDeactivate != nil {
		g.onDeactivate()
	}
	g.deactivated.Add(1)
	return nil
}

func (g *testGrain) LoadState(data []byte) error {
	v := &wrapperspb.Int64Value{}
	if err := proto.Unmarshal(data, v); err != nil {
		return err
	}
	g.n = v.Value
	return nil
}

func (g *testGrain) SaveState() ([]byte, error) {
	return proto.Marshal(wrapperspb.Int64(g.n))
}

type testDispatcher struct{}

func (testDispatcher) Dispatch(ctx context.Context, grain any, method uint32, payload []byte) (proto.Message, error) {
	g := grain.(*testGrain)
	g.invoked.Add(1)
	in := &wrapperspb.Int64Value{}
	if err := proto.Unmarshal(payload, in); err != nil {
		return nil, err
	}
	switch method {
	case mAdd:
		g.n += in.Value
		g.gc.MarkDirty()
		return wrapperspb.Int64(g.n), nil
	case mGet:
		return wrapperspb.Int64(g.n), nil
	case mBlock:
		if g.started != nil {
			g.started <- struct{}{}
		}
		select {
		case <-g.release:
			return wrapperspb.Int64(0), nil
		case <-ctx.Done():
			return wrapperspb.Int64(1), nil
		}
	case mPanic:
		panic("grain bug")
	case mDefer:
		d, err := g.gc.Defer()
		if err != nil {
			return nil, err
		}
		g.gc.AfterFunc(time.Duration(in.Value)*time.Millisecond, func() { d.Reply(wrapperspb.Int64(42), nil) })
		return nil, nil
	case mBudget:
		b, ok := actor.Budget(ctx)
		if !ok {
			return wrapperspb.Int64(-1), nil
		}
		return wrapperspb.Int64(int64(b)), nil
	case mRest:
		g.gc.CollectSoon()
		return wrapperspb.Int64(g.n), nil
	case mLeave:
		g.gc.DeactivateOnIdle()
		return wrapperspb.Int64(g.n), nil
	case mDeadline:
		g.clock.Advance(time.Duration(in.Value) * time.Second)
		d1, ok := actor.Deadline(ctx)
		if !ok {
			return wrapperspb.Int64(-1), nil
		}
		g.clock.Advance(7 * time.Second)
		if d2, _ := actor.Deadline(ctx); !d2.Equal(d1) {
			return nil, fmt.Errorf("deadline moved from %v to %v", d1, d2)
		}
		return wrapperspb.Int64(d1.UnixNano()), nil
	case mDeferDeadline:
		d, err := g.gc.Defer()
		if err != nil {
			return nil, err
		}
		g.clock.Advance(3 * time.Second)
		dd, ok := d.Deadline()
		if cd, budgeted := actor.Deadline(ctx); ok && budgeted && !cd.Equal(dd) {
			d.Reply(nil, fmt.Errorf("Deadline %v differs from the Deferred's %v", cd, dd))
		} else {
			d.Reply(wrapperspb.Int64(dd.UnixNano()), nil)
		}
		return nil, nil
	case mKeepCtx:
		g.kept <- ctx
		return wrapperspb.Int64(in.Value), nil
	case mDeferCC:
		d, err := g.gc.Defer()
		if err != nil {
			return nil, err
		}
		d.OnCancel(func() { d.Reply(wrapperspb.Int64(-2), nil) })
		return nil, nil
	}
	return nil, actor.ErrUnknownMethod
}

type result struct {
	reply proto.Message
	err   error
}

type chanReplier chan result

func (c chanReplier) Reply(_ *Request, reply proto.Message, err error) { c <- result{reply, err} }

// memStore is a minimal StateStore for these tests; package persistence
// has the real one.
type memStore struct {
	mu      sync.Mutex
	data    map[actor.GrainID][]byte
	writes  int
	onWrite func() // called under mu after each write, when set
}

type memRecord struct {
	s        *memStore
	id       actor.GrainID
	snapshot func() ([]byte, error)
	dirty    atomic.Bool
}

func (s *memStore) OpenState(_ context.Context, id actor.GrainID, _ func(func()) bool, snapshot func() ([]byte, error)) (StateRecord, []byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &memRecord{s: s, id: id, snapshot: snapshot}, s.data[id], nil
}

func (r *memRecord) MarkDirty() { r.dirty.Store(true) }
func (r *memRecord) Flush(context.Context) error {
	data, err := r.snapshot()
	if err != nil {
		return err
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.s.data[r.id] = data
	r.s.writes++
	if r.s.onWrite != nil {
		r.s.onWrite()
	}
	r.dirty.Store(false)
	return nil
}
func (r *memRecord) Clear(context.Context) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	delete(r.s.data, r.id)
	return nil
}
func (r *memRecord) Close(ctx context.Context) error {
	if r.dirty.Load() {
		return r.Flush(ctx)
	}
	return nil
}

type fixture struct {
	t           *testing.T
	host        *Host
	clock       *clock.Fake
	store       *memStore
	activated   atomic.Int64
	deactivated atomic.Int64
	invoked     atomic.Int64
	release     chan struct{}
	started     chan struct{}
	failOnce    atomic.Bool
	kept        chan context.Context
	extra       []HostOption // options for the hosts startHost starts
	dispatcher  Dispatcher   // the kinds' dispatcher; testDispatcher when nil
}

func newFixture(t *testing.T, opts HostOptions, extra ...HostOption) *fixture {
	t.Helper()
	return newFixtureOf(t, opts, nil, extra...)
}

// newFixtureOf is newFixture with grains run by dispatcher (nil:
// testDispatcher).
func newFixtureOf(t *testing.T, opts HostOptions, dispatcher Dispatcher, extra ...HostOption) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: clock.NewFake(time.Unix(1_000_000, 0)), store: &memStore{data: map[actor.GrainID][]byte{}},
		release: make(chan struct{}), started: make(chan struct{}, 16), kept: make(chan context.Context, 64), extra: extra,
		dispatcher: dispatcher}
	f.host = f.startHost(opts, testType)
	return f
}

// startHost starts a host with a test grain kind for each of types, sharing
// f's clock, store and counters, and stops it when the test ends.
func (f *fixture) startHost(opts HostOptions, types ...string) *Host {
	f.t.Helper()
	kinds := make([]*Kind, len(types))
	var dispatcher Dispatcher = testDispatcher{}
	if f.dispatcher != nil {
		dispatcher = f.dispatcher
	}
	for i, typ := range types {
		kinds[i] = &Kind{Type: typ, Dispatcher: dispatcher, New: func(id actor.GrainID) any {
			return &testGrain{id: id, activated: &f.activated, deactivated: &f.deactivated, invoked: &f.invoked,
				release: f.release, started: f.started, failOnce: &f.failOnce, clock: f.clock, kept: f.kept}
		}}
	}
	h, err := NewHost(opts, kinds, append([]HostOption{WithClock(f.clock), WithStateStore(f.store),
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, f.extra...)...)
	require.NoError(f.t, err)
	require.NoError(f.t, h.Start(context.Background()))
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(f.t, h.Stop(ctx))
	})
	return h
}

// waitLeft waits until the host holds no activation of key. IsActive
// turns false as soon as a deactivation begins, before OnDeactivate and
// the final flush have run and while the activation is still the grain's.
func (f *fixture) waitLeft(key string) {
	f.t.Helper()
	id := actor.GrainID{Type: testType, Key: key}
	require.Eventually(f.t, func() bool {
		f.host.mu.RLock()
		defer f.host.mu.RUnlock()
		return f.host.mu.acts.get(id) == nil
	}, testWait, testPoll, "%s leaves the host", id)
}

func (f *fixture) send(ctx context.Context, key string, method uint32, v int64, budget time.Duration) chanReplier {
	payload, err := proto.Marshal(wrapperspb.Int64(v))
	require.NoError(f.t, err)
	rc := make(chanReplier, 1)
	req := &Request{Target: actor.GrainID{Type: testType, Key: key}, MethodID: method, Payload: payload, Budget: budget, Reply: rc}
	if ctx.Done() != nil {
		req.Ctx = ctx
	}
	f.host.Deliver(req)
	return rc
}

// Waits of the tests in this package: how long a condition may take, and
// how often it is polled.
const (
	testWait = 10 * time.Second
	testPoll = time.Millisecond
)

func mustPayload(t *testing.T, v int64) []byte {
	t.Helper()
	payload, err := proto.Marshal(wrapperspb.Int64(v))
	require.NoError(t, err)
	return payload
}

func (f *fixture) call(key string, method uint32, v int64) (int64, error) {
	r := <-f.send(context.Background(), key, method, v, 0)
	if r.err != nil {
		return 0, r.err
	}
	return r.reply.(*wrapperspb.Int64Value).Value, nil
}

func TestActivatesOnFirstCallAndKeepsState(t *testing.T) {
	f := newFixture(t, HostOptions{})
	for i := 1; i <= 3; i++ {
		v, err := f.call("a", mAdd, 2)
		require.NoError(t, err)
		assert.EqualValues(t, 2*i, v)
	}
	assert.EqualValues(t, 1, f.activated.Load())
	assert.True(t, f.host.IsActive(actor.GrainID{Type: testType, Key: "a"}))
	v, err := f.call("b", mGet, 0)
	require.NoError(t, err)
	assert.Zero(t, v, "another key is another grain")
	assert.EqualValues(t, 2, f.host.Stats().Activations)
}

func TestIdleDeactivationFlushesAndReactivationRestores(t *testing.T) {
	f := newFixture(t, HostOptions{CollectionAge: 10 * time.Minute, CollectionQuantum: time.Minute})
	_, err := f.call("a", mAdd, 7)
	require.NoError(t, err)

	f.clock.Advance(9 * time.Minute)
	assert.True(t, f.host.IsActive(actor.GrainID{Type: testType, Key: "a"}), "not idle long enough")

	f.clock.Advance(2 * time.Minute)
	f.waitLeft("a")
	assert.EqualValues(t, 1, f.deactivated.Load())
	assert.Equal(t, 1, f.store.writeCount(), "deactivation flushed the dirty state")

	v, err := f.call("a", mGet, 0)
	require.NoError(t, err)
	assert.EqualValues(t, 7, v, "state came back from the store")
	assert.EqualValues(t, 2, f.activated.Load())
}

func TestDefaultCollectionAgeIsFifteenMinutes(t *testing.T) {
	f := newFixture(t, HostOptions{})
	_, err := f.call("a", mAdd, 1)
	require.NoError(t, err)
	f.clock.Advance(14 * time.Minute)
	assert.True(t, f.host.IsActive(actor.GrainID{Type: testType, Key: "a"}))
	f.clock.Advance(2 * time.Minute)
	require.Eventually(t, func() bool { return !f.host.IsActive(actor.GrainID{Type: testType, Key: "a"}) }, 5*time.Second, time.Millisecond)
}

func TestActivityKeepsGrainAlive(t *testing.T) {
	f := newFixture(t, HostOptions{CollectionAge: 2 * time.Minute, CollectionQuantum: time.Minute})
	for range 5 {
		_, err := f.call("a", mAdd, 1)
		require.NoError(t, err)
		f.clock.Advance(time.Minute)
	}
	assert.True(t, f.host.IsActive(actor.GrainID{Type: testType, Key: "a"}))
	assert.EqualValues(t, 0, f.deactivated.Load())
}

func TestExplicitDeactivation(t *testing.T) {
	f := newFixture(t, HostOptions{})
	_, err := f.call("a", mAdd, 3)
	require.NoError(t, err)
	_, err = f.call("a", mLeave, 0)
	require.NoError(t, err)
	f.waitLeft("a")
	v, err := f.call("a", mGet, 0)
	require.NoError(t, err)
	assert.EqualValues(t, 3, v)
	assert.EqualValues(t, 2, f.activated.Load())

	require.True(t, f.host.Deactivate(actor.GrainID{Type: testType, Key: "a"}))
	f.waitLeft("a")
	assert.False(t, f.host.Deactivate(actor.GrainID{Type: testType, Key: "a"}))
}

func TestPanicAnswersErrorAndReactivates(t *testing.T) {
	f := newFixture(t, HostOptions{})
	_, err := f.call("a", mAdd, 5)
	require.NoError(t, err)
	_, err = f.call("a", mPanic, 0)
	require.ErrorIs(t, err, actor.ErrPanic)
	assert.Contains(t, err.Error(), "grain bug")
	require.Eventually(t, func() bool { return f.deactivated.Load() == 1 }, 5*time.Second, time.Millisecond)

	v, err := f.call("a", mGet, 0)
	require.NoError(t, err)
	assert.EqualValues(t, 5, v, "state flushed on the way out survives the panic")
	assert.EqualValues(t, 2, f.activated.Load())
	v, err = f.call("other", mAdd, 1)
	require.NoError(t, err, "the host keeps serving")
	assert.EqualValues(t, 1, v)
	assert.EqualValues(t, 1, f.host.Stats().Panics)
}

func TestActivationFailureFailsCallAndNextCallRetries(t *testing.T) {
	f := newFixture(t, HostOptions{})
	f.failOnce.Store(true)
	_, err := f.call("a", mAdd, 1)
	require.ErrorIs(t, err, actor.ErrActivation)
	v, err := f.call("a", mAdd, 1)
	require.NoError(t, err)
	assert.EqualValues(t, 1, v)
	assert.EqualValues(t, 1, f.host.Stats().ActivationFailures)
}

func TestUnknownGrainType(t *testing.T) {
	f := newFixture(t, HostOptions{})
	rc := make(chanReplier, 1)
	f.host.Deliver(&Request{Target: actor.GrainID{Type: "nope", Key: "a"}, Reply: rc})
	r := <-rc
	require.ErrorIs(t, r.err, actor.ErrUnknownGrainType)
	assert.Zero(t, f.host.Stats().Active)
}

func TestUnknownMethod(t *testing.T) {
	f := newFixture(t, HostOptions{})
	_, err := f.call("a", 999, 0)
	require.ErrorIs(t, err, actor.ErrUnknownMethod)
}

func TestRunningMethodSeesCancellation(t *testing.T) {
	f := newFixture(t, HostOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	rc := f.send(ctx, "a", mBlock, 0, 0)
	<-f.started
	cancel()
	r := <-rc
	require.NoError(t, r.err)
	assert.EqualValues(t, 1, r.reply.(*wrapperspb.Int64Value).Value, "the method saw its context cancelled")
}

func TestQueuedRequestCancelledWithoutRunning(t *testing.T) {
	f := newFixture(t, HostOptions{})
	busy := f.send(context.Background(), "a", mBlock, 0, 0)
	<-f.started
	before := f.invoked.Load()

	ctx, cancel := context.WithCancel(context.Background())
	queued := f.send(ctx, "a", mAdd, 100, 0)
	cancel()
	f.release <- struct{}{}
	require.NoError(t, (<-busy).err)
	r := <-queued
	require.ErrorIs(t, r.err, context.Canceled)
	assert.Equal(t, before, f.invoked.Load(), "the cancelled request never ran")
	v, err := f.call("a", mGet, 0)
	require.NoError(t, err)
	assert.Zero(t, v)
	assert.EqualValues(t, 1, f.host.Stats().SkippedCancelled)
}

func TestBudgetReachesBoundedMethodOnly(t *testing.T) {
	f := newFixture(t, HostOptions{})
	r := <-f.send(context.Background(), "a", mBudget, 0, 1234*time.Millisecond)
	require.NoError(t, r.err)
	assert.EqualValues(t, 1234*time.Millisecond, r.reply.(*wrapperspb.Int64Value).Value)
	r = <-f.send(context.Background(), "a", mBudget, 0, 0)
	require.NoError(t, r.err)
	assert.EqualValues(t, -1, r.reply.(*wrapperspb.Int64Value).Value)
	assert.Zero(t, f.host.Stats().TimersArmed, "a budget alone arms nothing")
}

// The deadline is the budget measured from the first time the method asks
// for it; after that it does not move, and a method that only answers never
// fixes one.
func TestDeadlineIsFixedWhenFirstAskedFor(t *testing.T) {
	f := newFixture(t, HostOptions{})
	budget := 1500 * time.Millisecond
	start := f.clock.Now()
	r := <-f.send(context.Background(), "a", mDeadline, 0, budget)
	require.NoError(t, r.err)
	assert.Equal(t, start.Add(budget).UnixNano(), r.reply.(*wrapperspb.Int64Value).Value)

	start = f.clock.Now()
	r = <-f.send(context.Background(), "a", mDeadline, 2, budget)
	require.NoError(t, r.err)
	assert.Equal(t, start.Add(2*time.Second+budget).UnixNano(), r.reply.(*wrapperspb.Int64Value).Value,
		"asked 2 s into the method: the budget counts from there")

	r = <-f.send(context.Background(), "a", mDeadline, 0, 0)
	require.NoError(t, r.err)
	assert.EqualValues(t, -1, r.reply.(*wrapperspb.Int64Value).Value, "no budget, no deadline")

	start = f.clock.Now()
	r = <-f.send(context.Background(), "a", mDeferDeadline, 0, budget)
	require.NoError(t, r.err)
	assert.Equal(t, start.Add(budget).UnixNano(), r.reply.(*wrapperspb.Int64Value).Value,
		"Defer fixes the deadline; asking later in the turn gives the same")
}

func TestDeferredReplyFromTimer(t *testing.T) {
	f := newFixture(t, HostOptions{})
	rc := f.send(context.Background(), "a", mDefer, 1000, 0)
	require.Eventually(t, func() bool { return f.clock.Pending() >= 2 }, 5*time.Second, time.Millisecond)
	select {
	case <-rc:
		t.Fatal("answered before the timer fired")
	default:
	}
	// Other requests are served while the reply is deferred.
	v, err := f.call("a", mAdd, 1)
	require.NoError(t, err)
	assert.EqualValues(t, 1, v)

	f.clock.Advance(time.Second)
	r := <-rc
	require.NoError(t, r.err)
	assert.EqualValues(t, 42, r.reply.(*wrapperspb.Int64Value).Value)
	st := f.host.Stats()
	assert.EqualValues(t, 1, st.Deferred)
	assert.EqualValues(t, 1, st.TimersArmed)
}

func TestDeferredOnCancelRunsInTurn(t *testing.T) {
	f := newFixture(t, HostOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	rc := f.send(ctx, "a", mDeferCC, 0, 0)
	require.Eventually(t, func() bool { return f.host.Stats().Deferred == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	r := <-rc
	require.NoError(t, r.err)
	assert.EqualValues(t, -2, r.reply.(*wrapperspb.Int64Value).Value)
}

func TestDeactivationFailsPendingDeferredReplies(t *testing.T) {
	f := newFixture(t, HostOptions{})
	rc := f.send(context.Background(), "a", mDefer, 60_000, 0)
	require.Eventually(t, func() bool { return f.host.Stats().Deferred == 1 }, 5*time.Second, time.Millisecond)
	require.True(t, f.host.Deactivate(actor.GrainID{Type: testType, Key: "a"}))
	r := <-rc
	require.ErrorIs(t, r.err, actor.ErrDeactivated)
	f.waitLeft("a")
	f.clock.Advance(time.Minute) // the timer died with the activation
}

func TestIdleCollectionSparesGrainWithPendingReplies(t *testing.T) {
	f := newFixture(t, HostOptions{CollectionAge: 2 * time.Minute, CollectionQuantum: time.Minute})
	rc := f.send(context.Background(), "a", mDefer, int64(time.Hour/time.Millisecond), 0)
	require.Eventually(t, func() bool { return f.host.Stats().Deferred == 1 }, 5*time.Second, time.Millisecond)
	f.clock.Advance(5 * time.Minute)
	// Wait until the collector's deactivate messages have been processed.
	_, err := f.call("a", mGet, 0)
	require.NoError(t, err)
	assert.EqualValues(t, 0, f.deactivated.Load())
	f.clock.Advance(time.Hour)
	require.NoError(t, (<-rc).err)
}

func TestPeriodicTimer(t *testing.T) {
	f := newFixture(t, HostOptions{})
	_, err := f.call("a", mGet, 0)
	require.NoError(t, err)
	var ticks atomic.Int64
	done := make(chan *actor.Timer, 1)
	// Register from inside a turn, as grains do.
	f.host.mu.RLock()
	a := f.host.mu.acts.get(actor.GrainID{Type: testType, Key: "a"})
	f.host.mu.RUnlock()
	a.post(turnFunc(func() {
		done <- a.gc.RegisterTimer(time.Second, time.Second, func() { ticks.Add(1) })
	}))
	timer := <-done
	for i := 1; i <= 3; i++ {
		f.clock.Advance(time.Second)
		require.Eventually(t, func() bool { return ticks.Load() == int64(i) }, 5*time.Second, time.Millisecond)
		require.Eventually(t, func() bool { return f.clock.Pending() >= 2 }, 5*time.Second, time.Millisecond, "re-armed after the tick")
	}
	stopped := make(chan struct{})
	a.post(turnFunc(func() { timer.Stop(); close(stopped) }))
	<-stopped
	f.clock.Advance(10 * time.Second)
	_, err = f.call("a", mGet, 0)
	require.NoError(t, err)
	assert.EqualValues(t, 3, ticks.Load())
}

func TestStopDeactivatesEverythingAndRefusesNewCalls(t *testing.T) {
	f := newFixture(t, HostOptions{})
	for i := range 10 {
		_, err := f.call(fmt.Sprint(i), mAdd, int64(i))
		require.NoError(t, err)
	}
	require.NoError(t, f.host.Stop(context.Background()))
	assert.EqualValues(t, 10, f.deactivated.Load())
	assert.Equal(t, 10, f.store.writeCount(), "every dirty grain flushed on the way out")
	_, err := f.call("x", mGet, 0)
	require.ErrorIs(t, err, actor.ErrStopping)
	require.NoError(t, f.host.Stop(context.Background()), "stop is idempotent")
}

func TestDeferOutsideTurn(t *testing.T) {
	f := newFixture(t, HostOptions{})
	_, err := f.call("a", mGet, 0)
	require.NoError(t, err)
	f.host.mu.RLock()
	a := f.host.mu.acts.get(actor.GrainID{Type: testType, Key: "a"})
	f.host.mu.RUnlock()
	errc := make(chan error, 1)
	a.post(turnFunc(func() { _, err := a.gc.Defer(); errc <- err }))
	require.ErrorIs(t, <-errc, actor.ErrNotInTurn)
}

func TestHostOptionsValidate(t *testing.T) {
	o := HostOptions{CollectionAge: -1, CollectionQuantum: -1, ActivationTimeout: -1, DeactivationTimeout: -1}
	err := o.Validate()
	require.Error(t, err)
	for _, field := range []string{"CollectionAge", "CollectionQuantum", "ActivationTimeout", "DeactivationTimeout"} {
		assert.Contains(t, err.Error(), field)
	}
	_, err = NewHost(o, nil)
	require.Error(t, err)
	_, err = NewHost(HostOptions{}, []*Kind{{Type: "x"}})
	require.Error(t, err)
}

func (s *memStore) writeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// A deferred reply whose call has no budget still has a deadline: the
// caller's response timeout, or the host's MaxWait when it sent none, so
// that a grain that arms its expiry from it (a limiter's queue) answers.
func TestDeferredWithoutBudgetGetsTheTimeoutOrMaxWait(t *testing.T) {
	f := newFixture(t, HostOptions{MaxWait: 7 * time.Second})
	for _, tc := range []struct {
		timeout, want time.Duration
	}{{0, 7 * time.Second}, {4 * time.Second, 4 * time.Second}} {
		payload, err := proto.Marshal(wrapperspb.Int64(0))
		require.NoError(t, err)
		rc := make(chanReplier, 1)
		start := f.clock.Now()
		f.host.Deliver(&Request{Target: actor.GrainID{Type: testType, Key: "a"}, MethodID: mDeferDeadline, Payload: payload, Reply: rc, Timeout: tc.timeout})
		r := <-rc
		require.NoError(t, r.err)
		assert.Equal(t, start.Add(tc.want).UnixNano(), r.reply.(*wrapperspb.Int64Value).Value, "timeout %v", tc.timeout)
	}
}
