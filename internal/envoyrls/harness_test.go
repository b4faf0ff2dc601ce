package envoyrls_test

import (
	"context"
	"net"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/internal/envoyrls"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

// epoch is where the fake clocks start.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// rls is a two-silo cluster on a fake clock, the rate limit service over
// the first silo's caller on a loopback port, and a grpc-go client of it,
// as Envoy's filter is one.
type rls struct {
	cluster *testcluster.Cluster
	fake    *clock.Fake
	server  *envoyrls.Server
	client  rlsv3.RateLimitServiceClient
}

func startRLS(t testing.TB, opts envoyrls.Options) *rls {
	t.Helper()
	fake := clock.NewFake(epoch)
	c := testcluster.New(t, testcluster.Options{Silos: 2,
		SiloOptions: []silo.Option{silo.WithClock(fake)},
		Register:    func(s *silo.Silo) error { return ratelimit.Register(s, ratelimit.Defaults{}) }})
	server := envoyrls.NewServer(c.Silo(0).Caller(), opts)
	return &rls{cluster: c, fake: fake, server: server, client: serveRLS(t, server)}
}

// serveRLS serves s on a loopback port and returns a client of it; both
// stop when the test ends.
func serveRLS(t testing.TB, s rlsv3.RateLimitServiceServer) rlsv3.RateLimitServiceClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(g, s)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = g.Serve(ln)
	}()
	conn, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = conn.Close()
		g.Stop()
		<-served
	})
	return rlsv3.NewRateLimitServiceClient(conn)
}

// descriptor makes a descriptor of key, value pairs.
func descriptor(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func (r *rls) ask(t testing.TB, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := r.client.ShouldRateLimit(ctx, req)
	require.NoError(t, err)
	return resp
}
