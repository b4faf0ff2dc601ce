package silo_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// pair is two silos linked by hand, each placing grains by a static table.
type pair struct {
	silos    [2]*silo.Silo
	locators [2]*rpc.StaticLocator
	gates    [2]*testgrain.Gate
}

var siloNames = [2]string{"silo-0", "silo-1"}

// startPair starts two silos. Grains live on silo-1 unless a test places
// them elsewhere; silo-0 links to silo-1, and silo-1 to silo-0 when back
// is set.
func startPair(t testing.TB, back bool) *pair {
	t.Helper()
	return startPairLocating(t, back, func(l *rpc.StaticLocator) rpc.Locator { return l })
}

// startPairLocating is startPair with each silo's locator wrapped by wrap.
func startPairLocating(t testing.TB, back bool, wrap func(*rpc.StaticLocator) rpc.Locator) *pair {
	t.Helper()
	p := &pair{}
	for i := range p.silos {
		p.locators[i] = rpc.NewStaticLocator(siloNames[i])
		p.locators[i].PlaceOthers("silo-1")
		p.gates[i] = testgrain.NewGate(64)
		s, err := silo.New(silo.Options{Name: siloNames[i], GatewayAddress: "127.0.0.1:0"},
			silo.WithLogger(quiet), silo.WithLocator(wrap(p.locators[i])))
		require.NoError(t, err)
		require.NoError(t, testgrain.RegisterCounterGrain(s, testgrain.NewCalling(p.gates[i], silo.CallerOf)))
		require.NoError(t, s.Start(context.Background()))
		p.silos[i] = s
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			assert.NoError(t, s.Stop(ctx))
		})
	}
	ctx := context.Background()
	var links [2]string
	for i, s := range p.silos {
		addr, err := s.ListenForLinks()
		require.NoError(t, err)
		links[i] = addr
	}
	require.NoError(t, p.silos[0].LinkTo(ctx, "silo-1", links[1]))
	if back {
		require.NoError(t, p.silos[1].LinkTo(ctx, "silo-0", links[0]))
	}
	return p
}

// client returns a client of silo i's gateway.
func (p *pair) client(t testing.TB, i int, opts client.Options) *client.Client {
	t.Helper()
	opts.Gateways = []string{p.silos[i].GatewayAddr().String()}
	c, err := client.New(opts, client.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, c.Connect(context.Background()))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func counterID(key string) actor.GrainID {
	return actor.GrainID{Type: testgrain.CounterGrainType, Key: key}
}

func TestClientCallsAGrainHostedOnAnotherSilo(t *testing.T) {
	p := startPair(t, false)
	ref := testgrain.NewCounterRef(p.client(t, 0, client.Options{}), "far")
	for i := int64(1); i <= 3; i++ {
		r, err := ref.Add(context.Background(), &testgrain.AddRequest{Delta: 10})
		require.NoError(t, err)
		assert.Equal(t, 10*i, r.Value, "state kept across relayed calls")
		assert.Positive(t, r.BudgetNanos, "the budget travels with the relayed request")
	}
	assert.True(t, p.silos[1].Host().IsActive(counterID("far")), "the grain lives on silo-1")
	assert.False(t, p.silos[0].Host().IsActive(counterID("far")), "and nowhere else")
	assert.Zero(t, p.silos[0].Stats().Host.Activations)
}

// blockOn starts a Block call through ref on its own goroutine and returns
// where its result arrives.
func blockOn(ctx context.Context, ref testgrain.CounterRef, tag string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := ref.Block(ctx, &testgrain.BlockRequest{Tag: tag}, proxy.WithTimeout(time.Minute))
		done <- err
	}()
	return done
}

