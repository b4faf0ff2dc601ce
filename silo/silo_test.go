package silo_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// memberlist's Shutdown does not wait for a probe already under way: the
// probe's goroutine waits for its ack or its ack timer (the probe
// interval, stretched by memberlist's own health score), and so ends on
// its own soon after the shutdown, at times later than goleak's retries
// look. Every other goroutine, memberlist's included, must be gone.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type env struct {
	t     *testing.T
	silo  *silo.Silo
	gate  *testgrain.Gate
	store *persistence.MemoryStore
	clock *clock.Fake // the silo's clock, when the test asked for a fake one
}

type envConfig struct {
	opts      silo.Options
	fakeClock bool
	siloOpts  []silo.Option
}

func startSilo(t *testing.T, cfg envConfig) *env {
	t.Helper()
	e := &env{t: t, gate: testgrain.NewGate(64), store: persistence.NewMemoryStore()}
	cfg.opts.GatewayAddress = "127.0.0.1:0"
	cfg.opts.Name = "test-silo"
	opts := append([]silo.Option{silo.WithLogger(quiet), silo.WithStore(e.store)}, cfg.siloOpts...)
	if cfg.fakeClock {
		e.clock = clock.NewFake(time.Unix(1_700_000_000, 0))
		opts = append(opts, silo.WithClock(e.clock))
	}
	s, err := silo.New(cfg.opts, opts...)
	require.NoError(t, err)
	require.NoError(t, testgrain.RegisterCounterGrain(s, testgrain.New(e.gate)))
	require.NoError(t, s.Start(context.Background()))
	e.silo = s
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, s.Stop(ctx))
	})
	return e
}

func (e *env) client(opts client.Options, o ...client.Option) *client.Client {
	e.t.Helper()
	opts.Gateways = []string{e.silo.GatewayAddr().String()}
	c, err := client.New(opts, append([]client.Option{client.WithLogger(quiet)}, o...)...)
	require.NoError(e.t, err)
	require.NoError(e.t, c.Connect(context.Background()))
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, msg)
}

func TestClientCallsGrainThroughGateway(t *testing.T) {
	e := startSilo(t, envConfig{opts: silo.Options{CollectionAge: 10 * time.Minute, CollectionQuantum: time.Minute}, fakeClock: true})
	c := e.client(client.Options{})
	ref := testgrain.NewCounterRef(c, "visits")
	ctx := context.Background()

	for i := int64(1); i <= 3; i++ {
		r, err := ref.Add(ctx, &testgrain.AddRequest{Delta: 10})
		require.NoError(t, err)
		assert.Equal(t, 10*i, r.Value, "state kept across calls")
	}
	id := actor.GrainID{Type: testgrain.CounterGrainType, Key: "visits"}
	host := e.silo.Host()
	assert.True(t, host.IsActive(id), "activated on first call")
	assert.EqualValues(t, 1, host.Stats().Activations)

	// Idle past the collection age: the grain deactivates and its state
	// is flushed to the store.
	e.clock.Advance(11 * time.Minute)
	eventually(t, func() bool { return !host.IsActive(id) && host.Stats().Deactivations == 1 }, "deactivated when idle, its state written")
	data, _, err := e.store.Read(ctx, persistence.Key{GrainType: id.Type, GrainKey: id.Key, Name: "state"})
	require.NoError(t, err)
	assert.NotEmpty(t, data)

	r, err := ref.Get(ctx, &testgrain.GetRequest{})
	require.NoError(t, err)
	assert.EqualValues(t, 30, r.Value, "came back with its persisted state")
	assert.EqualValues(t, 2, host.Stats().Activations)
}

func TestStateIsFlushedPeriodically(t *testing.T) {
	e := startSilo(t, envConfig{fakeClock: true})
	c := e.client(client.Options{})
	_, err := testgrain.NewCounterRef(c, "k").Add(context.Background(), &testgrain.AddRequest{Delta: 5})
	require.NoError(t, err)
	key := persistence.Key{GrainType: testgrain.CounterGrainType, GrainKey: "k", Name: "state"}
	_, _, err = e.store.Read(context.Background(), key)
	require.ErrorIs(t, err, persistence.ErrNotFound, "nothing written before a flush period")
	e.clock.Advance(silo.DefaultFlushPeriod)
	eventually(t, func() bool {
		_, _, err := e.store.Read(context.Background(), key)
		return err == nil
	}, "written within one flush period")
}

