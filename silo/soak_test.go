package silo_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/client"
	cancelreg "github.com/granary-go/granary/internal/cancel"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/silo"
)

// The soak's settings. The limits are small so that a hostile connection
// reaches each of them at once, and the time rules short so that a cycle
// through every kind takes a second or two; the valid clients stay under
// every limit.
const (
	soakDuration     = 5 * time.Second
	soakHostile      = 3 // hostile connections at a time, each cycling through every kind
	soakValid        = 4 // valid clients, each with its own connection
	soakValidWorkers = 2 // callers per valid client: under soakMaxInFlight
	soakKeysPerValid = 4 // grains each valid client adds to: under soakBurst
	soakMaxInFlight  = 8
	soakBurst        = 16
	soakCancels      = 5000
	// soakEarlyCancelCap is how many early cancels a connection remembers.
	soakEarlyCancelCap = cancelreg.DefaultMaxEarlyCancels
	// soakHeapBound is how far above its baseline the heap may stay once
	// everything has closed and every activation is collected: the state
	// the memory store keeps for each grain the soak wrote (a few hundred
	// small entries), with room for the runtime's own variation.
	soakHeapBound = 1 << 20
	// soakMaxParkedWorkers is how many idle workers the activation host
	// keeps (internal/host's maxIdleWorkers).
	soakMaxParkedWorkers = 256
)

var soakToken = &client.Token{Name: "soak", Secret: []byte("the soak's client token, 32 b!!!")}

