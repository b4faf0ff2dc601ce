package rpc

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/proxy"
)

// spinGrainType's grains compute (Spin) or answer at once (Fast).
const spinGrainType = "test.Spin"

var (
	spinMethod = &proxy.MethodDesc{Service: spinGrainType, Name: "Spin", ID: 1}
	fastMethod = &proxy.MethodDesc{Service: spinGrainType, Name: "Fast", ID: 2}
)

// spinDispatcher runs the methods of spinGrainType's grains, which keep no
// state of their own. Spin computes for a number of rounds given as an
// Int64Value and answers how many; with a negative number it computes
// until a Fast turn has run (or the test gives up) and answers whether one
// did, so that it only ends if another grain's turn runs while it still
// computes. Fast answers its Int64Value plus one.
type spinDispatcher struct {
	spinning chan struct{} // one signal per open-ended Spin turn, as it starts
	fastRan  atomic.Bool
	giveUp   atomic.Bool
	sink     atomic.Uint64
}

func (d *spinDispatcher) Dispatch(_ context.Context, _ any, method uint32, payload []byte) (proto.Message, error) {
	in := &wrapperspb.Int64Value{}
	if err := proto.Unmarshal(payload, in); err != nil {
		return nil, err
	}
	switch method {
	case spinMethod.ID:
		if in.Value < 0 {
			d.spinning <- struct{}{}
			x := uint64(1)
			for !d.fastRan.Load() && !d.giveUp.Load() {
				x = compute(x, 64)
			}
			d.sink.Add(x)
			return wrapperspb.Int64(boolInt(d.fastRan.Load())), nil
		}
		d.sink.Add(compute(1, int(in.Value)))
		return wrapperspb.Int64(in.Value), nil
	case fastMethod.ID:
		d.fastRan.Store(true)
		return wrapperspb.Int64(in.Value + 1), nil
	}
	return nil, errors.New("no such method")
}

// compute computes for rounds rounds: CPU work that neither blocks nor
// yields.
func compute(x uint64, rounds int) uint64 {
	for range rounds {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// spinConn is a host with spinGrainType's grains behind a loopback
// connection, and the endpoint that calls them over it.
type spinConn struct {
	grains *spinDispatcher
	caller *Endpoint
}

func newSpinConn(tb testing.TB) *spinConn {
	tb.Helper()
	d := &spinDispatcher{spinning: make(chan struct{}, 1)}
	kind := &host.Kind{Type: spinGrainType, New: func(actor.GrainID) any { return struct{}{} }, Dispatcher: d}
	h, err := host.NewHost(host.HostOptions{}, []*host.Kind{kind}, host.WithLogger(quiet))
	require.NoError(tb, err)
	require.NoError(tb, h.Start(context.Background()))
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(tb, h.Stop(ctx))
	})
	l, err := transport.Listen("127.0.0.1:0", transport.Options{}, func(c *transport.Conn) transport.Handler {
		ep := NewEndpoint(EndpointOptions{}, h, nil, clock.Real{}, quiet)
		ep.Attach(c)
		return ep
	})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = l.Close() })
	ep := NewEndpoint(EndpointOptions{}, nil, nil, clock.Real{}, quiet)
	conn, err := transport.Dial(context.Background(), l.Addr().String(), transport.Options{}, ep)
	require.NoError(tb, err)
	ep.Attach(conn)
	tb.Cleanup(func() { _ = conn.Close() })
	return &spinConn{grains: d, caller: ep}
}

func (s *spinConn) call(m *proxy.MethodDesc, key string, in int64) (int64, error) {
	out := &wrapperspb.Int64Value{}
	call := proxy.Call{Target: actor.GrainID{Type: spinGrainType, Key: key}, Method: m, Timeout: 30 * time.Second}
	err := s.caller.Call(context.Background(), call, wrapperspb.Int64(in), out)
	return out.Value, err
}

// A grain whose turn computes and never yields does not hold up another
// grain's turn on the same connection: the slow turn computes until the
// fast grain's turn has run, so it ends, and answers that it saw that
// turn, only if the fast turn ran while it was still in its own. Both
// grains are active and idle first, so that the connection's runner runs
// their turns itself.
func TestACPUBoundTurnDoesNotHoldUpAnotherGrainsTurnOnTheConnection(t *testing.T) {
	s := newSpinConn(t)
	for _, key := range []string{"slow", "fast"} {
		_, err := s.call(spinMethod, key, 1)
		require.NoError(t, err)
	}
	slow := make(chan int64, 1)
	go func() {
		v, err := s.call(spinMethod, "slow", -1)
		assert.NoError(t, err)
		slow <- v
	}()
	<-s.grains.spinning
	v, err := s.call(fastMethod, "fast", 41)
	if err != nil {
		s.grains.giveUp.Store(true) // let the slow turn end, and the test with it
	}
	require.NoError(t, err, "the fast grain's call")
	assert.EqualValues(t, 42, v)
	assert.EqualValues(t, 1, <-slow, "the slow turn saw the fast one run while it computed")
}

// BenchmarkFastGrainBesideCPUBoundGrain measures the latency of calls to
// a grain that answers at once, made one after another over a connection
// that also carries a grain whose every turn computes for some
// milliseconds without yielding: alone, and beside that grain, whose
// caller keeps one call in flight. It reports the fast calls' median and
// 99th percentile; beside a CPU-bound grain they should stay what they
// are alone, give or take the machine's noise.
func BenchmarkFastGrainBesideCPUBoundGrain(b *testing.B) {
	const spinRounds = 4 << 20
	for _, beside := range []bool{false, true} {
		name := "alone"
		if beside {
			name = "beside-cpu-bound"
		}
		b.Run(name, func(b *testing.B) {
			s := newSpinConn(b)
			for _, key := range []string{"slow", "fast"} {
				if _, err := s.call(spinMethod, key, 1); err != nil {
					b.Fatal(err)
				}
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var spins atomic.Int64
			if beside {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						if _, err := s.call(spinMethod, "slow", spinRounds); err != nil {
							b.Error(err)
							return
						}
						spins.Add(1)
					}
				}()
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				t0 := time.Now()
				if _, err := s.call(fastMethod, "fast", int64(i)); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			if beside {
				b.ReportMetric(float64(spins.Load()), "cpu-bound-turns")
			}
		})
	}
}
