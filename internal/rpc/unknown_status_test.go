package rpc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/proxy"
)

// rawPeer is a transport handler that answers frames with fn.
type rawPeer struct {
	fn func(c *transport.Conn, env *wire.Envelope)
}

func (p rawPeer) HandleFrame(c *transport.Conn, body []byte) {
	var env wire.Envelope
	if err := env.Unmarshal(body); err == nil {
		p.fn(c, &env)
	}
}
func (rawPeer) HandleClose(*transport.Conn, error) {}

func listenRaw(t *testing.T, onAccept func(c *transport.Conn), fn func(c *transport.Conn, env *wire.Envelope)) string {
	t.Helper()
	l, err := transport.Listen("127.0.0.1:0", transport.Options{}, func(c *transport.Conn) transport.Handler {
		if onAccept != nil {
			onAccept(c)
		}
		return rawPeer{fn: fn}
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().String()
}

// A reply status outside the known codes must fail the call, never read as
// success: Status is an int32 on the wire and 256 must not become CodeOK.
func TestUnknownReplyStatusIsAnError(t *testing.T) {
	for _, status := range []wire.Status{256, -256, 1 << 20, 200} {
		addr := listenRaw(t, nil, func(c *transport.Conn, env *wire.Envelope) {
			if env.Kind == wire.KindRequest {
				_ = c.Send(&outFrame{env: wire.Envelope{Kind: wire.KindReply, CallID: env.CallID, Status: status, Error: "odd"}})
			}
		})
		client := NewEndpoint(EndpointOptions{}, nil, nil, nil, quiet)
		conn, err := transport.Dial(context.Background(), addr, transport.Options{}, client)
		require.NoError(t, err)
		client.Attach(conn)
		err = client.Call(context.Background(), testCall(5*time.Second, false), wrapperspb.Int64(1), &wrapperspb.Int64Value{})
		require.Error(t, err, "status %d", status)
		var ce *proxy.CallError
		assert.ErrorAs(t, err, &ce)
		_ = conn.Close()
	}
}
