package grpclimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	grpcmw "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/grpclimit"
	"github.com/granary-go/granary/grains/ratelimit/internal/silotest"
	"github.com/granary-go/granary/proxy"
)

// TestGoGRPCMiddlewareRefusesWithTheRetryTrailer: go-grpc-middleware's
// ratelimit interceptor, given the adapter, refuses the third call of a
// method with ResourceExhausted and the retry-after trailer.
func TestGoGRPCMiddlewareRefusesWithTheRetryTrailer(t *testing.T) {
	l, err := grpclimit.New(limiterSilo(t), configs(t), grpclimit.Options{Rules: []grpclimit.Rule{grpclimit.ByMethod("two")}})
	require.NoError(t, err)
	adapter, err := l.MiddlewareLimiter()
	require.NoError(t, err)
	var _ grpcmw.Limiter = adapter
	dial, _ := healthServer(t, nil, grpc.UnaryInterceptor(grpcmw.UnaryServerInterceptor(adapter)))
	client := dial(nil)
	for range 2 {
		err, _ := check(t, client)
		require.NoError(t, err)
	}
	err, trailer := check(t, client)
	require.Equal(t, codes.ResourceExhausted, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), `rule "two"`)
	require.Equal(t, []string{formatSeconds(never)}, trailer.Get("retry-after"))

	conc, err := grpclimit.New(limiterSilo(t), configs(t), grpclimit.Options{Rules: []grpclimit.Rule{grpclimit.ByPeer("one-at-a-time")}})
	require.NoError(t, err)
	_, err = conc.MiddlewareLimiter()
	require.ErrorIs(t, err, grpclimit.ErrConcurrencyInMiddleware)
}

// TestConnectInterceptorRefusesLikeGRPC: a connect-go handler with the
// interceptor refuses the third call of a tenant with
// CodeResourceExhausted, a RetryInfo detail and retry-after, over the
// gRPC protocol and connect's own alike.
func TestConnectInterceptorRefusesLikeGRPC(t *testing.T) {
	l, err := grpclimit.New(limiterSilo(t), configs(t), grpclimit.Options{Rules: []grpclimit.Rule{grpclimit.ByMetadata("two", "x-tenant")}})
	require.NoError(t, err)
	const procedure = "/test.v1.Pinger/Ping"
	mux := http.NewServeMux()
	mux.Handle(procedure, connect.NewUnaryHandler(procedure, func(context.Context, *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
		return connect.NewResponse(&emptypb.Empty{}), nil
	}, connect.WithInterceptors(l.ConnectInterceptor())))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	for _, protocol := range []struct {
		name string
		opts []connect.ClientOption
	}{{"grpc", []connect.ClientOption{connect.WithGRPC()}}, {"connect", nil}} {
		t.Run(protocol.name, func(t *testing.T) {
			client := connect.NewClient[emptypb.Empty, emptypb.Empty](srv.Client(), srv.URL+procedure, protocol.opts...)
			call := func(tenant string) error {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				req := connect.NewRequest(&emptypb.Empty{})
				req.Header().Set("X-Tenant", tenant)
				_, err := client.CallUnary(ctx, req)
				return err
			}
			tenant := "tenant-" + protocol.name
			require.NoError(t, call(tenant))
			require.NoError(t, call(tenant))
			err := call(tenant)
			var cerr *connect.Error
			require.True(t, errors.As(err, &cerr), "%v", err)
			require.Equal(t, connect.CodeResourceExhausted, cerr.Code())
			require.Equal(t, formatSeconds(never), cerr.Meta().Get("Retry-After"))
			var info *errdetails.RetryInfo
			for _, d := range cerr.Details() {
				if v, err := d.Value(); err == nil {
					if ri, ok := v.(*errdetails.RetryInfo); ok {
						info = ri
					}
				}
			}
			require.NotNil(t, info)
			require.Equal(t, never, info.GetRetryDelay().AsDuration())
			require.NoError(t, call("another-"+tenant))
		})
	}
}

// unreachable is a caller whose calls all fail, as when no silo answers.
type unreachable struct{}

func (unreachable) Call(context.Context, proxy.Call, proto.Message, proto.Message) error {
	return proxy.ErrUnavailable
}
func (unreachable) ResponseTimeout() time.Duration { return time.Second }