func TestCancelReachesARelayedCallWhileItRuns(t *testing.T) {
	p := startPair(t, false)
	ref := testgrain.NewCounterRef(p.client(t, 0, client.Options{}), "k")
	ctx, cancel := context.WithCancel(context.Background())
	done := blockOn(ctx, ref, "running")
	require.Equal(t, "running", <-p.gates[1].Entered())
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	exit := <-p.gates[1].Exited()
	assert.True(t, exit.Cancelled, "the method on silo-1 saw its context cancelled")
	eventually(t, func() bool { return p.silos[0].Stats().Links.Pending == 0 }, "the relay entry is gone")
}

func TestCancelRemovesAQueuedRelayedCallWithoutRunningIt(t *testing.T) {
	p := startPair(t, false)
	ref := testgrain.NewCounterRef(p.client(t, 0, client.Options{}), "k")
	first := blockOn(context.Background(), ref, "first")
	require.Equal(t, "first", <-p.gates[1].Entered())
	ctx, cancel := context.WithCancel(context.Background())
	queued := blockOn(ctx, ref, "queued")
	eventually(t, func() bool { return p.silos[1].Stats().Links.Inbound.Active == 1 }, "the queued call reached silo-1")
	cancel()
	require.ErrorIs(t, <-queued, context.Canceled)
	eventually(t, func() bool { return p.silos[1].Stats().Links.Inbound.Cancelled == 1 }, "the cancel reached silo-1")
	p.gates[1].Release("first")
	require.NoError(t, <-first)
	eventually(t, func() bool { return p.silos[1].Stats().Host.SkippedCancelled == 1 }, "dropped without running")
	assert.Equal(t, testgrain.BlockExit{Tag: "first"}, <-p.gates[1].Exited())
	select {
	case tag := <-p.gates[1].Entered():
		t.Fatalf("the cancelled call ran: %s", tag)
	default:
	}
}

// goroutinesIn counts the goroutines whose stack has a frame of fn.
func goroutinesIn(fn string) int {
	count := 0
	for _, g := range goroutineStacks() {
		if strings.Contains(g, fn) {
			count++
		}
	}
	return count
}

// goroutineStacks returns the stack of every goroutine, one per string.
func goroutineStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A relayed call is an entry in the link's call table, not a goroutine:
// with 16 calls held on silo-1, the only goroutines waiting on a call are
// the 16 callers themselves.
func TestNoGoroutineWaitsOnARelayedCall(t *testing.T) {
	p := startPair(t, false)
	c := p.client(t, 0, client.Options{})
	const calls = 16
	dones := make([]<-chan error, calls)
	for i := range dones {
		dones[i] = blockOn(context.Background(), testgrain.NewCounterRef(c, "k"+string(rune('a'+i))), "t"+string(rune('a'+i)))
	}
	for range calls {
		<-p.gates[1].Entered()
	}
	assert.Equal(t, calls, p.silos[0].Stats().Links.Pending, "silo-0 relays every call")
	assert.Equal(t, calls, goroutinesIn("internal/rpc.(*Endpoint).Call("), "only the callers wait in a call")
	for i := range dones {
		p.gates[1].Release("t" + string(rune('a'+i)))
	}
	for _, done := range dones {
		require.NoError(t, <-done)
	}
}

func TestClosingTheLinkFailsRelayedCallsAtOnce(t *testing.T) {
	p := startPair(t, false)
	c := p.client(t, 0, client.Options{})
	const calls = 4
	dones := make([]<-chan error, calls)
	for i := range dones {
		dones[i] = blockOn(context.Background(), testgrain.NewCounterRef(c, "k"+string(rune('a'+i))), "t"+string(rune('a'+i)))
	}
	for range calls {
		<-p.gates[1].Entered()
	}
	link, err := p.silos[0].Link("silo-1")
	require.NoError(t, err)
	require.Equal(t, calls, link.Stats().Pending)
	require.NoError(t, link.Conn().Close())
	for _, done := range dones {
		err := <-done // each call has a minute to go: it returns because the link closed
		require.ErrorIs(t, err, proxy.ErrUnavailable)
		assert.Contains(t, err.Error(), "connection closed")
	}
	assert.Zero(t, link.Stats().Pending, "the relay table is empty")
	_, err = p.silos[0].Link("silo-1")
	assert.ErrorIs(t, err, silo.ErrNoLink)
	for i := range calls {
		p.gates[1].Release("t" + string(rune('a'+i))) // calls that cannot be cancelled run on
	}
}

