package host

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
)

// listedDispatcher is the test grain's dispatcher with a contract that
// lists its methods, as generated descriptors do.
type listedDispatcher struct{ testDispatcher }

var testMethodNames = map[uint32]string{
	mAdd: "Add", mGet: "Get", mBlock: "Block", mPanic: "Panic", mDefer: "Defer",
	mDeferCC: "DeferCC", mDeadline: "Deadline", mDeferDeadline: "DeferDeadline",
}

func (listedDispatcher) MethodIDs() []uint32 {
	return []uint32{mAdd, mGet, mBlock, mPanic, mDefer, mDeferCC, mDeadline, mDeferDeadline}
}

func (listedDispatcher) MethodName(id uint32) string { return testMethodNames[id] }

// callCounts returns the host's counters of testType by method name.
func callCounts(h *Host) map[string][NumOutcomes]uint64 {
	out := make(map[string][NumOutcomes]uint64)
	for _, mc := range h.Calls() {
		if mc.Type == testType {
			out[mc.Method] = mc.Calls
		}
	}
	return out
}

func TestCallsCountedByMethodAndOutcome(t *testing.T) {
	f := newFixtureOf(t, HostOptions{}, listedDispatcher{})
	for range 3 {
		_, err := f.call("a", mAdd, 1)
		require.NoError(t, err)
	}
	_, err := f.call("a", mGet, 0)
	require.NoError(t, err)
	_, err = f.call("a", mPanic, 0)
	require.ErrorIs(t, err, actor.ErrPanic)
	_, err = f.call("b", 999, 0) // not in the contract
	require.ErrorIs(t, err, actor.ErrUnknownMethod)

	// A request whose caller cancelled while it waited behind a busy turn.
	busy := f.send(context.Background(), "c", mBlock, 0, 0)
	<-f.started
	ctx, cancel := context.WithCancel(context.Background())
	queued := f.send(ctx, "c", mAdd, 1, 0)
	cancel()
	f.release <- struct{}{}
	require.NoError(t, (<-busy).err)
	require.ErrorIs(t, (<-queued).err, context.Canceled)

	// A deferred reply counts when it is answered, not when its turn ends.
	deferred := f.send(context.Background(), "d", mDefer, 1000, 0)
	require.Eventually(t, func() bool { return f.host.Stats().Deferred == 1 }, testWait, testPoll)
	assert.Zero(t, callCounts(f.host)["Defer"], "not answered yet")
	f.clock.Advance(time.Second)
	require.NoError(t, (<-deferred).err)

	// A deferred reply failed by deactivation is an error.
	failed := f.send(context.Background(), "e", mDefer, 60_000, 0)
	require.Eventually(t, func() bool { return f.host.Stats().Deferred == 2 }, testWait, testPoll)
	require.True(t, f.host.Deactivate(actor.GrainID{Type: testType, Key: "e"}))
	require.ErrorIs(t, (<-failed).err, actor.ErrDeactivated)

	got := callCounts(f.host)
	assert.Equal(t, [NumOutcomes]uint64{OutcomeOK: 3, OutcomeCancelled: 1}, got["Add"])
	assert.Equal(t, [NumOutcomes]uint64{OutcomeOK: 1}, got["Get"])
	assert.Equal(t, [NumOutcomes]uint64{OutcomePanic: 1}, got["Panic"])
	assert.Equal(t, [NumOutcomes]uint64{OutcomeOK: 1}, got["Block"])
	assert.Equal(t, [NumOutcomes]uint64{OutcomeOK: 1, OutcomeError: 1}, got["Defer"])
	assert.Equal(t, [NumOutcomes]uint64{OutcomeError: 1}, got[""], "an id outside the contract")
	assert.Zero(t, got["Deadline"])
	assert.Len(t, got, 9, "one counter per listed method and one for the rest")
}

// A dispatcher that lists no methods still has its calls counted, under
// the method "".
func TestCallsOfUnlistedContractCountedTogether(t *testing.T) {
	f := newFixture(t, HostOptions{})
	_, err := f.call("a", mAdd, 1)
	require.NoError(t, err)
	_, err = f.call("a", mGet, 1)
	require.NoError(t, err)
	assert.Equal(t, map[string][NumOutcomes]uint64{"": {OutcomeOK: 2}}, callCounts(f.host))
}

// A contract of more methods than are scanned finds each method's counter
// by binary search.
func TestKindCallsFindEveryMethodOfALargeContract(t *testing.T) {
	ids := []uint32{90, 3, 77, 12, 5, 61, 44, 28, 19, 100, 8}
	kc := newKindCalls(&Kind{Type: "big", Dispatcher: bigContract(ids)}, nil)
	for _, id := range ids {
		assert.Equal(t, bigContract(ids).MethodName(id), kc.method(id).name)
	}
	assert.Empty(t, kc.method(4).name, "an unlisted id")
	assert.Same(t, &kc.methods[len(ids)], kc.method(4))
}

type bigContract []uint32

func (bigContract) Dispatch(context.Context, any, uint32, []byte) (proto.Message, error) {
	return nil, nil
}
func (c bigContract) MethodIDs() []uint32       { return c }
func (bigContract) MethodName(id uint32) string { return fmt.Sprint("m", id) }

// observed is what a CallObserver was told.
type observed struct {
	method  string
	outcome Outcome
	d       time.Duration
}

type observations struct {
	mu   sync.Mutex
	list []observed
}

func (o *observations) observer(grainType, method string) CallObserver {
	if grainType != testType {
		return nil
	}
	return func(outcome Outcome, d time.Duration) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.list = append(o.list, observed{method, outcome, d})
	}
}

func (o *observations) taken() []observed {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]observed(nil), o.list...)
}

// Calls are timed on the host's clock from the start of their turn to
// their reply; a deferred reply's time runs until the grain answers.
func TestCallObserverTimesCallsOnTheHostClock(t *testing.T) {
	var obs observations
	f := newFixtureOf(t, HostOptions{}, listedDispatcher{}, WithCallObserver(obs.observer))
	_, err := f.call("a", mDeadline, 2) // advances the clock 2 s (and, having no budget, no more)
	require.NoError(t, err)
	_, err = f.call("a", mDeferDeadline, 0) // defers, advances 3 s, answers in its turn
	require.NoError(t, err)
	rc := f.send(context.Background(), "a", mDefer, 1500, 0)
	require.Eventually(t, func() bool { return f.host.Stats().Deferred == 2 }, testWait, testPoll)
	f.clock.Advance(1500 * time.Millisecond)
	require.NoError(t, (<-rc).err)
	_, err = f.call("a", mPanic, 0)
	require.Error(t, err)

	assert.Equal(t, []observed{
		{"Deadline", OutcomeOK, 2 * time.Second},
		{"DeferDeadline", OutcomeOK, 3 * time.Second},
		{"Defer", OutcomeOK, 1500 * time.Millisecond},
		{"Panic", OutcomePanic, 0},
	}, obs.taken())
}

func TestOutcomeNames(t *testing.T) {
	for o, want := range map[Outcome]string{OutcomeOK: "ok", OutcomeError: "error", OutcomeCancelled: "cancelled", OutcomePanic: "panic", 9: "unknown"} {
		assert.Equal(t, want, o.String())
	}
}
