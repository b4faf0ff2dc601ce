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
func TestReviewRequestBeforeAttachIsRefused(t *testing.T) {
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
