package rpc

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/ratelog"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/internal/wire"
)

// logLines is a log destination that many goroutines write to.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// with returns the lines that contain every one of parts.
func (l *logLines) with(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		ok := line != ""
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// sharedServer listens with endpoints that all share rejected.
func sharedServer(t *testing.T, rejected *Rejections) string {
	t.Helper()
	in := &goInbound{handler: increment}
	l, err := transport.Listen("127.0.0.1:0", transport.Options{}, func(c *transport.Conn) transport.Handler {
		ep := NewEndpoint(EndpointOptions{Rejections: rejected}, in, nil, nil, quiet)
		ep.Attach(c)
		return ep
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close(); in.wg.Wait() })
	return l.Addr().String()
}

// rawDial connects a peer that sends hand-made frames and reports the
// replies it gets.
func rawDial(t *testing.T, addr string) (*transport.Conn, chan *wire.Envelope) {
	t.Helper()
	replies := make(chan *wire.Envelope, 16)
	conn, err := transport.Dial(context.Background(), addr, transport.Options{}, rawPeer{fn: func(_ *transport.Conn, env *wire.Envelope) {
		replies <- env
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(); <-conn.Done() })
	return conn, replies
}

func badKeyRequest(id uint64) *outFrame {
	return &outFrame{env: wire.Envelope{Kind: wire.KindRequest, CallID: id, GrainType: "test.S", GrainKey: "bad-\xff", MethodID: testMethod.ID}}
}

func awaitReply(t *testing.T, replies chan *wire.Envelope) *wire.Envelope {
	t.Helper()
	select {
	case env := <-replies:
		return env
	case <-time.After(10 * time.Second):
		t.Fatal("no reply")
		return nil
	}
}

// A peer that opens connection after connection, each with a bad request,
// gets no more log lines than the silo-wide burst, while every rejection is
// counted; a connection logs each kind once, however often it repeats it;
// once time has passed, the next line says how many were dropped.
func TestRejectionLogsAreThrottledAcrossConnections(t *testing.T) {
	const burst, conns = 3, 20
	var out logLines
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	rejected := NewRejections(ratelog.New(slog.New(slog.NewTextHandler(&out, nil)), fake, burst, time.Second))
	addr := sharedServer(t, rejected)

	for i := range conns {
		conn, replies := rawDial(t, addr)
		for id := uint64(1); id <= 3; id++ {
			require.NoError(t, conn.Send(badKeyRequest(id)))
			reply := awaitReply(t, replies)
			require.Equal(t, wire.StatusBadRequest, reply.Status, "connection %d, call %d", i, id)
		}
	}
	refused := out.with(`msg="rpc: request refused"`, "reason=\"bad request\"", "peer=127.0.0.1:")
	assert.Len(t, refused, burst, "no more lines than the burst")
	st := rejected.Stats()
	assert.EqualValues(t, 3*conns, st.BadRequests, "every rejection counted")
	assert.EqualValues(t, conns-burst, st.LogSuppressed, "one line per connection was due, the rest dropped")

	fake.Advance(time.Second)
	conn, replies := rawDial(t, addr)
	require.NoError(t, conn.Send(badKeyRequest(1)))
	awaitReply(t, replies)
	assert.Len(t, out.with(`msg="rpc: request refused"`, "suppressed=17"), 1, "the next line says how many were dropped")
}

// Malformed frames close their connections; they too are counted each and
// logged no faster than the shared throttle allows.
func TestMalformedFramesAreCountedAndThrottled(t *testing.T) {
	const burst, conns = 2, 10
	var out logLines
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	rejected := NewRejections(ratelog.New(slog.New(slog.NewTextHandler(&out, nil)), fake, burst, time.Second))
	addr := sharedServer(t, rejected)

	for range conns {
		malformed, _ := rawDial(t, addr)
		require.NoError(t, malformed.Send(rawFrame{0xff, 0xff, 0xff}))
		unknownKind, _ := rawDial(t, addr)
		require.NoError(t, unknownKind.Send(rawFrame{0x08, 0x63})) // kind 99
		for _, c := range []*transport.Conn{malformed, unknownKind} {
			select {
			case <-c.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the connection was kept")
			}
		}
	}
	st := rejected.Stats()
	assert.EqualValues(t, conns, st.MalformedFrames)
	assert.EqualValues(t, conns, st.UnknownKinds)
	assert.EqualValues(t, 2*conns-burst, st.LogSuppressed)
	assert.Len(t, out.with("level=WARN", `msg="rpc: connection closed: `, "peer=127.0.0.1:"), burst)
}

// rawFrame is a frame body sent as it is.
type rawFrame []byte

func (b rawFrame) AppendTo(dst []byte) ([]byte, error) { return append(dst, b...), nil }
