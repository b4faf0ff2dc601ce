package rpc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/proxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var testMethod = &proxy.MethodDesc{Service: "test.S", Name: "M", ID: proxy.MethodID("test.S", "M")}

func testCall(timeout time.Duration, cancellable bool) proxy.Call {
	return proxy.Call{Target: actor.GrainID{Type: "test.S", Key: "k"}, Method: testMethod, Timeout: timeout, Cancellable: cancellable}
}

func TestCallTableTimesOutOnItsCoarseClock(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	var tbl callTable
	tbl.init(fake, 10*time.Millisecond)

	first := getPending()
	first.call = testCall(100*time.Millisecond, false)
	_, err := tbl.add(first)
	require.NoError(t, err)
	assert.Equal(t, 1, fake.Pending(), "the sweep is armed by the first call")

	fake.Advance(35 * time.Millisecond)
	second := getPending()
	second.call = testCall(100*time.Millisecond, false)
	_, err = tbl.add(second)
	require.NoError(t, err)
	// The second deadline comes from the sweep clock: never before the
	// exact deadline (35+100 ms), at most one interval after it.
	assert.GreaterOrEqual(t, second.deadline, int64(135*time.Millisecond))
	assert.LessOrEqual(t, second.deadline, int64(145*time.Millisecond))

	fake.Advance(64 * time.Millisecond) // t = 99 ms
	assert.Equal(t, 2, tbl.len())
	fake.Advance(time.Millisecond) // t = 100 ms
	<-first.done
	var te *proxy.TimeoutError
	require.ErrorAs(t, first.err, &te)
	assert.Equal(t, "test.S/M", te.Method)
	assert.Equal(t, 1, tbl.len())

	fake.Advance(50 * time.Millisecond)
	<-second.done
	require.ErrorIs(t, second.err, proxy.ErrTimeout)
	assert.Zero(t, tbl.len())
	assert.Zero(t, fake.Pending(), "the sweep disarms when nothing is pending")
	assert.EqualValues(t, 2, tbl.timeouts.Load())
}

func TestCallTableCloseFailsPendingAndRefusesNew(t *testing.T) {
	var tbl callTable
	tbl.init(clock.NewFake(time.Unix(0, 0)), time.Millisecond)
	p := getPending()
	p.call = testCall(time.Second, false)
	id, err := tbl.add(p)
	require.NoError(t, err)
	tbl.close(proxy.ErrUnavailable)
	<-p.done
	require.ErrorIs(t, p.err, proxy.ErrUnavailable)
	assert.NotErrorIs(t, p.err, ErrNotSent, "a call that was in flight may have run")
	assert.Nil(t, tbl.take(id), "a completed call is taken once")
	_, err = tbl.add(getPending())
	require.ErrorIs(t, err, proxy.ErrUnavailable)
	require.ErrorIs(t, err, ErrNotSent, "a call refused before sending is safe to retry")
}

// goInbound runs each request on its own goroutine, like an activation.
type goInbound struct {
	wg      sync.WaitGroup
	handler func(req *host.Request)
}

func (g *goInbound) Deliver(req *host.Request) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.handler(req)
	}()
}

func increment(req *host.Request) {
	in := &wrapperspb.Int64Value{}
	if err := proto.Unmarshal(req.Payload, in); err != nil {
		req.Reply.Reply(req, nil, err)
		return
	}
	req.Reply.Reply(req, wrapperspb.Int64(in.Value+1), nil)
}

func TestLocalCaller(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	started := make(chan *host.Request, 4)
	in := &goInbound{handler: func(req *host.Request) {
		if req.MethodID == 2 { // hold until cancelled, or forever
			started <- req
			return
		}
		increment(req)
	}}
	defer in.wg.Wait()
	l := NewLocalCaller(in, func() time.Duration { return time.Second }, fake, time.Millisecond)
	defer l.Close()
	assert.Equal(t, time.Second, l.ResponseTimeout())

	out := &wrapperspb.Int64Value{}
	require.NoError(t, l.Call(context.Background(), testCall(time.Second, false), wrapperspb.Int64(41), out))
	assert.EqualValues(t, 42, out.Value)

	hold := &proxy.MethodDesc{Service: "test.S", Name: "Hold", ID: 2}
	t.Run("cancel returns at once and cancels the request's context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			call := testCall(time.Second, true)
			call.Method = hold
			errc <- l.Call(ctx, call, wrapperspb.Int64(0), out)
		}()
		req := <-started
		require.NotNil(t, req.Ctx, "a cancellable caller gives the grain a context")
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
		<-req.Ctx.Done()
		req.Reply.Reply(req, nil, nil) // a late reply is dropped
		assert.Zero(t, l.Pending())
	})
	t.Run("background callers give the grain no context", func(t *testing.T) {
		errc := make(chan error, 1)
		go func() {
			call := testCall(50*time.Millisecond, false)
			call.Method = hold
			errc <- l.Call(context.Background(), call, wrapperspb.Int64(0), out)
		}()
		req := <-started
		assert.Nil(t, req.Ctx)
		fake.Advance(49 * time.Millisecond)
		select {
		case err := <-errc:
			t.Fatalf("timed out early: %v", err)
		default:
		}
		// The sweep was already running, so the deadline may be up to one
		// sweep interval after the exact one.
		fake.Advance(2 * time.Millisecond)
		require.ErrorIs(t, <-errc, proxy.ErrTimeout)
	})
}

