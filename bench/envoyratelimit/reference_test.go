package envoyratelimit_test

import (
	"context"
	"net"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/granary-go/granary/bench/envoyratelimit"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/internal/envoyrls"
	"github.com/granary-go/granary/internal/envoyrls/rlsload"
	"github.com/granary-go/granary/internal/redistest"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

// The reference's service waits for configuration updates in a goroutine
// that has no stop; nothing else of it outlives Stop. Its log (logrus's
// global one) says only what goes wrong.
func TestMain(m *testing.M) {
	logrus.SetLevel(logrus.ErrorLevel)
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/envoyproxy/ratelimit/src/service.NewService.func1"))
}

// systems are the two services under test, each behind a grpc-go client.
type systems struct {
	reference, granary rlsv3.RateLimitServiceClient
}

// start runs redis-server, envoyproxy/ratelimit against it and a granary
// silo, both serving configYAML on loopback.
func start(t testing.TB, configYAML string) systems {
	t.Helper()
	redis := redistest.Start(t, redistest.Options{})
	// envoyproxy/ratelimit is usually deployed on a Redis that keeps
	// nothing on disk.
	_, err := redis.Command("CONFIG", "SET", "appendonly", "no")
	require.NoError(t, err)
	ref, err := envoyratelimit.StartReference(redis.Addr(), configYAML)
	require.NoError(t, err)
	t.Cleanup(ref.Stop)

	c := testcluster.New(t, testcluster.Options{Silos: 1,
		Register: func(s *silo.Silo) error { return ratelimit.Register(s, ratelimit.Defaults{}) }})
	cfg, err := envoyrls.Parse("config.yaml", []byte(configYAML))
	require.NoError(t, err)
	server := envoyrls.NewServer(c.Silo(0).Caller(), envoyrls.Options{})
	server.SetConfig(cfg)
	return systems{reference: dial(t, ref.Addr()), granary: dial(t, serve(t, server))}
}

// serve serves s on a loopback port until the test ends.
func serve(t testing.TB, s rlsv3.RateLimitServiceServer) string {
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
	t.Cleanup(func() {
		g.Stop()
		<-served
	})
	return ln.Addr().String()
}

func dial(t testing.TB, addr string) rlsv3.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// TestBothServicesAnswerAlike: the reference and granary, given one
// configuration, answer a run of requests with the same codes, limits
// and remaining counts: the peer measured is the service Envoy users run,
// doing the same work.
func TestBothServicesAnswerAlike(t *testing.T) {
	s := start(t, `
domain: alike
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: route
    value: /free
    rate_limit: {unlimited: true}
`)
	entry := func(k, v string) *ratelimitv3.RateLimitDescriptor {
		return &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: k, Value: v}}}
	}
	req := &rlsv3.RateLimitRequest{Domain: "alike", Descriptors: []*ratelimitv3.RateLimitDescriptor{entry("user", "ann"), entry("route", "/free"), entry("other", "x")}}
	type answer struct {
		overall   rlsv3.RateLimitResponse_Code
		codes     []rlsv3.RateLimitResponse_Code
		remaining []uint32
		limits    []uint32
	}
	ask := func(c rlsv3.RateLimitServiceClient) answer {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err := c.ShouldRateLimit(ctx, req)
		require.NoError(t, err)
		a := answer{overall: resp.GetOverallCode()}
		for _, st := range resp.GetStatuses() {
			a.codes = append(a.codes, st.GetCode())
			a.remaining = append(a.remaining, st.GetLimitRemaining())
			a.limits = append(a.limits, st.GetCurrentLimit().GetRequestsPerUnit())
		}
		return a
	}
	for i := range 4 {
		ref, got := ask(s.reference), ask(s.granary)
		require.Equal(t, ref, got, "request %d", i+1)
		if i == 0 {
			require.Equal(t, []uint32{2, 4294967295, 0}, got.remaining)
		}
		if i == 3 {
			require.Equal(t, rlsv3.RateLimitResponse_OVER_LIMIT, got.overall, "the fourth is over the limit of 3")
		}
	}
}

// BenchmarkShouldRateLimitAgainstEnvoyproxyRatelimit is the issue's
// measurement: ShouldRateLimit of three descriptors at 16 callers,
// envoyproxy/ratelimit with Redis and granary's service on one silo, in
// turns (rlsload). It reports each one's operations a second and p99,
// and granary's rate over the reference's.
func BenchmarkShouldRateLimitAgainstEnvoyproxyRatelimit(b *testing.B) {
	s := start(b, rlsload.Config)
	call := func(c rlsv3.RateLimitServiceClient) func(context.Context, int) error {
		return func(ctx context.Context, i int) error {
			resp, err := c.ShouldRateLimit(ctx, rlsload.Request(i))
			if err == nil && resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
				b.Fatalf("refused: %v", resp)
			}
			return err
		}
	}
	b.ResetTimer()
	results, err := rlsload.Run(context.Background(), b.N,
		rlsload.System{Name: "envoyproxy-ratelimit", Call: call(s.reference)},
		rlsload.System{Name: "granary", Call: call(s.granary)})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range results {
		b.ReportMetric(r.OpsPerSecond(), "ops/s-"+r.Name)
		b.ReportMetric(float64(r.Quantile(0.99).Microseconds()), "p99-µs-"+r.Name)
	}
	b.ReportMetric(results[1].OpsPerSecond()/results[0].OpsPerSecond(), "granary/envoyproxy-ratelimit")
}
