package rpc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/proxy"
)

// Messages are encoded straight into the connection's send buffer. One
// that cannot be encoded (a proto3 string that is not UTF-8) fails its own
// call with proxy.ErrBadRequest, leaves nothing pending and nothing half
// written, and the connection keeps serving.
func TestUnencodableMessagesFailOnlyTheirCall(t *testing.T) {
	badReply := &proxy.MethodDesc{Service: "test.S", Name: "BadReply", ID: 9}
	badWireReply := &proxy.MethodDesc{Service: "test.S", Name: "BadWireReply", ID: 10}
	in := &goInbound{handler: func(req *host.Request) {
		switch req.MethodID {
		case badReply.ID: // encoded by protobuf, before the send
			req.Reply.Reply(req, wrapperspb.String("\xff"), nil)
		case badWireReply.ID: // encoded by its generated codec, inside the send
			req.Reply.Reply(req, &testgrain.BlockRequest{Tag: "\xff"}, nil)
		default:
			increment(req)
		}
	}}
	defer in.wg.Wait()
	client, _ := pair(t, in)
	ctx := context.Background()
	out := &wrapperspb.Int64Value{}

	for _, bad := range []proto.Message{wrapperspb.String("\xff"), &testgrain.BlockRequest{Tag: "\xff"}} {
		err := client.Call(ctx, testCall(time.Second, false), bad, out)
		require.ErrorIs(t, err, proxy.ErrBadRequest, "%T", bad)
		assert.Contains(t, err.Error(), "encode request")
		assert.Zero(t, client.Stats().Pending, "the failed call left nothing pending")
	}
	sent := client.Stats().Transport.FramesQueued

	for _, m := range []*proxy.MethodDesc{badReply, badWireReply} {
		call := testCall(time.Second, false)
		call.Method = m
		err := client.Call(ctx, call, wrapperspb.Int64(1), &wrapperspb.StringValue{})
		require.ErrorIs(t, err, proxy.ErrBadRequest, "the silo answers %s with the encoding error", m.Name)
		assert.Contains(t, err.Error(), "encode reply")
	}

	require.NoError(t, client.Call(ctx, testCall(time.Second, false), wrapperspb.Int64(41), out))
	assert.EqualValues(t, 42, out.Value, "the connection still carries calls both ways")
	assert.EqualValues(t, sent+3, client.Stats().Transport.FramesQueued, "the unencodable requests queued no frame")
}

// A reply larger than the connection's maximum frame is not sent; the caller
// gets ErrBadRequest saying so, and the connection keeps serving.
func TestOversizeReplyIsAnsweredWithAnError(t *testing.T) {
	in := &goInbound{handler: func(req *host.Request) {
		if req.MethodID == 11 {
			req.Reply.Reply(req, wrapperspb.Bytes(make([]byte, 1024)), nil)
			return
		}
		increment(req)
	}}
	defer in.wg.Wait()
	l, err := transport.Listen("127.0.0.1:0", transport.Options{MaxFrameSize: 256}, func(c *transport.Conn) transport.Handler {
		ep := NewEndpoint(EndpointOptions{}, in, nil, nil, quiet)
		ep.Attach(c)
		return ep
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	client := NewEndpoint(EndpointOptions{}, nil, nil, nil, quiet)
	conn, err := transport.Dial(context.Background(), l.Addr().String(), transport.Options{}, client)
	require.NoError(t, err)
	client.Attach(conn)
	t.Cleanup(func() { _ = conn.Close(); <-conn.Done() })

	call := testCall(time.Second, false)
	call.Method = &proxy.MethodDesc{Service: "test.S", Name: "Big", ID: 11}
	err = client.Call(context.Background(), call, wrapperspb.Int64(1), &wrapperspb.BytesValue{})
	require.ErrorIs(t, err, proxy.ErrBadRequest)
	assert.Contains(t, err.Error(), "exceeds the maximum frame size")

	out := &wrapperspb.Int64Value{}
	require.NoError(t, client.Call(context.Background(), testCall(time.Second, false), wrapperspb.Int64(1), out))
	assert.EqualValues(t, 2, out.Value)
}
