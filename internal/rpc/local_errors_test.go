package rpc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/proxy"
)

// A stopping host or a deactivated deferred reply reads as
// proxy.ErrUnavailable to a remote caller; the local caller must give
// grain-to-grain calls the same meaning, and the same error.
func TestLocalCallerMapsStoppingToUnavailable(t *testing.T) {
	for _, cause := range []error{actor.ErrStopping, actor.ErrDeactivated} {
		in := &goInbound{handler: func(req *host.Request) { req.Reply.Reply(req, nil, cause) }}
		l := NewLocalCaller(in, func() time.Duration { return time.Second }, nil, 0)
		err := l.Call(context.Background(), testCall(time.Second, false), wrapperspb.Int64(1), &wrapperspb.Int64Value{})
		in.wg.Wait()
		l.Close()
		require.ErrorIs(t, err, proxy.ErrUnavailable, "cause %v", cause)
		assert.Contains(t, err.Error(), cause.Error(), "the cause stays visible")
		var ce *proxy.CallError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, proxy.CodeUnavailable, ce.Code)
	}
}
