package rpc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/proxy"
)

// A peer may send a request the moment the connection opens, before Dial
// has returned and the endpoint is attached. The client endpoint must
// refuse it (it hosts no grains) without touching an unset connection.
func TestRequestBeforeAttachIsRefused(t *testing.T) {
	replies := make(chan *wire.Envelope, 1)
	addr := listenRaw(t, func(c *transport.Conn) {
		_ = c.Send(&outFrame{env: wire.Envelope{Kind: wire.KindRequest, CallID: 7, GrainType: "test.S", GrainKey: "k", MethodID: testMethod.ID}})
	}, func(c *transport.Conn, env *wire.Envelope) {
		if env.Kind == wire.KindReply {
			replies <- env
		}
	})
	client := NewEndpoint(EndpointOptions{}, nil, nil, nil, quiet)
	conn, err := transport.Dial(context.Background(), addr, transport.Options{}, client)
	require.NoError(t, err)
	// Attach late, as a caller that does more work after Dial would.
	require.Eventually(t, func() bool { return conn.Stats().FramesRead == 1 }, 5*time.Second, time.Millisecond)
	client.Attach(conn)
	select {
	case env := <-replies:
		assert.EqualValues(t, 7, env.CallID)
		assert.Equal(t, wire.Status(proxy.CodeUnavailable), env.Status)
	case <-time.After(5 * time.Second):
		t.Fatal("no reply to the early request")
	}
	_ = conn.Close()
}

// A connection may close before its endpoint is attached or reads a frame
// (a silo's link whose peer hangs up at once). The endpoint's Stats, which
// a silo reads as it drops the link, must not touch an unset connection:
// they are the closed connection's.
func TestStatsOfAnEndpointWhoseConnectionClosedBeforeAttach(t *testing.T) {
	closed := make(chan closeNotifier, 1)
	l, err := transport.Listen("127.0.0.1:0", transport.Options{}, func(*transport.Conn) transport.Handler {
		return closeNotifier{Endpoint: NewEndpoint(EndpointOptions{}, nil, nil, nil, quiet), closed: closed}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	assert.Zero(t, NewEndpoint(EndpointOptions{}, nil, nil, nil, quiet).Stats().Transport, "an endpoint never attached has no traffic")

	client := NewEndpoint(EndpointOptions{}, nil, nil, nil, quiet)
	conn, err := transport.Dial(context.Background(), l.Addr().String(), transport.Options{}, client)
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	h := <-closed
	assert.Equal(t, h.conn.Stats(), h.Stats().Transport, "the closed connection's counters")
}

// closeNotifier hands itself to closed once its endpoint has handled the
// close of conn.
type closeNotifier struct {
	*Endpoint
	closed chan closeNotifier
	conn   *transport.Conn
}

func (h closeNotifier) HandleClose(c *transport.Conn, err error) {
	h.Endpoint.HandleClose(c, err)
	h.conn = c
	h.closed <- h
}