// Valid traffic and every malformed kind of the network edge, at once, on
// one gateway: every valid call is answered with success, no acknowledged
// add is lost, every rejection is counted, and once everything has closed
// the goroutines and the heap come back to their baseline.
func TestSoakValidTrafficSurvivesEveryMalformedKind(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak runs for seconds")
	}
	store := persistence.NewMemoryStore()
	s, err := silo.New(silo.Options{
		Name: "soak", GatewayAddress: "127.0.0.1:0",
		CollectionAge: 300 * time.Millisecond, // the flood's activations go away
		Limits: silo.Limits{
			MaxInFlight: soakMaxInFlight, ActivationRate: 1, ActivationBurst: soakBurst,
			// Every connection busy at once may have as many new
			// activations under way as its callers.
			SharedActivations: (soakValid + soakHostile) * soakValidWorkers,
			HandshakeTimeout:  time.Second, MinReadRate: 1 << 10, ReadRateWindow: 400 * time.Millisecond,
		},
		Security: silo.Security{ClientTokens: []silo.ClientToken{{Name: soakToken.Name, Secret: soakToken.Secret}}},
	}, silo.WithLogger(quiet), silo.WithStore(store))
	require.NoError(t, err)
	require.NoError(t, testgrain.RegisterCounterGrain(s, testgrain.New(nil)))
	require.NoError(t, s.Start(context.Background()))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, s.Stop(ctx))
	}()
	addr := s.GatewayAddr().String()
	// Taken on a goroutine of its own, as Eventually takes the later ones,
	// so that the test's goroutine counts in both.
	baseline := make(chan []string, 1)
	go func() { others, _ := goroutines(); baseline <- others }()
	baseGoroutines := <-baseline
	baseHeap := heapAfterGC()

	ctx, stop := context.WithTimeout(context.Background(), soakDuration)
	defer stop()
	var wg sync.WaitGroup
	valid := make([]*validClient, soakValid)
	for i := range valid {
		valid[i] = startValidClient(t, addr, i)
		for w := range soakValidWorkers {
			wg.Add(1)
			go func() { defer wg.Done(); valid[i].run(ctx, w) }()
		}
	}
	hostileErrs := make(chan error, soakHostile)
	cycles := make([]int, soakHostile)
	for h := range soakHostile {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hostileErrs <- runHostile(ctx, s, addr, h, &cycles[h])
		}()
	}
	wg.Wait()
	close(hostileErrs)
	for err := range hostileErrs {
		require.NoError(t, err, "a hostile connection was not treated as expected")
	}
	t.Logf("hostile cycles through every kind: %v", cycles)

	// Every valid call was answered with success, and the grains hold
	// exactly the adds acknowledged.
	acked := 0
	for _, v := range valid {
		require.NoError(t, v.failed(), "a valid call failed")
		for key, want := range v.acked() {
			r, err := testgrain.NewCounterRef(v.client, key).Get(context.Background(), &testgrain.GetRequest{})
			require.NoError(t, err)
			assert.Equal(t, want, r.Value, "grain %s lost acknowledged adds", key)
			acked += int(want)
		}
		require.NoError(t, v.client.Close())
	}
	require.NotZero(t, acked)
	t.Logf("valid adds acknowledged: %d", acked)

	// Every rejection was counted.
	st := s.Stats()
	for name, n := range map[string]int64{
		"calls in flight":       st.Rejected.Overloaded,
		"activation budget":     st.Rejected.OverBudget,
		"bad key and payload":   st.Rejected.BadRequests,
		"unknown grain type":    st.Rejected.UnknownGrainType,
		"unknown method":        st.Rejected.UnknownMethod,
		"malformed frame":       st.Rejected.MalformedFrames,
		"unknown frame kind":    st.Rejected.UnknownKinds,
		"refused activations":   st.Host.RefusedActivations,
		"version":               int64(st.GatewayListener.HandshakeVersion),
		"cluster id":            int64(st.GatewayListener.HandshakeCluster),
		"token":                 int64(st.GatewayListener.HandshakeCredential),
		"handshake never sent":  int64(st.GatewayListener.HandshakeTimeout),
		"frame over the limit":  int64(st.GatewayListener.FrameTooLarge),
		"truncated frame":       int64(st.GatewayListener.Truncated),
		"stalled and trickling": int64(st.GatewayListener.ReadTooSlow),
	} {
		assert.NotZero(t, n, "no rejection counted for %s", name)
	}

	// Once everything has closed and the activations are collected, the
	// goroutines and the heap come back.
	eventually(t, func() bool {
		st := s.Stats()
		return st.Clients == 0 && st.GatewayListener.Open == 0 && st.Host.Active == 0
	}, "every connection closed and every activation collected")
	var others []string
	var parked int
	if !assert.Eventually(t, func() bool {
		others, parked = goroutines()
		return len(others) <= len(baseGoroutines) && parked <= soakMaxParkedWorkers
	}, 10*time.Second, 10*time.Millisecond, "goroutines back to the baseline") {
		t.Fatalf("%d goroutines and %d parked workers; at the baseline:\n%s\n\nnow:\n%s", len(others), parked,
			strings.Join(baseGoroutines, "\n\n"), strings.Join(others, "\n\n"))
	}
	var heap int64
	if !assert.Eventually(t, func() bool {
		heap = heapAfterGC()
		return heap-baseHeap < soakHeapBound
	}, 10*time.Second, 50*time.Millisecond, "the heap back within its bound") {
		t.Fatalf("the heap stays %d KiB above its baseline of %d KiB", (heap-baseHeap)>>10, baseHeap>>10)
	}
	t.Logf("goroutines %d (baseline %d) and %d parked workers; heap %d KiB above its baseline of %d KiB",
		len(others), len(baseGoroutines), parked, (heap-baseHeap)>>10, baseHeap>>10)
}

// goroutines returns the stacks of the goroutines, apart from its caller's
// and the activation host's parked workers, which it counts: the host keeps
// up to a bound of them, so that a wake-up does not pay for a new
// goroutine's stack.
func goroutines() (others []string, parked int) {
	for _, g := range goroutineStacks() {
		switch {
		case strings.Contains(g, "silo_test.goroutines()"):
			// The goroutine asking: the test's, or the one Eventually runs
			// its condition on.
		case strings.Contains(g, "host.(*workerDispatcher).worker"):
			parked++
		default:
			others = append(others, g)
		}
	}
	return others, parked
}

