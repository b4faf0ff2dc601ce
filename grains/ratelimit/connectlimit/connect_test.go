package connectlimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/connectlimit"
	"github.com/granary-go/granary/grains/ratelimit/internal/silotest"
	"github.com/granary-go/granary/proxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// never is a window no test waits out.
const never = 1000 * time.Hour

// configs are the named configurations of the tests: two calls per
// window.
func configs(t testing.TB) *ratelimit.Configs {
	return silotest.Configs(t, ratelimit.Named("two", ratelimit.FixedWindowOptions{PermitLimit: 2, Window: never}))
}

// limiterSilo starts a silo on a fake clock and returns its caller.
func limiterSilo(t testing.TB) proxy.Caller {
	return silotest.Start(t, "connectlimit", clock.NewFake(silotest.Epoch)).Caller()
}

func formatSeconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// TestConnectInterceptorRefusesLikeGRPC: a connect-go handler with the
// interceptor refuses the third call of a tenant with
// CodeResourceExhausted, a RetryInfo detail and retry-after, over the
// gRPC protocol and connect's own alike.
func TestConnectInterceptorRefusesLikeGRPC(t *testing.T) {
	l, err := connectlimit.New(limiterSilo(t), configs(t), connectlimit.Options{Rules: []connectlimit.Rule{connectlimit.ByMetadata("two", "x-tenant")}})
	require.NoError(t, err)
	const procedure = "/test.v1.Pinger/Ping"
	mux := http.NewServeMux()
	mux.Handle(procedure, connect.NewUnaryHandler(procedure, func(context.Context, *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
		return connect.NewResponse(&emptypb.Empty{}), nil
	}, connect.WithInterceptors(l.Interceptor())))
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

// TestConnectInterceptorLimitsStreams: a connect-go streaming handler
// passes the rules once per stream, and a refused stream ends with
// CodeResourceExhausted before the handler runs.
func TestConnectInterceptorLimitsStreams(t *testing.T) {
	l, err := connectlimit.New(limiterSilo(t), configs(t), connectlimit.Options{Rules: []connectlimit.Rule{connectlimit.ByMethod("two")}})
	require.NoError(t, err)
	const procedure = "/test.v1.Pinger/Pings"
	var served atomic.Int32
	mux := http.NewServeMux()
	mux.Handle(procedure, connect.NewServerStreamHandler(procedure, func(_ context.Context, _ *connect.Request[emptypb.Empty], s *connect.ServerStream[emptypb.Empty]) error {
		served.Add(1)
		return s.Send(&emptypb.Empty{})
	}, connect.WithInterceptors(l.Interceptor())))
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

// TestConnectLimitDoesNotLinkGRPC: a connect-only program links no
// grpc-go: the interceptor and what it is built on stay out of it.
func TestConnectLimitDoesNotLinkGRPC(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command: install Go and put it on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/granary-go/granary/grains/ratelimit/connectlimit").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "connectrpc.com/connect", "the list is the package's")
	for _, dep := range deps {
		require.False(t, strings.HasPrefix(dep, "google.golang.org/grpc"), "%s reaches connectlimit", dep)
	}
}

// TestNewReportsProblemsAsConnectLimit: New's problems are connectlimit's
// own, every one of them at once.
func TestNewReportsProblemsAsConnectLimit(t *testing.T) {
	_, err := connectlimit.New(limiterSilo(t), configs(t), connectlimit.Options{Rules: []connectlimit.Rule{{}, connectlimit.ByMethod("missing")}})
	require.ErrorIs(t, err, connectlimit.ErrInvalidOptions)
	require.ErrorIs(t, err, ratelimit.ErrConfigNotFound)
	require.ErrorContains(t, err, "connectlimit: invalid options: Rules[0] was not built")
}
