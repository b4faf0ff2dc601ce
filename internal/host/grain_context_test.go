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
	"github.com/granary-go/granary/proxy"
)

// deferSeen is what a deferring method saw: its own context, and the
// context of the Deferred it kept.
type deferSeen struct {
	method, deferred context.Context
	d                *actor.Deferred
	cancellable      bool
	deadline         time.Time
}

// deferringDispatcher defers every call, answers -2 from OnCancel, and
// hands what it saw to the test.
type deferringDispatcher struct{ seen chan deferSeen }

func (x deferringDispatcher) Dispatch(ctx context.Context, grain any, _ uint32, _ []byte) (proto.Message, error) {
	d, err := grain.(*testGrain).gc.Defer()
	if err != nil {
		return nil, err
	}
	d.OnCancel(func() { d.Reply(wrapperspb.Int64(-2), nil) })
	deadline, _ := d.Deadline()
	x.seen <- deferSeen{method: ctx, deferred: d.Context(), d: d, cancellable: d.Cancellable(), deadline: deadline}
	return nil, nil
}

// A Deferred's context tells what the context of the method that deferred
// tells: who called, the call's metadata and its budget; it is cancelled
// with the call; and it keeps telling it once the reply has gone and the
// request has been recycled.
func TestDeferredContextCarriesTheMethodsValues(t *testing.T) {
	seen := make(chan deferSeen, 1)
	f := newFixtureOf(t, HostOptions{}, deferringDispatcher{seen: seen})
	alice := actor.Identity{Kind: actor.CallerClient, Name: "alice", Credential: actor.CredentialToken}
	cases := []struct {
		name        string
		caller      *Caller
		metadata    []string
		budget      time.Duration
		cancellable bool
	}{
		{name: "everything", caller: NewCaller(alice), metadata: []string{"tenant", "t1"}, budget: 5 * time.Second, cancellable: true},
		{name: "a caller only", caller: NewCaller(alice)},
		{name: "metadata only", metadata: []string{"tenant", "t2", "user", "u"}},
		{name: "a budget only", budget: 3 * time.Second},
		{name: "cancellable only", cancellable: true},
		{name: "nothing"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			callCtx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rc := make(chanReplier, 1)
			req := NewRequest()
			req.Target, req.MethodID, req.Budget, req.Reply = actor.GrainID{Type: testType, Key: "a"}, uint32(i+1), c.budget, rc
			req.Caller, req.Metadata = c.caller, c.metadata
			if c.cancellable {
				req.Ctx = callCtx
			}
			f.host.Deliver(req)
			s := <-seen
			dctx := s.deferred
			require.NotNil(t, dctx)

			check := func(when string) {
				id, known := actor.IdentityOf(dctx)
				methodID, methodKnown := actor.IdentityOf(s.method)
				assert.Equal(t, c.caller != nil, known, "%s: the Deferred's context knows the caller", when)
				assert.Equal(t, methodKnown, known, when)
				assert.Equal(t, methodID, id, when)
				if c.caller != nil {
					assert.Equal(t, alice, id, when)
				}
				assert.Equal(t, c.metadata, actor.MetadataOf(dctx).Pairs(), "%s: metadata", when)
				budget, bounded := actor.Budget(dctx)
				assert.Equal(t, c.budget > 0, bounded, when)
				assert.Equal(t, c.budget, budget, when)
				deadline, ok := actor.Deadline(dctx)
				if c.budget > 0 {
					require.True(t, ok, when)
					assert.Equal(t, s.deadline, deadline, "%s: the budget's deadline is the Deferred's", when)
				} else {
					assert.False(t, ok, when)
				}
				_, hasDeadline := dctx.Deadline()
				assert.False(t, hasDeadline, "%s: the context itself has no deadline", when)
			}
			check("before the reply")
			assert.Equal(t, c.cancellable, s.cancellable)
			assert.Equal(t, c.cancellable, dctx.Done() != nil, "the context is cancellable when the call is")

			if c.cancellable {
				cancel()
				require.ErrorIs(t, dctx.Err(), context.Canceled, "the Deferred's context is cancelled with the call")
				r := <-rc
				require.NoError(t, r.err)
				assert.EqualValues(t, -2, r.reply.(*wrapperspb.Int64Value).Value, "OnCancel answered")
			} else {
				require.True(t, s.d.Reply(wrapperspb.Int64(1), nil))
				r := <-rc
				require.NoError(t, r.err)
				assert.NoError(t, dctx.Err())
			}
			// Traffic that reuses the recycled request.
			for j := range 4 {
				rc := f.sendPooled(context.Background(), "b", mAdd, int64(j), 0)
				(<-seen).d.Reply(wrapperspb.Int64(0), nil)
				require.NoError(t, (<-rc).err)
			}
			check("after the reply")
		})
	}
}

// testOwner is a Host's owner for tests: it only has a caller.
type testOwner struct{ caller proxy.Caller }

func (o testOwner) Caller() proxy.Caller { return o.caller }

// nopCaller is a proxy.Caller that answers nothing.
type nopCaller struct{}

func (nopCaller) Call(context.Context, proxy.Call, proto.Message, proto.Message) error { return nil }
func (nopCaller) ResponseTimeout() time.Duration                                       { return time.Second }

// CallerOf reaches the caller of the owner of the host that runs the
// activation, and nothing for a host without an owner or a Context no
// host made.
func TestCallerOfReachesTheHostsOwner(t *testing.T) {
	var caller proxy.Caller = &nopCaller{}
	owned := newFixture(t, HostOptions{}, WithOwner(testOwner{caller: caller}))
	ownerless := newFixture(t, HostOptions{})
	for _, c := range []struct {
		name string
		f    *fixture
		want proxy.Caller
	}{{"owned", owned, caller}, {"ownerless", ownerless, nil}} {
		_, err := c.f.call("a", mAdd, 1)
		require.NoError(t, err)
		c.f.host.mu.RLock()
		a := c.f.host.mu.acts.get(actor.GrainID{Type: testType, Key: "a"})
		c.f.host.mu.RUnlock()
		require.NotNil(t, a, c.name)
		assert.Equal(t, c.want, CallerOf(a.gc), c.name)
		assert.Equal(t, actor.GrainID{Type: testType, Key: "a"}, a.gc.ID(), c.name)
	}
	assert.Nil(t, CallerOf(new(actor.Context)), "a Context no host made")
}