func heapAfterGC() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// validClient adds to its own grains and counts the adds acknowledged.
type validClient struct {
	client *client.Client
	name   string

	mu     sync.Mutex
	counts map[string]int64
	err    error
}

func startValidClient(t *testing.T, addr string, i int) *validClient {
	c, err := client.New(client.Options{Gateways: []string{addr}, Token: soakToken, ResponseTimeout: 10 * time.Second},
		client.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, c.Connect(context.Background()))
	t.Cleanup(func() { _ = c.Close() })
	return &validClient{client: c, name: fmt.Sprint("valid-", i), counts: make(map[string]int64)}
}

func (v *validClient) run(ctx context.Context, worker int) {
	for n := 0; ctx.Err() == nil; n++ {
		key := fmt.Sprintf("%s-%d", v.name, (n*soakValidWorkers+worker)%soakKeysPerValid)
		// Calls are made without ctx: a call cut short by the soak's end
		// would leave unknown whether its add was done.
		_, err := testgrain.NewCounterRef(v.client, key).Add(context.Background(), &testgrain.AddRequest{Delta: 1})
		v.mu.Lock()
		if err != nil {
			v.err = errors.Join(v.err, fmt.Errorf("add to %s: %w", key, err))
			v.mu.Unlock()
			return
		}
		v.counts[key]++
		v.mu.Unlock()
	}
}

func (v *validClient) acked() map[string]int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]int64, len(v.counts))
	for k, n := range v.counts {
		out[k] = n
	}
	return out
}

func (v *validClient) failed() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err
}

// hostileKind is one way of misbehaving; it returns an error when the silo
// did not treat it as it should.
type hostileKind struct {
	name string
	run  func(h *hostile) error
}

// hostile is one hostile connection slot, in one cycle.
type hostile struct {
	silo *silo.Silo
	addr string
	id   string // names its grains, unique per slot and cycle
}

// runHostile cycles through every hostile kind, starting at a different
// one in each slot, until ctx ends.
func runHostile(ctx context.Context, s *silo.Silo, addr string, slot int, cycles *int) error {
	for cycle := 0; ; cycle++ {
		for i := range hostileKinds {
			if ctx.Err() != nil {
				*cycles = cycle
				return nil
			}
			k := hostileKinds[(i+slot)%len(hostileKinds)]
			h := &hostile{silo: s, addr: addr, id: fmt.Sprintf("hostile-%d-%d", slot, cycle)}
			if err := k.run(h); err != nil {
				return fmt.Errorf("%s: %w", k.name, err)
			}
		}
	}
}