func TestBackgroundCallsUseNoCancellationMachinery(t *testing.T) {
	e := startSilo(t, envConfig{})
	c := e.client(client.Options{})
	ref := testgrain.NewCounterRef(c, "k")

	_, err := ref.Add(context.Background(), &testgrain.AddRequest{Delta: 1})
	require.NoError(t, err)
	_, err = ref.Get(context.Background(), &testgrain.GetRequest{})
	require.NoError(t, err)
	st := e.silo.Stats()
	assert.Zero(t, c.Stats().CancelWatches, "the client watched no context")
	assert.Zero(t, st.Gateway.Inbound.Registered, "the silo registered no cancellation")
	assert.Zero(t, st.Host.TimersArmed, "no timer armed on either path")

	// The same call from a caller that can cancel does set it up.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = ref.Add(ctx, &testgrain.AddRequest{Delta: 1})
	require.NoError(t, err)
	assert.EqualValues(t, 1, c.Stats().CancelWatches)
	assert.EqualValues(t, 1, e.silo.Stats().Gateway.Inbound.Registered)
	assert.Zero(t, e.silo.Stats().Gateway.Inbound.Active, "registration released with the reply")
	assert.Zero(t, e.silo.Stats().Host.TimersArmed)
}

func TestCancelReturnsAtOnceAndReachesRunningGrain(t *testing.T) {
	e := startSilo(t, envConfig{})
	c := e.client(client.Options{})
	ref := testgrain.NewCounterRef(c, "k")

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := ref.Block(ctx, &testgrain.BlockRequest{Tag: "running"})
		errc <- err
	}()
	require.Equal(t, "running", <-e.gate.Entered())
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	exit := <-e.gate.Exited()
	assert.True(t, exit.Cancelled, "the running method saw its context cancelled")
	eventually(t, func() bool { return e.silo.Stats().Gateway.Inbound.Active == 0 }, "registration released")
}

func TestCancelReturnsWithoutWaitingForTheGrain(t *testing.T) {
	e := startSilo(t, envConfig{})
	c := e.client(client.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := testgrain.NewCounterRef(c, "k").Never(ctx, &testgrain.NeverRequest{})
		errc <- err
	}()
	eventually(t, func() bool { return e.silo.Stats().Host.Deferred == 1 }, "call held by the grain")
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled, "the grain never answers, yet the caller returns")
	assert.Zero(t, c.Stats().Pending)
	eventually(t, func() bool { return c.Stats().CancelsSent == 1 }, "cancel pushed")
}

func TestQueuedRequestIsRemovedWithoutRunning(t *testing.T) {
	e := startSilo(t, envConfig{})
	c := e.client(client.Options{})
	ref := testgrain.NewCounterRef(c, "k")

	blocked := make(chan error, 1)
	go func() {
		_, err := ref.Block(context.Background(), &testgrain.BlockRequest{Tag: "busy"})
		blocked <- err
	}()
	require.Equal(t, "busy", <-e.gate.Entered())
	invoked := e.silo.Stats().Host.Invocations

	ctx, cancel := context.WithCancel(context.Background())
	queued := make(chan error, 1)
	go func() {
		_, err := ref.Add(ctx, &testgrain.AddRequest{Delta: 100})
		queued <- err
	}()
	eventually(t, func() bool { return e.silo.Stats().Gateway.Inbound.Registered == 1 }, "request queued behind the busy turn")
	cancel()
	require.ErrorIs(t, <-queued, context.Canceled)
	eventually(t, func() bool { return e.silo.Stats().Gateway.Inbound.Cancelled == 1 }, "cancel reached the silo")

	e.gate.Release("busy")
	require.NoError(t, <-blocked)
	<-e.gate.Exited()
	r, err := ref.Get(context.Background(), &testgrain.GetRequest{})
	require.NoError(t, err)
	assert.Zero(t, r.Value, "the cancelled Add never ran")
	st := e.silo.Stats().Host
	assert.EqualValues(t, 1, st.SkippedCancelled)
	assert.Equal(t, invoked+1, st.Invocations, "only the Get ran after the Block")
}

// rawConn speaks the wire protocol directly, to send what a well-behaved
// client never would.
type rawConn struct {
	conn    *transport.Conn
	replies chan wire.Envelope
}

type rawHandler struct{ replies chan wire.Envelope }

