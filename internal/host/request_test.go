package host

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
)

// sendPooled delivers a request from NewRequest, as the endpoints do.
func (f *fixture) sendPooled(ctx context.Context, key string, method uint32, v int64, budget time.Duration) chanReplier {
	f.t.Helper()
	payload, err := proto.Marshal(wrapperspb.Int64(v))
	require.NoError(f.t, err)
	rc := make(chanReplier, 1)
	req := NewRequest()
	req.Target, req.MethodID, req.Payload, req.Budget, req.Reply = actor.GrainID{Type: testType, Key: key}, method, payload, budget, rc
	if ctx.Done() != nil {
		req.Ctx = ctx
	}
	f.host.Deliver(req)
	return rc
}

// Requests are recycled once answered, but a grain that keeps its ctx
// keeps nothing of the request: each kept context still reports its own
// call's budget and cancellation while later calls reuse the requests
// (run with -race, this also catches a recycled request still in use).
func TestKeptContextOutlivesRecycledRequest(t *testing.T) {
	f := newFixture(t, HostOptions{})
	const calls = 32
	ctxs := make([]context.Context, calls)
	cancels := make([]context.CancelFunc, calls)
	for i := range calls {
		callCtx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		budget := time.Duration(i+1) * time.Millisecond
		r := <-f.sendPooled(callCtx, "a", mKeepCtx, int64(i), budget)
		require.NoError(t, r.err)
		ctxs[i] = <-f.kept
	}
	for i := range calls {
		cancels[i]()
		b, ok := actor.Budget(ctxs[i])
		require.True(t, ok)
		assert.Equal(t, time.Duration(i+1)*time.Millisecond, b, "call %d", i)
		assert.ErrorIs(t, ctxs[i].Err(), context.Canceled, "call %d sees its own caller's cancellation", i)
		for j := i + 1; j < calls; j++ {
			require.NoError(t, ctxs[j].Err(), "cancelling call %d reached call %d", i, j)
		}
	}
}

// A deferred reply keeps what it needs of its request: after answering,
// its context and cancellability are still the call's own.
func TestDeferredKeepsItsContextAfterReply(t *testing.T) {
	f := newFixture(t, HostOptions{})
	callCtx, cancel := context.WithCancel(context.Background())
	rc := f.sendPooled(callCtx, "a", mDeferCC, 1, 0)
	// Cancel only once the call has deferred: cancelled while still queued,
	// it would be dropped without running.
	require.Eventually(t, func() bool { return f.host.Stats().Deferred == 1 }, 5*time.Second, time.Millisecond)
	// More pooled traffic, which reuses whatever is released meanwhile.
	for i := range 8 {
		r := <-f.sendPooled(context.Background(), "b", mAdd, int64(i), 0)
		require.NoError(t, r.err)
	}
	cancel()
	r := <-rc
	require.NoError(t, r.err)
	assert.EqualValues(t, -2, r.reply.(*wrapperspb.Int64Value).Value, "OnCancel answered through the call's own context")

	d := &deferred{ctx: callCtx, cancellable: true, req: &Request{Reply: make(chanReplier, 1)}, a: &activation{}}
	require.True(t, d.Reply(wrapperspb.Int64(1), nil))
	assert.Nil(t, d.req, "an answered Deferred lets go of its request")
	assert.Same(t, callCtx, d.Context())
	assert.True(t, d.Cancellable())
	assert.False(t, d.Reply(nil, nil), "only the first reply counts")
}

type bigValueKey struct{}

// An answered call leaves nothing of its context behind in its activation,
// which stays active: what the caller's context carries is collectable
// once the call is over, unless the grain itself kept the context.
func TestAnsweredCallContextIsNotRetained(t *testing.T) {
	f := newFixture(t, HostOptions{})
	freed := make(chan struct{})
	func() {
		big := new([1 << 20]byte)
		runtime.AddCleanup(big, func(ch chan struct{}) { close(ch) }, freed)
		ctx, cancel := context.WithCancel(context.WithValue(context.Background(), bigValueKey{}, big))
		defer cancel()
		r := <-f.send(ctx, "a", mAdd, 1, time.Second)
		require.NoError(t, r.err)
	}()
	require.True(t, f.host.IsActive(actor.GrainID{Type: testType, Key: "a"}))
	for range 50 {
		runtime.GC()
		select {
		case <-freed:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("the answered call's context is still reachable")
}

// A method's context reports its budget through actor.Deadline, never
// through its own Deadline method: nothing cancels the context when the
// budget runs out, and code that trusts ctx.Deadline would expect that.
func TestMethodContextHasNoDeadlineOfItsOwn(t *testing.T) {
	cc := &callContext{Context: context.Background(), budget: time.Second}
	_, ok := cc.Deadline()
	assert.False(t, ok)
	b, ok := actor.Budget(cc)
	require.True(t, ok)
	assert.Equal(t, time.Second, b)
}