var hostileKinds = []hostileKind{
	{"announced the largest frame, then stalled", func(h *hostile) error {
		nc, err := h.hijack()
		if err != nil {
			return err
		}
		defer nc.Close()
		if _, err := nc.Write(append(frameHeader(silo.DefaultMaxFrameSize), make([]byte, 100)...)); err != nil {
			return err
		}
		return awaitClose(nc, "the read rule did not close a stalled frame")
	}},
	{"announced a frame over the limit", func(h *hostile) error {
		nc, err := h.hijack()
		if err != nil {
			return err
		}
		defer nc.Close()
		if _, err := nc.Write(frameHeader(silo.DefaultMaxFrameSize + 1)); err != nil {
			return err
		}
		return awaitClose(nc, "a frame over the limit was not refused")
	}},
	{"truncated frame", func(h *hostile) error {
		nc, err := h.hijack()
		if err != nil {
			return err
		}
		_, err = nc.Write(append(frameHeader(100), make([]byte, 10)...))
		return errors.Join(err, nc.Close())
	}},
	{"trickled a frame below the minimum rate", func(h *hostile) error {
		nc, err := h.hijack()
		if err != nil {
			return err
		}
		defer nc.Close()
		closed := make(chan error, 1)
		go func() { closed <- awaitClose(nc, "the read rule did not close a trickling frame") }()
		if _, err := nc.Write(frameHeader(1000)); err != nil {
			return err
		}
		tick := time.NewTicker(20 * time.Millisecond) // 50 bytes/s against a minimum of 1 KiB/s
		defer tick.Stop()
		for {
			select {
			case err := <-closed:
				return err
			case <-tick.C:
				_, _ = nc.Write([]byte{0}) // fails once the silo closed it
			}
		}
	}},
	{"never sent the handshake", func(h *hostile) error {
		nc, err := net.Dial("tcp", h.addr)
		if err != nil {
			return err
		}
		defer nc.Close()
		return awaitClose(nc, "the handshake deadline did not close a silent peer")
	}},
	{"another protocol version", func(h *hostile) error {
		nc, err := net.Dial("tcp", h.addr)
		if err != nil {
			return err
		}
		defer nc.Close()
		if _, err := nc.Write(helloOfVersion(99)); err != nil {
			return err
		}
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		answer, err := io.ReadAll(nc)
		if !isConnectionEnd(err) {
			return fmt.Errorf("no clear refusal: %w", err)
		}
		if !bytes.HasPrefix(answer, []byte{'G', 'R', 'N', 'Y', handshakeRefusal}) {
			return fmt.Errorf("answered %q, not a refusal", answer)
		}
		return nil
	}},
	{"wrong cluster id", func(h *hostile) error {
		return h.refusedHandshake(func(o *transport.Options) { o.Identity.ClusterID = "another-cluster" }, transport.ErrClusterMismatch)
	}},
	{"wrong token", func(h *hostile) error {
		return h.refusedHandshake(func(o *transport.Options) {
			o.Token = &transport.Token{Name: soakToken.Name, Secret: []byte("not the token, but long enough")}
		}, transport.ErrCredentialRefused)
	}},
	{"bad UTF-8 key", func(h *hostile) error {
		return h.badRequest(func(env *wire.Envelope) { env.GrainKey = "bad-\xff" }, wire.StatusBadRequest)
	}},
	{"unknown grain type", func(h *hostile) error {
		return h.badRequest(func(env *wire.Envelope) { env.GrainType = "no.such.Grain" }, wire.StatusUnknownGrainType)
	}},
	{"unknown method", func(h *hostile) error {
		return h.badRequest(func(env *wire.Envelope) { env.MethodID = 12345 }, wire.StatusUnknownMethod)
	}},
	{"undecodable payload", func(h *hostile) error {
		return h.badRequest(func(env *wire.Envelope) { env.Payload = []byte{0xff, 0xff, 0xff} }, wire.StatusBadRequest)
	}},
	{"malformed frame", func(h *hostile) error {
		return h.closingFrame([]byte{0xff, 0xff, 0xff})
	}},
	{"unknown frame kind", func(h *hostile) error {
		return h.closingFrame([]byte{0x08, 0x63})
	}},
	{"a flood of cancels for unknown calls", func(h *hostile) error {
		r, err := h.dial()
		if err != nil {
			return err
		}
		defer r.close()
		for i := range soakCancels {
			if err := r.conn.Send(&envFrame{wire.Envelope{Kind: wire.KindCancel, CallID: 1_000_000 + uint64(i)}}); err != nil {
				return err
			}
		}
		// The reader takes frames in order: once this is answered, every
		// cancel before it was handled.
		if err := r.expect(h.add(1, h.id), wire.StatusOK); err != nil {
			return err
		}
		// The stats sum every open connection, other slots' floods
		// included: each connection remembers at most its cap.
		st := h.silo.Stats()
		in, remembered := st.Gateway.Inbound, soakEarlyCancelCap*st.Clients
		if in.EarlyCancels < soakCancels || in.Early > remembered {
			return fmt.Errorf("early cancels counted %d (want at least %d), remembered %d (want at most %d)",
				in.EarlyCancels, soakCancels, in.Early, remembered)
		}
		return nil
	}},
	{"more calls in flight than allowed", func(h *hostile) error {
		r, err := h.dial()
		if err != nil {
			return err
		}
		defer r.close() // cancels the blocked calls
		block, err := proto.Marshal(&testgrain.BlockRequest{Tag: h.id})
		if err != nil {
			return err
		}
		for i := range soakMaxInFlight {
			env := wire.Envelope{Kind: wire.KindRequest, CallID: uint64(i + 1), GrainType: testgrain.CounterGrainType, GrainKey: h.id,
				MethodID: testgrain.Counter_Block_Method.ID, Payload: block, Cancellable: true}
			if err := r.conn.Send(&envFrame{env}); err != nil {
				return err
			}
		}
		for i := range 4 {
			if err := r.expect(h.add(uint64(100+i), h.id), wire.StatusOverloaded); err != nil {
				return err
			}
		}
		return nil
	}},
	{"a flood of new activations", func(h *hostile) error {
		r, err := h.dial()
		if err != nil {
			return err
		}
		defer r.close()
		// One at a time, so that the limit met is the budget, not the calls
		// in flight.
		overloaded := 0
		for i := range soakBurst + 8 {
			if err := r.conn.Send(&envFrame{h.add(uint64(i+1), fmt.Sprintf("%s-flood-%d", h.id, i))}); err != nil {
				return err
			}
			env, err := r.next()
			if err != nil {
				return err
			}
			switch env.Status {
			case wire.StatusOK:
			case wire.StatusOverloaded:
				overloaded++
			default:
				return fmt.Errorf("status %d: %s", env.Status, env.Error)
			}
		}
		if overloaded == 0 {
			return errors.New("the activation budget refused nothing")
		}
		return nil
	}},
}

