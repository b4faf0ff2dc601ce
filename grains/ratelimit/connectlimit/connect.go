package connectlimit

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/granary-go/granary/grains/ratelimit/internal/calllimit"
)

// Interceptor limits the calls of connect-go handlers (gRPC, gRPC-Web
// and Connect alike) by the limiter's rules: unary calls and streams, one
// decision when each starts, concurrency permits held until the handler
// returns. A refused call fails with CodeResourceExhausted, a
// google.rpc.RetryInfo detail and the retry-after metadata (Unavailable
// when a limiter cannot be reached, unless FailOpen). Client calls pass
// untouched.
func (m *Limiter) Interceptor() connect.Interceptor { return connectInterceptor{m.core} }

type connectInterceptor struct{ m *calllimit.Limiter }

func (i connectInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		c := calllimit.ConnectCall(req.Spec().Procedure, req.Peer().Addr, req.Header())
		held, refused := i.m.Admit(ctx, &c)
		if refused != nil {
			return nil, connectError(refused)
		}
		if len(held) > 0 {
			defer i.m.Release(ctx, held)
		}
		return next(ctx, req)
	}
}

func (i connectInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i connectInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		c := calllimit.ConnectCall(conn.Spec().Procedure, conn.Peer().Addr, conn.RequestHeader())
		held, refused := i.m.Admit(ctx, &c)
		if refused != nil {
			return connectError(refused)
		}
		if len(held) > 0 {
			defer i.m.Release(ctx, held)
		}
		return next(ctx, conn)
	}
}

// connectError is the error a refused connect call fails with.
func connectError(r *calllimit.Refusal) error {
	if r.Err != nil {
		if errors.Is(r.Err, context.Canceled) || errors.Is(r.Err, context.DeadlineExceeded) {
			return connect.NewError(connect.CodeOf(r.Err), r.Err)
		}
		return connect.NewError(connect.CodeUnavailable, errors.New("connectlimit: rate limiter unavailable"))
	}
	err := connect.NewError(connect.CodeResourceExhausted, errors.New(r.Message()))
	if detail, derr := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(r.RetryDelay())}); derr == nil {
		err.AddDetail(detail)
	}
	err.Meta().Set(MetadataRetryAfter, r.RetrySeconds())
	return err
}
