package host

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
)

// batch builds requests for one grain, each answering on its own channel.
func (f *fixture) batch(key string, methods []uint32, v int64) ([]*Request, []chanReplier) {
	f.t.Helper()
	payload, err := proto.Marshal(wrapperspb.Int64(v))
	require.NoError(f.t, err)
	reqs := make([]*Request, len(methods))
	replies := make([]chanReplier, len(methods))
	for i, m := range methods {
		replies[i] = make(chanReplier, 1)
		reqs[i] = &Request{Target: actor.GrainID{Type: testType, Key: key}, MethodID: m, Payload: payload, Reply: replies[i]}
	}
	return reqs, replies
}

// deliverIdle delivers a batch for an active grain once its mailbox is idle,
// and returns the processing DeliverInline handed back. Right after a reply
// the mailbox may still be finishing its run; a batch delivered then runs
// the ordinary way, so its answers are collected and the next is tried.
func (f *fixture) deliverIdle(key string, methods []uint32, v int64) ([]*Request, []chanReplier, func()) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		reqs, replies := f.batch(key, methods, v)
		if run := f.host.DeliverInline(reqs); run != nil {
			return reqs, replies, run
		}
		for _, rc := range replies {
			<-rc
		}
	}
	f.t.Fatal("the activation's mailbox never became idle")
	return nil, nil, nil
}

func TestDeliverInlineRunsABatchInOrderOneTurnEach(t *testing.T) {
	f := newFixture(t, HostOptions{})
	_, err := f.call("a", mGet, 0) // activate
	require.NoError(t, err)

	reqs, replies, run := f.deliverIdle("a", []uint32{mAdd, mAdd, mAdd, mAdd}, 3)
	v, err := f.host.Stats().Invocations, error(nil)
	require.NoError(t, err)
	for _, rc := range replies {
		select {
		case <-rc:
			t.Fatal("nothing runs before the caller runs the returned processing")
		default:
		}
	}
	run()
	var first int64 // earlier attempts of deliverIdle may have added too
	for i, rc := range replies {
		r := <-rc
		require.NoError(t, r.err)
		got := r.reply.(*wrapperspb.Int64Value).Value
		if i == 0 {
			first = got
		}
		assert.EqualValues(t, first+3*int64(i), got, "request %d saw the turns before it", i)
	}
	assert.EqualValues(t, v+4, f.host.Stats().Invocations, "one invocation per request")
	for _, req := range reqs {
		assert.Nil(t, req.Next, "the chain is undone as the batch runs")
	}
}

func TestDeliverInlineToInactiveGrainActivatesIt(t *testing.T) {
	f := newFixture(t, HostOptions{})
	reqs, replies := f.batch("cold", []uint32{mAdd, mAdd}, 1)
	assert.Nil(t, f.host.DeliverInline(reqs), "no activation yet: delivered the ordinary way")
	for i, rc := range replies {
		r := <-rc
		require.NoError(t, r.err)
		assert.EqualValues(t, i+1, r.reply.(*wrapperspb.Int64Value).Value)
	}
	assert.EqualValues(t, 1, f.activated.Load())
	assert.Nil(t, f.host.DeliverInline(nil))
}

func TestDeliverInlineUnknownTypeAnswersEveryRequest(t *testing.T) {
	f := newFixture(t, HostOptions{})
	rcs := []chanReplier{make(chanReplier, 1), make(chanReplier, 1)}
	reqs := []*Request{{Target: actor.GrainID{Type: "nope", Key: "a"}, Reply: rcs[0]}, {Target: actor.GrainID{Type: "nope", Key: "a"}, Reply: rcs[1]}}
	assert.Nil(t, f.host.DeliverInline(reqs))
	for _, rc := range rcs {
		require.ErrorIs(t, (<-rc).err, actor.ErrUnknownGrainType)
	}
}

// A panic in the middle of a batch deactivates the activation; the requests
// after it are not lost or failed: they reach the grain's next activation.
func TestBatchAfterPanicReachesNextActivation(t *testing.T) {
	f := newFixture(t, HostOptions{})
	_, err := f.call("a", mAdd, 10)
	require.NoError(t, err)

	_, replies, run := f.deliverIdle("a", []uint32{mAdd, mPanic, mAdd, mGet}, 1)
	activated := f.activated.Load()
	run()
	r := <-replies[0]
	require.NoError(t, r.err)
	before := r.reply.(*wrapperspb.Int64Value).Value
	require.ErrorIs(t, (<-replies[1]).err, actor.ErrPanic)
	for i, rc := range replies[2:] {
		select {
		case r := <-rc:
			require.NoError(t, r.err, "a request behind the panic is re-delivered, not failed")
			assert.EqualValues(t, before+1, r.reply.(*wrapperspb.Int64Value).Value, "request %d", i+2)
		case <-time.After(10 * time.Second):
			t.Fatal("a request behind the panic was lost")
		}
	}
	assert.EqualValues(t, activated+1, f.activated.Load(), "the grain came back for the rest of the batch")
	v, err := f.call("a", mGet, 0)
	require.NoError(t, err)
	assert.EqualValues(t, before+1, v, "the state flushed on the way out plus the re-delivered add")
}

// A cancelled request inside a batch is dropped without running, and the
// others still run.
func TestBatchSkipsCancelledRequest(t *testing.T) {
	f := newFixture(t, HostOptions{})
	_, err := f.call("a", mAdd, 0)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	reqs, replies := f.batch("a", []uint32{mAdd, mAdd, mAdd}, 1)
	reqs[1].Ctx = ctx
	if run := f.host.DeliverInline(reqs); run != nil {
		run()
	}
	assert.EqualValues(t, 1, (<-replies[0]).reply.(*wrapperspb.Int64Value).Value)
	require.ErrorIs(t, (<-replies[1]).err, context.Canceled)
	assert.EqualValues(t, 2, (<-replies[2]).reply.(*wrapperspb.Int64Value).Value)
	assert.EqualValues(t, 1, f.host.Stats().SkippedCancelled)
}