// The handshake's framing (docs/security.md): magic, type, body length.
const (
	handshakeHello   = 1
	handshakeRefusal = 5
)

// helloOfVersion is the start of a hello of another protocol version: the
// listener refuses it before it reads the rest.
func helloOfVersion(version uint16) []byte {
	body := binary.BigEndian.AppendUint16(nil, version)
	body = append(body, make([]byte, 60)...)
	b := append([]byte("GRNY"), handshakeHello)
	b = binary.BigEndian.AppendUint16(b, uint16(len(body)))
	return append(b, body...)
}

// frameHeader is a frame's length prefix announcing n bytes.
func frameHeader(n int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

// awaitClose waits until the silo closes nc, reading and dropping what
// arrives.
func awaitClose(nc net.Conn, failure string) error {
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, nc)
	if !isConnectionEnd(err) {
		return fmt.Errorf("%s: %w", failure, err)
	}
	return nil
}

// isConnectionEnd tells a connection the peer closed (io.Copy and
// io.ReadAll return nil at EOF) from a read that timed out.
func isConnectionEnd(err error) bool {
	var ne net.Error
	return err == nil || !(errors.As(err, &ne) && ne.Timeout())
}

// options are a valid client's transport settings.
func (h *hostile) options() transport.Options {
	return transport.Options{
		Identity: transport.Identity{Role: transport.RoleClient, ClusterID: silo.DefaultClusterID},
		Token:    &transport.Token{Name: soakToken.Name, Secret: soakToken.Secret},
	}
}

// hijack passes a valid client's handshake through a relay, then stops
// relaying and returns the relay's socket to the gateway: a connection past
// the handshake, on which the test writes bytes no transport would.
func (h *hostile) hijack() (net.Conn, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dialled := make(chan error, 1)
	var conn *transport.Conn
	go func() {
		var err error
		conn, err = transport.Dial(ctx, ln.Addr().String(), h.options(), nopHandler{})
		dialled <- err
	}()
	down, err := ln.Accept()
	if err != nil {
		return nil, errors.Join(err, <-dialled)
	}
	defer down.Close()
	up, err := net.Dial("tcp", h.addr)
	if err != nil {
		_ = down.Close()
		return nil, errors.Join(err, <-dialled)
	}
	var relays sync.WaitGroup
	relays.Add(2)
	// Plain Reader and Writer, so that io.Copy makes no splice that could
	// hold bytes when the relay stops.
	go func() { defer relays.Done(); _, _ = io.Copy(struct{ io.Writer }{up}, struct{ io.Reader }{down}) }()
	go func() { defer relays.Done(); _, _ = io.Copy(struct{ io.Writer }{down}, struct{ io.Reader }{up}) }()
	err = <-dialled
	// The handshake is over (or failed) and nobody sends now: stop both
	// relays without losing a byte, then give the socket to the test.
	_ = up.SetReadDeadline(time.Now())
	if conn != nil {
		_ = conn.Close()
		<-conn.Done()
	}
	_ = down.Close()
	relays.Wait()
	if err != nil {
		_ = up.Close()
		return nil, err
	}
	_ = up.SetReadDeadline(time.Time{})
	return up, nil
}

