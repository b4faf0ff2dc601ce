package host_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/dispatch"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/proxy"
)

// encodingReplier answers as an endpoint does, minus the network: it
// encodes the reply into a reused buffer.
type encodingReplier struct {
	mu  sync.Mutex
	buf []byte
	n   int
	all chan struct{}
	of  int
}

func (r *encodingReplier) Reply(_ *host.Request, reply proto.Message, err error) {
	r.mu.Lock()
	if err == nil {
		r.buf, _ = proxy.AppendMessage(r.buf[:0], reply)
	}
	r.n++
	done := r.n == r.of
	r.mu.Unlock()
	if done {
		r.all <- struct{}{}
	}
}

// BenchmarkTurn measures what a silo spends on a request once it is
// decoded: batches of 16 requests for one grain (a hot key, as the
// connection runner delivers them), each run as its own turn through the
// generated dispatcher, and the reply encoded. No network, no scheduler.
func BenchmarkTurn(b *testing.B) { benchTurns(b, 1) }

// BenchmarkTurnPartitioned is BenchmarkTurn with the 16 requests of a
// batch spread over 16 grains: each is delivered on its own and runs its
// activation's mailbox, as the runner does when load spreads out.
func BenchmarkTurnPartitioned(b *testing.B) { benchTurns(b, 16) }

// BenchmarkTurnTimed is BenchmarkTurn on a host that times its calls, with
// an observer that only counts: what the clock reads cost, apart from
// whatever the observer does (internal/metrics measures its histogram).
func BenchmarkTurnTimed(b *testing.B) {
	var observed atomic.Int64
	benchTurns(b, 1, host.WithCallObserver(func(string, string) host.CallObserver {
		return func(host.Outcome, time.Duration) { observed.Add(1) }
	}))
}

// BenchmarkTurnAdmitted is BenchmarkTurn on a host whose admission reads
// the monotonic clock and two atomics before each message, as a silo's
// fences do (membership's BenchmarkAdmit measures the fences' own Admit);
// BenchmarkTurnPartitionedAdmitted is BenchmarkTurnPartitioned with it,
// one message a request.
func BenchmarkTurnAdmitted(b *testing.B) { benchTurns(b, 1, benchAdmission()) }

func BenchmarkTurnPartitionedAdmitted(b *testing.B) { benchTurns(b, 16, benchAdmission()) }

func benchAdmission() host.HostOption {
	var refusal atomic.Pointer[error]
	var ran atomic.Int64
	base := time.Now()
	return host.WithAdmission(func() error {
		if p := refusal.Load(); p != nil {
			return *p
		}
		if time.Since(base)-time.Duration(ran.Load()) > time.Hour {
			return context.DeadlineExceeded
		}
		return nil
	})
}

// startBenchHost starts a host of kind, which logs nothing, and stops it
// when the benchmark ends.
func startBenchHost(b *testing.B, kind *host.Kind, opts ...host.HostOption) *host.Host {
	h, err := host.NewHost(host.HostOptions{}, []*host.Kind{kind}, append(opts, host.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))...)
	if err != nil {
		b.Fatal(err)
	}
	if err := h.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Stop(ctx)
	})
	return h
}

func benchTurns(b *testing.B, keys int, opts ...host.HostOption) {
	kind := &host.Kind{
		Type:       testgrain.CounterGrainType,
		New:        func(id actor.GrainID) any { return testgrain.New(nil)(id) },
		Dispatcher: &dispatch.Dispatcher{Service: testgrain.CounterService},
	}
	h := startBenchHost(b, kind, opts...)
	payload, _ := proto.Marshal(&testgrain.AddRequest{Delta: 1})
	ids := make([]actor.GrainID, keys)
	for k := range ids {
		ids[k] = actor.GrainID{Type: testgrain.CounterGrainType, Key: fmt.Sprint("key-", k)}
	}
	const batch = 16
	reqs := make([]*host.Request, batch)
	r := &encodingReplier{all: make(chan struct{}, 1)}
	round := func() {
		r.mu.Lock()
		r.n, r.of = 0, batch
		r.mu.Unlock()
		for i := range reqs {
			req := host.NewRequest()
			req.Target, req.CallID, req.MethodID = ids[i%keys], uint64(i), testgrain.Counter_Add_Method.ID
			req.Payload, req.Budget, req.Reply = payload, 24*time.Second, r
			reqs[i] = req
		}
		if keys == 1 {
			if run := h.DeliverInline(reqs); run != nil {
				run()
			}
		} else {
			for i := range reqs {
				if run := h.DeliverInline(reqs[i : i+1]); run != nil {
					run()
				}
			}
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