func TestForwardingStopsAtTheHopLimit(t *testing.T) {
	p := startPair(t, true)
	p.locators[1].PlaceOthers("silo-0") // each silo says the grain is on the other
	ref := testgrain.NewCounterRef(p.client(t, 0, client.Options{}), "loop")
	_, err := ref.Add(context.Background(), &testgrain.AddRequest{Delta: 1}, proxy.WithTimeout(time.Minute))
	require.ErrorIs(t, err, proxy.ErrForwardLimit)
	assert.Contains(t, err.Error(), "forwarded 2 times")
	for _, s := range p.silos {
		assert.Zero(t, s.Stats().Host.Invocations, "the grain never ran")
		assert.False(t, s.Host().IsActive(ref.GrainID()))
		assert.Zero(t, s.Stats().Links.Pending)
	}
}

// errorCase is a call whose failure each caller must report alike.
type errorCase struct {
	name string
	call func(c proxy.Caller) error
	is   []error
}

var errorCases = []errorCase{
	{"grain error with code and detail", func(c proxy.Caller) error {
		_, err := testgrain.NewCounterRef(c, "e").Fail(context.Background(), &testgrain.FailRequest{Code: 404, Message: "no such user", Detail: "ann"})
		return err
	}, []error{proxy.ErrApplication, proxy.NewError(404, "")}},
	{"plain grain error", func(c proxy.Caller) error {
		_, err := testgrain.NewCounterRef(c, "e").Fail(context.Background(), &testgrain.FailRequest{Message: "boom", Plain: true})
		return err
	}, []error{proxy.ErrApplication, proxy.NewError(0, "")}},
	{"panic", func(c proxy.Caller) error {
		_, err := testgrain.NewCounterRef(c, "e").Panic(context.Background(), &testgrain.PanicRequest{})
		return err
	}, []error{proxy.ErrPanic}},
	{"unknown method", func(c proxy.Caller) error {
		m := &proxy.MethodDesc{Service: testgrain.CounterGrainType, Name: "Gone", ID: proxy.MethodID(testgrain.CounterGrainType, "Gone")}
		return proxy.NewRef(c, testgrain.CounterGrainType, "e").Invoke(context.Background(), m, &testgrain.GetRequest{}, &testgrain.GetReply{})
	}, []error{proxy.ErrUnknownMethod}},
	{"unknown grain type", func(c proxy.Caller) error {
		m := &proxy.MethodDesc{Service: "test.Nobody", Name: "Get", ID: proxy.MethodID("test.Nobody", "Get")}
		return proxy.NewRef(c, "test.Nobody", "e").Invoke(context.Background(), m, &testgrain.GetRequest{}, &testgrain.GetReply{})
	}, []error{proxy.ErrUnknownGrainType}},
}

// A caller learns the same of a failed call whichever way it reached the
// grain: in process, over a gateway, or relayed from another silo.
func TestErrorsAreTheSameOnEveryPath(t *testing.T) {
	p := startPair(t, false)
	callers := map[string]proxy.Caller{
		"local":   p.silos[1].Caller(),
		"gateway": p.client(t, 1, client.Options{}),
		"relayed": p.client(t, 0, client.Options{}),
	}
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			var first error
			for path, c := range callers {
				err := tc.call(c)
				require.Error(t, err, path)
				for _, want := range tc.is {
					assert.ErrorIs(t, err, want, path)
				}
				if first == nil {
					first = err
					continue
				}
				assert.Equal(t, first.Error(), err.Error(), "%s says what the others say", path)
				assert.IsType(t, first, err, path)
				var want, got *proxy.Error
				if errors.As(first, &want) {
					require.ErrorAs(t, err, &got, path)
					assert.Equal(t, want.Code, got.Code, path)
					assert.Equal(t, want.Message, got.Message, path)
					require.Equal(t, len(want.Details), len(got.Details), path)
					for i := range want.Details {
						assert.Equal(t, want.Details[i].GetValue(), got.Details[i].GetValue(), path)
					}
				}
			}
			assert.NotContains(t, first.Error(), "unavailable: actor: grain unavailable", "no sentinel said twice")
		})
	}
}

