package grpclimit_test

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/internal/silotest"
	"github.com/granary-go/granary/proxy"
)

// never is a window no test waits out.
const never = 1000 * time.Hour

const (
	checkMethod = "/grpc.health.v1.Health/Check"
	listMethod  = "/grpc.health.v1.Health/List"
)

// configs are the named configurations of the tests: two calls per
// window, and one at a time.
func configs(t testing.TB) *ratelimit.Configs {
	return silotest.Configs(t,
		ratelimit.Named("two", ratelimit.FixedWindowOptions{PermitLimit: 2, Window: never}),
		ratelimit.Named("one-at-a-time", ratelimit.ConcurrencyOptions{PermitLimit: 1}))
}

// limiterSilo starts a silo on a fake clock and returns its caller.
func limiterSilo(t testing.TB) proxy.Caller {
	return silotest.Start(t, "grpclimit", clock.NewFake(silotest.Epoch)).Caller()
}

// healthServer serves grpc-go's health service on a loopback port with
// the given server options, and returns a client connection's maker: each
// call of dial opens a connection of its own (from its own port).
func healthServer(t testing.TB, creds credentials.TransportCredentials, opts ...grpc.ServerOption) (dial func(creds credentials.TransportCredentials) healthpb.HealthClient, hs *health.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	g := grpc.NewServer(opts...)
	hs = health.NewServer()
	healthpb.RegisterHealthServer(g, hs)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = g.Serve(ln)
	}()
	var conns []*grpc.ClientConn
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
		g.Stop()
		<-served
	})
	return func(creds credentials.TransportCredentials) healthpb.HealthClient {
		if creds == nil {
			creds = insecure.NewCredentials()
		}
		conn, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(creds))
		require.NoError(t, err)
		conns = append(conns, conn)
		return healthpb.NewHealthClient(conn)
	}, hs
}

// check calls Check with metadata pairs and returns the error and the
// trailer.
func check(t testing.TB, c healthpb.HealthClient, kv ...string) (error, metadata.MD) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if len(kv) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	}
	var trailer metadata.MD
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer))
	return err, trailer
}

// requireRefused checks a rate-limit refusal: ResourceExhausted naming
// the rule, a RetryInfo detail, and the retry-after trailer, 1 s for a
// concurrency limit and the window's rest for a fixed window.
func requireRefused(t testing.TB, err error, trailer metadata.MD, rule string, retry time.Duration) {
	t.Helper()
	st := status.Convert(err)
	require.Equal(t, codes.ResourceExhausted, st.Code(), "%v", err)
	require.Contains(t, st.Message(), `rule "`+rule+`"`)
	var info *errdetails.RetryInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			info = ri
		}
	}
	require.NotNil(t, info, "a RetryInfo detail in %v", st.Details())
	require.Equal(t, retry, info.GetRetryDelay().AsDuration())
	require.Equal(t, []string{formatSeconds(retry)}, trailer.Get("retry-after"))
}

func formatSeconds(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// mutualTLS returns server and client credentials of one CA, the client
// presenting a certificate named client.
func mutualTLS(server, client *tls.Config) (credentials.TransportCredentials, credentials.TransportCredentials) {
	return credentials.NewTLS(server), credentials.NewTLS(client)
}