func (h rawHandler) HandleFrame(_ *transport.Conn, body []byte) {
	var env wire.Envelope
	if err := env.Unmarshal(body); err == nil {
		h.replies <- env
	}
}
func (h rawHandler) HandleClose(*transport.Conn, error) { close(h.replies) }

func dialRaw(t *testing.T, e *env) *rawConn {
	t.Helper()
	h := rawHandler{replies: make(chan wire.Envelope, 16)}
	conn, err := transport.Dial(context.Background(), e.silo.GatewayAddr().String(), transport.Options{Identity: transport.Identity{ClusterID: silo.DefaultClusterID}}, h)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(); <-conn.Done() })
	return &rawConn{conn: conn, replies: h.replies}
}

// envFrame sends a raw envelope as a transport frame.
type envFrame struct{ env wire.Envelope }

func (f *envFrame) AppendTo(b []byte) ([]byte, error) { return f.env.AppendTo(b), nil }

func (r *rawConn) send(t *testing.T, env wire.Envelope) {
	t.Helper()
	require.NoError(t, r.conn.Send(&envFrame{env}))
}

func addRequest(t *testing.T, id uint64, key string, delta int64, cancellable bool) wire.Envelope {
	payload, err := proto.Marshal(&testgrain.AddRequest{Delta: delta})
	require.NoError(t, err)
	return wire.Envelope{Kind: wire.KindRequest, CallID: id, GrainType: testgrain.CounterGrainType, GrainKey: key,
		MethodID: testgrain.Counter_Add_Method.ID, Payload: payload, Cancellable: cancellable}
}

func TestCancelBeforeRequestIsHonoured(t *testing.T) {
	e := startSilo(t, envConfig{})
	raw := dialRaw(t, e)
	raw.send(t, wire.Envelope{Kind: wire.KindCancel, CallID: 7})
	raw.send(t, addRequest(t, 7, "k", 5, true))
	reply := <-raw.replies
	assert.Equal(t, uint64(7), reply.CallID)
	assert.Equal(t, wire.StatusCancelled, reply.Status)
	assert.Zero(t, e.silo.Stats().Host.Invocations, "the early-cancelled request never ran")
}

func TestLateCancelReachesNoLaterCall(t *testing.T) {
	e := startSilo(t, envConfig{})
	raw := dialRaw(t, e)
	raw.send(t, addRequest(t, 1, "k", 1, true))
	first := <-raw.replies
	require.Equal(t, wire.StatusOK, first.Status)
	raw.send(t, wire.Envelope{Kind: wire.KindCancel, CallID: 1}) // late
	raw.send(t, addRequest(t, 2, "k", 1, true))
	second := <-raw.replies
	require.Equal(t, uint64(2), second.CallID)
	require.Equal(t, wire.StatusOK, second.Status)
	var out testgrain.AddReply
	require.NoError(t, proto.Unmarshal(second.Payload, &out))
	assert.EqualValues(t, 2, out.Value)
	assert.Zero(t, e.silo.Stats().Gateway.Inbound.Cancelled)
}

func TestDuplicateActiveCallIDIsRejected(t *testing.T) {
	e := startSilo(t, envConfig{})
	raw := dialRaw(t, e)
	block, err := proto.Marshal(&testgrain.BlockRequest{Tag: "dup"})
	require.NoError(t, err)
	raw.send(t, wire.Envelope{Kind: wire.KindRequest, CallID: 3, GrainType: testgrain.CounterGrainType, GrainKey: "k",
		MethodID: testgrain.Counter_Block_Method.ID, Payload: block, Cancellable: true})
	require.Equal(t, "dup", <-e.gate.Entered())
	raw.send(t, addRequest(t, 3, "k", 1, true))
	reply := <-raw.replies
	assert.Equal(t, wire.StatusBadRequest, reply.Status)
	assert.Contains(t, reply.Error, "already active")
	e.gate.Release("dup")
	reply = <-raw.replies
	assert.Equal(t, wire.StatusOK, reply.Status)
}

