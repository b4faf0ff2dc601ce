package rpc

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/proxy"
)

// inlineInbound answers every request on the delivering goroutine: the
// call layer's cost without activations, for comparison.
type inlineInbound struct{}

func (inlineInbound) Deliver(req *host.Request) {
	in := &wrapperspb.Int64Value{}
	if err := proto.Unmarshal(req.Payload, in); err != nil {
		req.Reply.Reply(req, nil, err)
		return
	}
	req.Reply.Reply(req, wrapperspb.Int64(in.Value+1), nil)
}

func BenchmarkEndpointInline(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := transport.Listen("127.0.0.1:0", transport.Options{}, func(c *transport.Conn) transport.Handler {
		ep := NewEndpoint(EndpointOptions{}, inlineInbound{}, nil, clock.Real{}, log)
		ep.Attach(c)
		return ep
	})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ep := NewEndpoint(EndpointOptions{}, nil, nil, clock.Real{}, log)
	conn, err := transport.Dial(context.Background(), l.Addr().String(), transport.Options{}, ep)
	if err != nil {
		b.Fatal(err)
	}
	ep.Attach(conn)
	defer conn.Close()
	m := &proxy.MethodDesc{Service: "bench.S", Name: "M", ID: 1}
	call := proxy.Call{Target: actor.GrainID{Type: "bench.S", Key: "k"}, Method: m, Timeout: 30 * time.Second}
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range 16 {
		n := b.N / 16
		if w < b.N%16 {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := wrapperspb.Int64(1)
			for range n {
				out := new(wrapperspb.Int64Value)
				if err := ep.Call(context.Background(), call, in, out); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkCallTable registers and takes calls as a busy connection does:
// 16 in flight, ids counting up.
func BenchmarkCallTable(b *testing.B) {
	var tbl callTable
	tbl.init(clock.Real{}, time.Hour)
	const inFlight = 16
	ids := make([]uint64, 0, inFlight)
	p := make([]*pending, inFlight)
	for i := range p {
		p[i] = getPending()
		id, err := tbl.add(p[i])
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, id)
	}
	i := 0
	for b.Loop() {
		q := tbl.take(ids[i])
		id, err := tbl.add(q)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = id
		i = (i + 1) % inFlight
	}
	tbl.close(proxy.ErrUnavailable)
}
