package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/proxy"
)

// Messages are encoded straight into the connection's send buffer. One
// that cannot be encoded (a proto3 string that is not UTF-8) fails its own
// call with proxy.ErrBadRequest, leaves nothing pending and nothing half
// written, and the connection keeps serving.
func TestUnencodableMessagesFailOnlyTheirCall(t *testing.T) {
	badReply := &proxy.MethodDesc{Service: "test.S", Name: "BadReply", ID: 9}
	in := &goInbound{handler: func(req *actor.Request) {
		if req.MethodID == badReply.ID {
			req.Reply.Reply(req, wrapperspb.String("\xff"), nil)
			return
		}
		increment(req)
	}}
	defer in.wg.Wait()
	client, _ := pair(t, in)
	ctx := context.Background()
	out := &wrapperspb.Int64Value{}

	err := client.Call(ctx, testCall(time.Second, false), wrapperspb.String("\xff"), out)
	require.ErrorIs(t, err, proxy.ErrBadRequest)
	assert.Contains(t, err.Error(), "encode request")
	assert.Zero(t, client.Stats().Pending, "the failed call left nothing pending")
	sent := client.Stats().Transport.FramesQueued

	call := testCall(time.Second, false)
	call.Method = badReply
	err = client.Call(ctx, call, wrapperspb.Int64(1), &wrapperspb.StringValue{})
	require.ErrorIs(t, err, proxy.ErrBadRequest, "the silo answers with the encoding error")
	assert.Contains(t, err.Error(), "encode reply")

	require.NoError(t, client.Call(ctx, testCall(time.Second, false), wrapperspb.Int64(41), out))
	assert.EqualValues(t, 42, out.Value, "the connection still carries calls both ways")
	assert.EqualValues(t, sent+2, client.Stats().Transport.FramesQueued, "the unencodable request queued no frame")
}