func TestBudgets(t *testing.T) {
	e := startSilo(t, envConfig{})
	c := e.client(client.Options{ResponseTimeout: 10 * time.Second})
	ref := testgrain.NewCounterRef(c, "k")
	ctx := context.Background()

	r, err := ref.Add(ctx, &testgrain.AddRequest{})
	require.NoError(t, err)
	assert.EqualValues(t, 8*time.Second, r.BudgetNanos, "80% of the client's response timeout")

	r, err = ref.Add(ctx, &testgrain.AddRequest{}, proxy.WithTimeout(5*time.Second))
	require.NoError(t, err)
	assert.EqualValues(t, 4*time.Second, r.BudgetNanos, "a per-call timeout overrides the default")

	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	r, err = ref.Add(short, &testgrain.AddRequest{})
	require.NoError(t, err)
	assert.LessOrEqual(t, r.BudgetNanos, int64(2*time.Second), "the caller's shorter deadline wins")
	assert.Greater(t, r.BudgetNanos, int64(time.Second))

	g, err := ref.Get(ctx, &testgrain.GetRequest{})
	require.NoError(t, err)
	assert.Zero(t, g.BudgetNanos, "unbounded methods get no budget")

	expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel2()
	_, err = ref.Add(expired, &testgrain.AddRequest{Delta: 1000})
	require.ErrorIs(t, err, proxy.ErrBudgetExpired)
	g, err = ref.Get(ctx, &testgrain.GetRequest{})
	require.NoError(t, err)
	assert.Zero(t, g.Value, "an expired budget changes nothing")
}

func TestHostedCallerUsesSiloTimeoutWhateverTheOrder(t *testing.T) {
	s, err := silo.New(silo.Options{DisableGateway: true, ResponseTimeout: 5 * time.Second}, silo.WithLogger(quiet))
	require.NoError(t, err)
	before := s.Caller() // obtained before registration and Start
	require.NoError(t, testgrain.RegisterCounterGrain(s, testgrain.New(nil)))
	refBefore := testgrain.NewCounterRef(before, "k")
	require.NoError(t, s.Start(context.Background()))
	defer func() { require.NoError(t, s.Stop(context.Background())) }()
	refAfter := testgrain.NewCounterRef(s.Caller(), "k")

	for _, ref := range []testgrain.CounterRef{refBefore, refAfter} {
		r, err := ref.Add(context.Background(), &testgrain.AddRequest{Delta: 1})
		require.NoError(t, err)
		assert.EqualValues(t, 4*time.Second, r.BudgetNanos)
	}
	assert.Equal(t, 5*time.Second, s.Caller().ResponseTimeout())
}

func TestNeverAnsweringGrainTimesOut(t *testing.T) {
	e := startSilo(t, envConfig{})
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	c := e.client(client.Options{ResponseTimeout: 200 * time.Millisecond}, client.WithClock(fake))
	errc := make(chan error, 1)
	go func() {
		_, err := testgrain.NewCounterRef(c, "k").Never(context.Background(), &testgrain.NeverRequest{})
		errc <- err
	}()
	eventually(t, func() bool { return e.silo.Stats().Host.Deferred == 1 }, "call held by the grain")
	fake.Advance(190 * time.Millisecond)
	select {
	case err := <-errc:
		t.Fatalf("returned before the response timeout: %v", err)
	default:
	}
	fake.Advance(10 * time.Millisecond)
	err := <-errc
	require.ErrorIs(t, err, proxy.ErrTimeout)
	var te *proxy.TimeoutError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, 200*time.Millisecond, te.Timeout)
	st := c.Stats()
	assert.Zero(t, st.Pending, "nothing left pending")
	assert.EqualValues(t, 1, st.Timeouts)
	assert.Zero(t, fake.Pending(), "the timeout clock disarms when nothing is pending")
}

func TestPanicAnswersErrorAndSiloKeepsServing(t *testing.T) {
	e := startSilo(t, envConfig{})
	c := e.client(client.Options{})
	ref := testgrain.NewCounterRef(c, "k")
	_, err := ref.Add(context.Background(), &testgrain.AddRequest{Delta: 3})
	require.NoError(t, err)
	_, err = ref.Panic(context.Background(), &testgrain.PanicRequest{})
	require.ErrorIs(t, err, proxy.ErrPanic)
	assert.Contains(t, err.Error(), "asked to panic")
	host := e.silo.Host()
	eventually(t, func() bool { return host.Stats().Deactivations == 1 }, "the activation was deactivated")
	r, err := ref.Get(context.Background(), &testgrain.GetRequest{})
	require.NoError(t, err)
	assert.EqualValues(t, 3, r.Value, "reactivated with its state")
	assert.EqualValues(t, 2, host.Stats().Activations)
}

