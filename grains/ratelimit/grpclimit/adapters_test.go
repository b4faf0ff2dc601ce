package grpclimit_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	grpcmw "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

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
// speak it; a program using the client, the silo, the limiters, the HTTP
// middleware or the connect-go interceptor does not link it.
func TestCorePackagesDoNotLinkGRPC(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command: install Go and put it on PATH")
	}
	core := []string{"client", "silo", "grains/ratelimit", "grains/ratelimit/httplimit", "grains/ratelimit/ratelimitapi", "grains/ratelimit/connectlimit", "testcluster"}
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