// TestUnreachableLimitersFailClosedUnlessFailOpen: a call whose limiter
// cannot be reached fails Unavailable, or passes with FailOpen.
func TestUnreachableLimitersFailClosedUnlessFailOpen(t *testing.T) {
	for _, failOpen := range []bool{false, true} {
		l, err := grpclimit.New(unreachable{}, configs(t), grpclimit.Options{Rules: []grpclimit.Rule{grpclimit.ByMethod("two")}, FailOpen: failOpen},
			grpclimit.WithLogger(silotest.Quiet))
		require.NoError(t, err)
		dial, _ := healthServer(t, nil, grpc.UnaryInterceptor(l.UnaryServerInterceptor()))
		err, _ = check(t, dial(nil))
		if failOpen {
			require.NoError(t, err)
		} else {
			require.Equal(t, codes.Unavailable, status.Code(err))
		}
	}
}

// TestNewReportsEveryProblem: New names every problem of its options at
// once.
func TestNewReportsEveryProblem(t *testing.T) {
	rules := []grpclimit.Rule{{}, grpclimit.ByMethod("two"), grpclimit.ByPeer("two"), grpclimit.ByMethod("missing")}
	_, err := grpclimit.New(unreachable{}, configs(t), grpclimit.Options{Rules: rules})
	require.ErrorIs(t, err, grpclimit.ErrInvalidOptions)
	for _, want := range []string{"Rules[0] was not built", `Rules[1] and Rules[2] are both named "two"`, `rule "missing"`} {
		require.ErrorContains(t, err, want)
	}
	require.ErrorIs(t, err, ratelimit.ErrConfigNotFound)
	_, err = grpclimit.New(nil, configs(t), grpclimit.Options{Rules: rules})
	require.ErrorContains(t, err, "no caller")
	_, err = grpclimit.New(unreachable{}, configs(t), grpclimit.Options{})
	require.ErrorContains(t, err, "no rules")
}

// TestCorePackagesDoNotLinkGRPC: grpc-go reaches only the packages that
// speak it; a program using the client, the silo, the limiters or the
// HTTP middleware does not link it.
func TestCorePackagesDoNotLinkGRPC(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command: install Go and put it on PATH")
	}
	core := []string{"client", "silo", "grains/ratelimit", "grains/ratelimit/httplimit", "grains/ratelimit/ratelimitapi", "testcluster"}
	args := []string{"list", "-deps"}
	for _, p := range core {
		args = append(args, "github.com/granary-go/granary/"+p)
	}
	out, err := exec.Command(goTool, args...).Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		require.False(t, strings.HasPrefix(dep, "google.golang.org/grpc") || strings.HasPrefix(dep, "github.com/envoyproxy/"),
			"%s reaches a core package", dep)
	}
}

// TestConnectInterceptorLimitsStreams: a connect-go streaming handler
// passes the rules once per stream, and a refused stream ends with
// CodeResourceExhausted before the handler runs.
func TestConnectInterceptorLimitsStreams(t *testing.T) {
	l, err := grpclimit.New(limiterSilo(t), configs(t), grpclimit.Options{Rules: []grpclimit.Rule{grpclimit.ByMethod("two")}})
	require.NoError(t, err)
	const procedure = "/test.v1.Pinger/Pings"
	var served atomic.Int32
	mux := http.NewServeMux()
	mux.Handle(procedure, connect.NewServerStreamHandler(procedure, func(_ context.Context, _ *connect.Request[emptypb.Empty], s *connect.ServerStream[emptypb.Empty]) error {
		served.Add(1)
		return s.Send(&emptypb.Empty{})
	}, connect.WithInterceptors(l.ConnectInterceptor())))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	client := connect.NewClient[emptypb.Empty, emptypb.Empty](srv.Client(), srv.URL+procedure, connect.WithGRPC())
	stream := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s, err := client.CallServerStream(ctx, connect.NewRequest(&emptypb.Empty{}))
		if err != nil {
			return err
		}
		defer s.Close()
		for s.Receive() {
		}
		return s.Err()
	}
	require.NoError(t, stream())
	require.NoError(t, stream())
	err = stream()
	require.Equal(t, connect.CodeResourceExhausted, connect.CodeOf(err), "%v", err)
	require.EqualValues(t, 2, served.Load())
}