func TestUnknownGrainTypeAndMethod(t *testing.T) {
	e := startSilo(t, envConfig{})
	c := e.client(client.Options{})
	bogus := proxy.NewRef(c, "no.such.Grain", "k")
	err := bogus.Invoke(context.Background(), &proxy.MethodDesc{Service: "no.such.Grain", Name: "X", ID: 1}, &testgrain.GetRequest{}, &testgrain.GetReply{})
	require.ErrorIs(t, err, proxy.ErrUnknownGrainType)

	ref := proxy.NewRef(c, testgrain.CounterGrainType, "k")
	err = ref.Invoke(context.Background(), &proxy.MethodDesc{Service: testgrain.CounterGrainType, Name: "Nope", ID: 12345}, &testgrain.GetRequest{}, &testgrain.GetReply{})
	require.ErrorIs(t, err, proxy.ErrUnknownMethod)

	_, err = testgrain.NewCounterRef(c, "k").Add(context.Background(), &testgrain.AddRequest{Delta: 1})
	require.NoError(t, err, "the connection still serves")
}

// rawBody is a frame body sent as it is.
type rawBody []byte

func (b rawBody) AppendTo(dst []byte) ([]byte, error) { return append(dst, b...), nil }

// nopHandler ignores what arrives.
type nopHandler struct{}

func (nopHandler) HandleFrame(*transport.Conn, []byte) {}
func (nopHandler) HandleClose(*transport.Conn, error)  {}

func TestMalformedAndOversizeFramesCloseOnlyThatConnection(t *testing.T) {
	e := startSilo(t, envConfig{opts: silo.Options{MaxFrameSize: 1024}})
	good := e.client(client.Options{})
	ref := testgrain.NewCounterRef(good, "k")

	for name, body := range map[string][]byte{
		"malformed": {0xff, 0xff, 0xff},
		"oversize":  make([]byte, 4096),
		"bad kind":  {0x08, 0x63},
	} {
		t.Run(name, func(t *testing.T) {
			// A peer that completed the handshake, then sends a frame the
			// silo cannot take.
			conn, err := transport.Dial(context.Background(), e.silo.GatewayAddr().String(),
				transport.Options{MaxFrameSize: 1 << 20, Identity: transport.Identity{ClusterID: silo.DefaultClusterID}}, nopHandler{})
			require.NoError(t, err)
			defer conn.Close()
			require.NoError(t, conn.Send(rawBody(body)))
			select {
			case <-conn.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the silo kept the offending connection")
			}
			_, err = ref.Add(context.Background(), &testgrain.AddRequest{Delta: 1})
			require.NoError(t, err, "and keeps serving others")
		})
	}
}

func TestOversizeRequestIsRefusedAndChangesNothing(t *testing.T) {
	e := startSilo(t, envConfig{})
	c := e.client(client.Options{MaxFrameSize: 256})
	// A message that cannot fit in a frame is refused before it is sent.
	bogus := proxy.NewRef(c, testgrain.CounterGrainType, "k")
	big := &testgrain.BlockRequest{Tag: strings.Repeat("x", 1024)}
	err := bogus.Invoke(context.Background(), testgrain.Counter_Block_Method, big, &testgrain.BlockReply{})
	require.ErrorIs(t, err, transport.ErrFrameTooLarge)
	assert.Zero(t, c.Stats().Pending)
	r, err := testgrain.NewCounterRef(c, "k").Get(context.Background(), &testgrain.GetRequest{})
	require.NoError(t, err)
	assert.Zero(t, r.Value)
	assert.EqualValues(t, 1, e.silo.Stats().Host.Invocations, "only the Get reached the grain")
}

func TestFilters(t *testing.T) {
	var incoming, outgoing atomic.Int64
	in := func(ctx context.Context, call *proxy.IncomingCall, next proxy.IncomingInvoker) (proto.Message, error) {
		incoming.Add(1)
		return next(ctx, call)
	}
	out := func(ctx context.Context, call proxy.Call, i, o proto.Message, next proxy.Invoker) error {
		outgoing.Add(1)
		assert.Equal(t, testgrain.CounterGrainType, call.Target.Type)
		return next(ctx, call, i, o)
	}
	e := startSilo(t, envConfig{siloOpts: []silo.Option{silo.WithIncomingFilters(in)}})
	c := e.client(client.Options{}, client.WithOutgoingFilters(out))
	r, err := testgrain.NewCounterRef(c, "k").Add(context.Background(), &testgrain.AddRequest{Delta: 2})
	require.NoError(t, err)
	assert.EqualValues(t, 2, r.Value)
	assert.EqualValues(t, 1, incoming.Load())
	assert.EqualValues(t, 1, outgoing.Load())
}

