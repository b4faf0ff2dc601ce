package host_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/host"
)

// deferringGrain answers each call through a Deferred, from the call's own
// turn: what a grain that keeps replies pays for keeping one.
type deferringGrain struct{ gc *actor.Context }

func (g *deferringGrain) OnActivate(_ context.Context, gc *actor.Context) error {
	g.gc = gc
	return nil
}

var deferredReply = wrapperspb.Int64(1)

type deferringDispatcher struct{}

func (deferringDispatcher) Dispatch(_ context.Context, grain any, _ uint32, _ []byte) (proto.Message, error) {
	d, err := grain.(*deferringGrain).gc.Defer()
	if err != nil {
		return nil, err
	}
	if d.Context().Err() != nil {
		return nil, d.Context().Err()
	}
	d.Reply(deferredReply, nil)
	return nil, nil
}

// BenchmarkDeferredTurn is BenchmarkTurn for a method that defers its
// reply and answers it at once, for calls from a known caller with a
// budget and metadata: the turn's context, the Deferred and its reply.
func BenchmarkDeferredTurn(b *testing.B) {
	kind := &host.Kind{
		Type:       "bench.Deferring",
		New:        func(actor.GrainID) any { return &deferringGrain{} },
		Dispatcher: deferringDispatcher{},
	}
	h := startBenchHost(b, kind)
	id := actor.GrainID{Type: kind.Type, Key: "k"}
	caller := host.NewCaller(actor.Identity{Kind: actor.CallerClient, Name: "bench"})
	metadata := []string{"tenant", "t1"}
	const batch = 16
	reqs := make([]*host.Request, batch)
	r := &encodingReplier{all: make(chan struct{}, 1)}
	round := func() {
		r.mu.Lock()
		r.n, r.of = 0, batch
		r.mu.Unlock()
		for i := range reqs {
			req := host.NewRequest()
			req.Target, req.CallID, req.MethodID = id, uint64(i), 1
			req.Budget, req.Caller, req.Metadata, req.Reply = 24*time.Second, caller, metadata, r
			reqs[i] = req
		}
		if run := h.DeliverInline(reqs); run != nil {
			run()
		}
		<-r.all
	}
	round() // activate
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		round()
	}
}