// refusedHandshake dials with options a valid client's changed by change,
// and checks that the handshake is refused with want.
func (h *hostile) refusedHandshake(change func(*transport.Options), want error) error {
	opts := h.options()
	change(&opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := transport.Dial(ctx, h.addr, opts, nopHandler{})
	if err == nil {
		_ = conn.Close()
		return errors.New("the handshake passed")
	}
	if !errors.Is(err, want) {
		return fmt.Errorf("refused with %w, want %w", err, want)
	}
	return nil
}

// envelopes is a connection that passed the handshake and sends
// hand-made envelopes.
type envelopes struct {
	conn    *transport.Conn
	replies chan wire.Envelope
}

func (h *hostile) dial() (*envelopes, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	replies := make(chan wire.Envelope, soakBurst+16)
	conn, err := transport.Dial(ctx, h.addr, h.options(), rawHandler{replies: replies})
	if err != nil {
		return nil, err
	}
	return &envelopes{conn: conn, replies: replies}, nil
}

func (r *envelopes) close() {
	_ = r.conn.Close()
	<-r.conn.Done()
}

func (r *envelopes) next() (wire.Envelope, error) {
	select {
	case env, ok := <-r.replies:
		if !ok {
			return env, fmt.Errorf("the connection closed: %w", r.conn.Err())
		}
		return env, nil
	case <-time.After(10 * time.Second):
		return wire.Envelope{}, errors.New("no reply")
	}
}

// expect sends env and checks the reply's status.
func (r *envelopes) expect(env wire.Envelope, want wire.Status) error {
	if err := r.conn.Send(&envFrame{env}); err != nil {
		return err
	}
	reply, err := r.next()
	if err != nil {
		return err
	}
	if reply.CallID != env.CallID || reply.Status != want {
		return fmt.Errorf("call %d answered with status %d (%s), want %d for call %d", reply.CallID, reply.Status, reply.Error, want, env.CallID)
	}
	return nil
}

// add is a request to add 1 to the grain key.
func (h *hostile) add(id uint64, key string) wire.Envelope {
	payload, _ := proto.Marshal(&testgrain.AddRequest{Delta: 1})
	return wire.Envelope{Kind: wire.KindRequest, CallID: id, GrainType: testgrain.CounterGrainType, GrainKey: key,
		MethodID: testgrain.Counter_Add_Method.ID, Payload: payload}
}

// badRequest sends a request spoiled by spoil, which must fail alone with
// want: a valid request on the same connection still succeeds.
func (h *hostile) badRequest(spoil func(*wire.Envelope), want wire.Status) error {
	r, err := h.dial()
	if err != nil {
		return err
	}
	defer r.close()
	bad := h.add(1, h.id)
	spoil(&bad)
	if err := r.expect(bad, want); err != nil {
		return err
	}
	return r.expect(h.add(2, h.id), wire.StatusOK)
}

// closingFrame sends a frame body the silo cannot parse, and checks that it
// closes the connection.
func (h *hostile) closingFrame(body []byte) error {
	r, err := h.dial()
	if err != nil {
		return err
	}
	defer r.close()
	if err := r.conn.Send(rawBody(body)); err != nil {
		return err
	}
	select {
	case <-r.conn.Done():
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("the silo kept the connection")
	}
}