// A relay entry also goes when the connection the request came on closes:
// nobody is left to answer.
func TestClosingTheCallersConnectionEndsItsRelayedCalls(t *testing.T) {
	p := startPair(t, false)
	c := p.client(t, 0, client.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancellable := blockOn(ctx, testgrain.NewCounterRef(c, "a"), "cancellable")
	plain := blockOn(context.Background(), testgrain.NewCounterRef(c, "b"), "plain")
	for range 2 {
		<-p.gates[1].Entered()
	}
	require.Equal(t, 2, p.silos[0].Stats().Links.Pending)
	require.NoError(t, c.Close())
	require.ErrorIs(t, <-cancellable, proxy.ErrUnavailable)
	require.ErrorIs(t, <-plain, proxy.ErrUnavailable)
	eventually(t, func() bool { return p.silos[0].Stats().Links.Pending == 0 }, "both relay entries are gone")
	exit := <-p.gates[1].Exited()
	assert.Equal(t, testgrain.BlockExit{Tag: "cancellable", Cancelled: true}, exit, "the cancellable call was cancelled on silo-1")
	p.gates[1].Release("plain")
}

// Callers that give up on relayed calls, by cancelling or by closing
// their connection, end them wherever the relay is: on the goroutine of
// the directory's answer, with the request not yet sent or already on the
// link. Each call reports why it ended, the relay table empties, and the
// relay never touches a request its origin has released (run with -race).
func TestCallersGivingUpOnRelayedCallsLeaveNothingBehind(t *testing.T) {
	// A directory answers on its own goroutine, so relays start there
	// while the caller's connection gives up on its own.
	p := startPairLocating(t, false, func(l *rpc.StaticLocator) rpc.Locator { return asyncLocator{l} })
	c := p.client(t, 0, client.Options{})
	const calls = 20 // two per grain, within the gate's buffer
	ctx, cancel := context.WithCancel(context.Background())
	var cancellable, plain []<-chan error
	for i := range calls {
		ref := testgrain.NewCounterRef(c, fmt.Sprint("giving-up-", i))
		cancellable = append(cancellable, blockOn(ctx, ref, fmt.Sprint("cancellable-", i)))
		plain = append(plain, blockOn(context.Background(), ref, fmt.Sprint("plain-", i)))
	}
	<-p.gates[1].Entered() // at least one is running; the rest are anywhere
	cancel()
	for _, done := range cancellable {
		require.ErrorIs(t, <-done, context.Canceled)
	}
	require.NoError(t, c.Close())
	for _, done := range plain {
		if err := <-done; !errors.Is(err, client.ErrClosed) { // not yet sent when the client closed
			require.ErrorIs(t, err, proxy.ErrUnavailable)
		}
	}
	eventually(t, func() bool { return p.silos[0].Stats().Links.Pending == 0 }, "the relay table is empty")
	p.gates[1].Open() // the plain calls that reached silo-1 still run there
}

// asyncLocator answers every lookup on a goroutine of its own, as the
// grain directory does when it must ask another silo.
type asyncLocator struct{ static *rpc.StaticLocator }

func (l asyncLocator) Locate(id actor.GrainID, hint string, done func(string, bool, error)) {
	go l.static.Locate(id, hint, done)
}
