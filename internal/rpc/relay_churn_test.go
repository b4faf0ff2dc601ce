package rpc

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/proxy"
)

// spin yields up to n times, to vary how goroutines interleave without
// waiting on the clock.
func spin(n int) {
	for range rand.IntN(n + 1) {
		runtime.Gosched()
	}
}

// Clients call through a gateway that relays every call to a far silo,
// some relays starting on the gateway's reader and some on a goroutine of
// their own (as after a directory lookup), while every caller that can
// cancel does so at a random moment and some clients close their
// connection mid-call. The far silo answers at once
// or holds a cancellable call until its cancel arrives. Whatever ends each
// call, every call returns once with an outcome its caller can explain,
// and nothing is left behind: no relay entry on the link, no request in
// flight or registered for cancellation on the gateway, no held call on
// the far silo (a cancel lost on the way would leave one).
func TestRelayedCallsThatEndAnyWayLeaveNothingBehind(t *testing.T) {
	var held sync.WaitGroup
	farListener, far := listenEndpoints(t, transport.Options{Identity: transport.Identity{Role: transport.RoleSilo, SiloID: "far"}},
		inboundFunc(func(req *host.Request) {
			held.Go(func() {
				if req.Ctx != nil && rand.IntN(2) == 0 {
					<-req.Ctx.Done()
					req.Reply.Reply(req, nil, req.Ctx.Err())
					return
				}
				spin(20)
				increment(req)
			})
		}))
	t.Cleanup(func() { _ = farListener.Close(); held.Wait() })
	link := NewEndpoint(EndpointOptions{}, nil, nil, nil, quiet)
	linkConn, err := transport.Dial(context.Background(), farListener.Addr().String(),
		transport.Options{Identity: transport.Identity{Role: transport.RoleSilo, SiloID: "gateway"}}, link)
	require.NoError(t, err)
	link.Attach(linkConn)
	t.Cleanup(func() { _ = linkConn.Close(); <-linkConn.Done() })

	var relays sync.WaitGroup
	gateway, gw := listenEndpoints(t, transport.Options{}, inboundFunc(func(req *host.Request) {
		if rand.IntN(2) == 0 {
			link.Relay(req)
			return
		}
		relays.Go(func() { spin(20); link.Relay(req) })
	}))
	t.Cleanup(func() { _ = gateway.Close(); relays.Wait() })

	const rounds, calls = 30, 24
	for round := range rounds {
		client := NewEndpoint(EndpointOptions{}, nil, nil, nil, quiet)
		conn, err := transport.Dial(context.Background(), gateway.Addr().String(), transport.Options{}, client)
		require.NoError(t, err)
		client.Attach(conn)
		closing := round%3 == 0
		var callers sync.WaitGroup
		for i := range calls {
			cancellable := i%2 == 0
			callers.Go(func() {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if cancellable {
					go func() { spin(200); cancel() }() // a held call ends only so
				}
				out := &wrapperspb.Int64Value{}
				err := client.Call(ctx, testCall(time.Minute, cancellable), wrapperspb.Int64(int64(i)), out)
				switch {
				case err == nil:
					assert.EqualValues(t, i+1, out.Value)
				case cancellable && errors.Is(err, context.Canceled):
				case closing && errors.Is(err, proxy.ErrUnavailable):
				default:
					t.Errorf("round %d call %d (cancellable %v): %v", round, i, cancellable, err)
				}
			})
		}
		if closing {
			spin(200)
			_ = conn.Close()
		}
		callers.Wait()
		_ = conn.Close()
		<-conn.Done()
	}

	require.Eventually(t, func() bool { return link.Stats().Pending == 0 }, 10*time.Second, time.Millisecond,
		"relay entries left: %d", link.Stats().Pending)
	settled := func(ends *endpoints) func() bool {
		return func() bool {
			ends.mu.Lock()
			defer ends.mu.Unlock()
			for _, ep := range ends.all {
				if s := ep.Stats(); s.InFlight != 0 || s.Inbound.Active != 0 {
					return false
				}
			}
			return true
		}
	}
	require.Eventually(t, settled(gw), 10*time.Second, time.Millisecond,
		"a gateway connection still has requests in flight or registered")
	require.Eventually(t, settled(far), 10*time.Second, time.Millisecond,
		"the far silo still holds calls: a cancel was lost")
}

// endpoints are the endpoints of a listener's connections.
type endpoints struct {
	mu  sync.Mutex
	all []*Endpoint
}

// listenEndpoints listens on loopback with an endpoint per connection that
// hands requests to inbound, until the test ends.
func listenEndpoints(t *testing.T, opts transport.Options, inbound Inbound) (*transport.Listener, *endpoints) {
	t.Helper()
	ends := &endpoints{}
	l, err := transport.Listen("127.0.0.1:0", opts, func(c *transport.Conn) transport.Handler {
		ep := NewEndpoint(EndpointOptions{}, inbound, nil, nil, quiet)
		ep.Attach(c)
		ends.mu.Lock()
		ends.all = append(ends.all, ep)
		ends.mu.Unlock()
		return ep
	})
	require.NoError(t, err)
	return l, ends
}