// pair connects a client endpoint to a serving endpoint over loopback.
func pair(t *testing.T, inbound Inbound) (client *Endpoint, server func() *Endpoint) {
	t.Helper()
	var mu sync.Mutex
	var srv *Endpoint
	l, err := transport.Listen("127.0.0.1:0", transport.Options{}, func(c *transport.Conn) transport.Handler {
		ep := NewEndpoint(EndpointOptions{}, inbound, wire.NewInterner("test.S"), nil, quiet)
		ep.Attach(c)
		mu.Lock()
		srv = ep
		mu.Unlock()
		return ep
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	client = NewEndpoint(EndpointOptions{}, nil, nil, nil, quiet)
	conn, err := transport.Dial(context.Background(), l.Addr().String(), transport.Options{}, client)
	require.NoError(t, err)
	client.Attach(conn)
	t.Cleanup(func() { _ = conn.Close(); <-conn.Done() })
	return client, func() *Endpoint { mu.Lock(); defer mu.Unlock(); return srv }
}

func TestEndpointRoundTripAndErrors(t *testing.T) {
	in := &goInbound{handler: func(req *host.Request) {
		if req.MethodID == 3 {
			req.Reply.Reply(req, nil, errors.New("grain says no"))
			return
		}
		increment(req)
	}}
	defer in.wg.Wait()
	client, _ := pair(t, in)
	out := &wrapperspb.Int64Value{}
	require.NoError(t, client.Call(context.Background(), testCall(time.Second, false), wrapperspb.Int64(1), out))
	assert.EqualValues(t, 2, out.Value)

	call := testCall(time.Second, false)
	call.Method = &proxy.MethodDesc{Service: "test.S", Name: "Fail", ID: 3}
	err := client.Call(context.Background(), call, wrapperspb.Int64(1), out)
	var ge *proxy.Error
	require.ErrorAs(t, err, &ge, "a grain's own error arrives as a *proxy.Error")
	assert.ErrorIs(t, err, proxy.ErrApplication)
	assert.Equal(t, "grain says no", ge.Message)
	assert.Equal(t, proxy.DefaultResponseTimeout, client.ResponseTimeout())
}

func TestClientEndpointServesNoRequests(t *testing.T) {
	// The "server" side here hosts nothing and calls the client instead.
	client, server := pair(t, nil)
	_ = client
	require.Eventually(t, func() bool { return server() != nil }, 5*time.Second, time.Millisecond)
	err := server().Call(context.Background(), testCall(time.Second, false), wrapperspb.Int64(1), &wrapperspb.Int64Value{})
	require.ErrorIs(t, err, proxy.ErrUnavailable, "a peer without grains refuses requests")
	assert.Contains(t, err.Error(), ErrNoInbound.Error())
}

func TestConnectionLossFailsCallsAndCancelsInboundWork(t *testing.T) {
	running := make(chan *host.Request, 1)
	in := &goInbound{handler: func(req *host.Request) {
		running <- req
		<-req.Ctx.Done()
		req.Reply.Reply(req, nil, req.Ctx.Err())
	}}
	defer in.wg.Wait()
	client, _ := pair(t, in)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- client.Call(ctx, testCall(time.Minute, true), wrapperspb.Int64(1), &wrapperspb.Int64Value{})
	}()
	req := <-running
	require.NoError(t, client.Conn().Close())
	require.ErrorIs(t, <-errc, proxy.ErrUnavailable)
	select {
	case <-req.Ctx.Done(): // the silo side cancelled work nobody waits for
	case <-time.After(10 * time.Second):
		t.Fatal("inbound call not cancelled after the connection closed")
	}
	assert.Zero(t, client.Stats().Pending)
}

// Closing the local caller fails its waiting calls and cancels the contexts
// of the cancellable ones the grains are still running.
func TestLocalCallerCloseCancelsRunningCalls(t *testing.T) {
	started := make(chan *host.Request, 1)
	in := &goInbound{handler: func(req *host.Request) { started <- req }}
	defer in.wg.Wait()
	l := NewLocalCaller(in, func() time.Duration { return time.Minute }, nil, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- l.Call(ctx, testCall(time.Minute, true), wrapperspb.Int64(0), &wrapperspb.Int64Value{})
	}()
	req := <-started
	require.NotNil(t, req.Ctx)
	require.NoError(t, req.Ctx.Err())

	l.Close()
	require.ErrorIs(t, <-errc, proxy.ErrUnavailable)
	select {
	case <-req.Ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the grain's context outlived the caller")
	}
	req.Reply.Reply(req, nil, nil) // a late reply is dropped
}

// A call that stays pending while more than a ring's worth of newer calls
// come and go pushes the newer ones that share its slot to the overflow
// map: every call is still taken exactly once, by its own id, and the
// sweep and close reach calls in both places.
func TestCallTableSlowCallAmongFastOnes(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	var tbl callTable
	tbl.init(fake, 10*time.Millisecond)

	slow := getPending()
	slow.call = testCall(time.Hour, false)
	slowID, err := tbl.add(slow)
	require.NoError(t, err)

	var overflowed []*pending
	for range 3 * callSlots {
		p := getPending()
		p.call = testCall(50*time.Millisecond, false)
		id, err := tbl.add(p)
		require.NoError(t, err)
		if id%callSlots == slowID%callSlots {
			overflowed = append(overflowed, p) // kept pending: it sits in the overflow map
			continue
		}
		assert.Nil(t, tbl.take(id+callSlots), "an id not yet issued takes nothing")
		require.Same(t, p, tbl.take(id))
		assert.Nil(t, tbl.take(id), "a call is taken once")
		putPending(p)
	}
	require.Len(t, overflowed, 3)
	require.Equal(t, 3, tbl.mu.calls.Overflowed())
	assert.Equal(t, 4, tbl.len())

	// The first overflowed call is answered; the others time out.
	require.Same(t, overflowed[0], tbl.take(overflowed[0].id))
	fake.Advance(100 * time.Millisecond)
	for _, p := range overflowed[1:] {
		waitDone(t, p)
		require.ErrorIs(t, p.err, proxy.ErrTimeout)
	}
	assert.Zero(t, tbl.mu.calls.Overflowed())
	assert.Equal(t, 1, tbl.len(), "the slow call is still pending")

	// The next call to reach the slow call's slot overflows too; close
	// fails calls in both places.
	late := getPending()
	late.call = testCall(time.Hour, false)
	for {
		id, err := tbl.add(late)
		require.NoError(t, err)
		if id%callSlots == slowID%callSlots {
			require.Equal(t, 1, tbl.mu.calls.Overflowed())
			break
		}
		require.Same(t, late, tbl.take(id))
	}
	tbl.close(proxy.ErrUnavailable)
	for _, p := range []*pending{slow, late} {
		waitDone(t, p)
		require.ErrorIs(t, p.err, proxy.ErrUnavailable)
	}
	assert.Zero(t, tbl.len())
	assert.Nil(t, tbl.take(slowID))
}

// waitDone waits for p to be completed, failing the test if it is not.
func waitDone(t *testing.T, p *pending) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call was never completed")
	}
}

// TestEndpointStatsAddSumsEveryCounter sets every counter, nested ones
// included, and checks that Add sums each: a counter added to a stats
// type but not to its Add fails here.
func TestEndpointStatsAddSumsEveryCounter(t *testing.T) {
	var one EndpointStats
	setInts(reflect.ValueOf(&one).Elem(), 1)
	var sum EndpointStats
	sum.Add(one)
	sum.Add(one)
	var want EndpointStats
	setInts(reflect.ValueOf(&want).Elem(), 2)
	assert.Equal(t, want, sum)
}

// setInts sets every integer field of v, recursively, to n.
func setInts(v reflect.Value, n int) {
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Struct:
			setInts(f, n)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(n))
		case reflect.Uint64:
			f.SetUint(uint64(n))
		default:
			panic("setInts: unexpected field kind " + f.Kind().String())
		}
	}
}