func TestStopFlushesStateAndRefusesCalls(t *testing.T) {
	store := persistence.NewMemoryStore()
	s, err := silo.New(silo.Options{GatewayAddress: "127.0.0.1:0"}, silo.WithLogger(quiet), silo.WithStore(store))
	require.NoError(t, err)
	require.NoError(t, testgrain.RegisterCounterGrain(s, testgrain.New(nil)))
	require.NoError(t, s.Start(context.Background()))
	c, err := client.New(client.Options{Gateways: []string{s.GatewayAddr().String()}}, client.WithLogger(quiet))
	require.NoError(t, err)
	defer c.Close()
	_, err = testgrain.NewCounterRef(c, "k").Add(context.Background(), &testgrain.AddRequest{Delta: 9})
	require.NoError(t, err)
	require.NoError(t, s.Stop(context.Background()))
	require.NoError(t, s.Stop(context.Background()), "stop is idempotent")

	data, _, err := store.Read(context.Background(), persistence.Key{GrainType: testgrain.CounterGrainType, GrainKey: "k", Name: "state"})
	require.NoError(t, err)
	g := &testgrain.Grain{}
	require.NoError(t, g.LoadState(data))

	_, err = testgrain.NewCounterRef(c, "k").Get(context.Background(), &testgrain.GetRequest{})
	require.ErrorIs(t, err, proxy.ErrUnavailable)
	require.ErrorIs(t, testgrain.RegisterCounterGrain(s, testgrain.New(nil)), silo.ErrStarted)
}

func TestOptionsValidate(t *testing.T) {
	_, err := silo.New(silo.Options{GatewayAddress: "nope", ResponseTimeout: -1, FlushPeriod: -1, MaxFrameSize: 1, TimeoutResolution: -1})
	require.Error(t, err)
	for _, field := range []string{"GatewayAddress", "ResponseTimeout", "FlushPeriod", "MaxFrameSize", "TimeoutResolution"} {
		assert.Contains(t, err.Error(), field)
	}
	_, err = client.New(client.Options{})
	require.ErrorContains(t, err, "Gateway")
	_, err = client.New(client.Options{Gateways: []string{"h:1"}, ResponseTimeout: -1, DialTimeout: -1, MaxFrameSize: 2 << 30, TimeoutResolution: -1})
	require.Error(t, err)
	for _, field := range []string{"ResponseTimeout", "DialTimeout", "MaxFrameSize", "TimeoutResolution"} {
		assert.Contains(t, err.Error(), field)
	}
	assert.NotContains(t, err.Error(), "Gateway", "a valid field is not reported")
}

func TestClientReconnectsAfterTheSiloRestarts(t *testing.T) {
	store := persistence.NewMemoryStore()
	start := func(addr string) *silo.Silo {
		s, err := silo.New(silo.Options{GatewayAddress: addr}, silo.WithLogger(quiet), silo.WithStore(store))
		require.NoError(t, err)
		require.NoError(t, testgrain.RegisterCounterGrain(s, testgrain.New(nil)))
		require.NoError(t, s.Start(context.Background()))
		return s
	}
	first := start("127.0.0.1:0")
	addr := first.GatewayAddr().String()
	c, err := client.New(client.Options{Gateways: []string{addr}}, client.WithLogger(quiet))
	require.NoError(t, err)
	defer c.Close()
	ref := testgrain.NewCounterRef(c, "k")
	_, err = ref.Add(context.Background(), &testgrain.AddRequest{Delta: 2})
	require.NoError(t, err)
	require.NoError(t, first.Stop(context.Background()))

	_, err = ref.Get(context.Background(), &testgrain.GetRequest{})
	require.ErrorIs(t, err, proxy.ErrUnavailable, "no silo: the call fails, it does not hang")

	second := start(addr)
	defer func() { require.NoError(t, second.Stop(context.Background())) }()
	r, err := ref.Add(context.Background(), &testgrain.AddRequest{Delta: 3})
	require.NoError(t, err, "the client dials the new silo")
	assert.EqualValues(t, 5, r.Value, "and the grain's state survived the restart")
}
