package grpclimit

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ConnectInterceptor limits the calls of connect-go handlers (gRPC,
// gRPC-Web and Connect alike) by the limiter's rules: unary calls and
// streams, one decision when each starts, concurrency permits held until
// the handler returns. A refused call fails with CodeResourceExhausted,
// a google.rpc.RetryInfo detail and the retry-after metadata
// (Unavailable when a limiter cannot be reached, unless FailOpen). Client
// calls pass untouched.
func (m *Limiter) ConnectInterceptor() connect.Interceptor { return connectInterceptor{m} }

type connectInterceptor struct{ m *Limiter }

func (i connectInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		c := Call{Method: req.Spec().Procedure, Peer: req.Peer().Addr, header: req.Header()}
		held, refused := i.m.admit(ctx, &c)
		if refused != nil {
			return nil, refused.connectError()
		}
		if len(held) > 0 {
			defer i.m.release(ctx, held)
		}
		return next(ctx, req)
	}
}

func (i connectInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i connectInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		c := Call{Method: conn.Spec().Procedure, Peer: conn.Peer().Addr, header: conn.RequestHeader()}
		held, refused := i.m.admit(ctx, &c)
		if refused != nil {
			return refused.connectError()
		}
		if len(held) > 0 {
			defer i.m.release(ctx, held)
		}
		return next(ctx, conn)
	}
}

// connectError is the error a refused connect call fails with.
func (r *refusal) connectError() error {
	if r.err != nil {
		if errors.Is(r.err, context.Canceled) || errors.Is(r.err, context.DeadlineExceeded) {
			return connect.NewError(connect.CodeOf(r.err), r.err)
		}
		return connect.NewError(connect.CodeUnavailable, errors.New("grpclimit: rate limiter unavailable"))
	}
	err := connect.NewError(connect.CodeResourceExhausted, errors.New(r.message()))
	if detail, derr := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(r.retryDelay())}); derr == nil {
		err.AddDetail(detail)
	}
	err.Meta().Set(MetadataRetryAfter, r.retrySeconds())
	return err
}
