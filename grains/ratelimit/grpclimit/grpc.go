package grpclimit

import (
	"context"
	"crypto/tls"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/internal/calllimit"
)

// UnaryServerInterceptor limits the unary calls of a grpc-go server: a
// call every applicable rule grants runs its handler, holding concurrency
// permits until the handler returns; any other fails ResourceExhausted
// (Unavailable when a limiter cannot be reached, unless FailOpen) without
// reaching it.
func (m *Limiter) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		held, err := m.admitGRPC(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		if len(held) > 0 {
			defer m.core.Release(ctx, held) // deferred: a handler that panics releases too
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor limits the streams of a grpc-go server as
// UnaryServerInterceptor limits calls: one decision when the stream
// opens, its concurrency permits held until the handler returns.
func (m *Limiter) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		held, err := m.admitGRPC(ctx, info.FullMethod)
		if err != nil {
			return err
		}
		if len(held) > 0 {
			defer m.core.Release(ctx, held)
		}
		return handler(srv, ss)
	}
}

// admitGRPC decides a grpc-go call, and answers a refusal as a status with
// the retry-after trailer and a google.rpc.RetryInfo detail.
func (m *Limiter) admitGRPC(ctx context.Context, method string) ([]*ratelimit.Lease, error) {
	c := grpcCall(ctx, method)
	held, refused := m.core.Admit(ctx, &c)
	if refused == nil {
		return held, nil
	}
	return nil, grpcStatus(ctx, refused)
}

// grpcCall reads what rules need of a grpc-go server call.
func grpcCall(ctx context.Context, method string) Call {
	md, _ := metadata.FromIncomingContext(ctx)
	var addr string
	var state *tls.ConnectionState
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			addr = p.Addr.String()
		}
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			state = &info.State
		}
	}
	return calllimit.GRPCCall(method, addr, md, state)
}

// grpcStatus is the error a refused call fails with.
func grpcStatus(ctx context.Context, r *calllimit.Refusal) error {
	if r.Err != nil {
		if errors.Is(r.Err, context.Canceled) || errors.Is(r.Err, context.DeadlineExceeded) {
			return status.FromContextError(r.Err).Err()
		}
		return status.Error(codes.Unavailable, "grpclimit: rate limiter unavailable")
	}
	// The trailer tells clients that read no details; a server stream
	// outside a call (a test's bare context) has nowhere to put it.
	_ = grpc.SetTrailer(ctx, metadata.Pairs(MetadataRetryAfter, r.RetrySeconds()))
	st := status.New(codes.ResourceExhausted, r.Message())
	if detailed, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(r.RetryDelay())}); err == nil {
		st = detailed
	}
	return st.Err()
}

// middlewareLimiter is the Limiter as go-grpc-middleware v2's
// ratelimit.Limiter: its interceptors call Limit before each call and
// fail the call ResourceExhausted with Limit's error.
type middlewareLimiter struct{ m *Limiter }

// ErrConcurrencyInMiddleware is returned by MiddlewareLimiter for a
// Limiter with a concurrency rule.
var ErrConcurrencyInMiddleware = errors.New("grpclimit: go-grpc-middleware's Limiter cannot release concurrency permits")

// MiddlewareLimiter returns the limiter as go-grpc-middleware v2's
// interceptors/ratelimit.Limiter (Limit(ctx) error), for
// ratelimit.UnaryServerInterceptor and its siblings. Its rules must be
// time-based: the interface cannot release what a call holds.
func (m *Limiter) MiddlewareLimiter() (interface {
	Limit(ctx context.Context) error
}, error) {
	if m.core.HasConcurrency() {
		return nil, ErrConcurrencyInMiddleware
	}
	return middlewareLimiter{m}, nil
}

// Limit decides the call of ctx (on a server, the method is
// grpc.Method's) and sets the retry-after trailer of a refusal.
func (a middlewareLimiter) Limit(ctx context.Context) error {
	method, _ := grpc.Method(ctx)
	c := grpcCall(ctx, method)
	_, refused := a.m.core.Admit(ctx, &c)
	if refused == nil {
		return nil
	}
	return grpcStatus(ctx, refused)
}
