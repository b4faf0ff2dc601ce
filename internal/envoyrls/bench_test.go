package envoyrls_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi"
	apiv1 "github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1/ratelimitv1connect"
	"github.com/granary-go/granary/internal/envoyrls"
	"github.com/granary-go/granary/internal/envoyrls/rlsload"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

// BenchmarkShouldRateLimitAgainstTheAPI decides three descriptors at 16
// callers through a grpc-go client, four ways on one silo: Envoy's
// ShouldRateLimit with limit_remaining and without (SkipRemaining; both
// one round of grain calls, the answers carrying what is left), and
// granary's own API, AcquireMany of the same three limits over gRPC,
// attempts or not. The load is rlsload's: the variants take turns in
// slices of 16x64 calls, so that they see the same machine. It reports
// each variant's operations a second (ops/s-...) and p99 latency
// (p99-µs-...); ns/op is all of them together.
func BenchmarkShouldRateLimitAgainstTheAPI(b *testing.B) {
	c := testcluster.New(b, testcluster.Options{Silos: 1,
		Register: func(s *silo.Silo) error { return ratelimit.Register(s, ratelimit.Defaults{}) }})
	caller := c.Silo(0).Caller()
	cfg, err := envoyrls.Parse("bench.yaml", []byte(rlsload.Config))
	if err != nil {
		b.Fatal(err)
	}
	withRemaining := envoyrls.NewServer(caller, envoyrls.Options{})
	withRemaining.SetConfig(cfg)
	skipRemaining := envoyrls.NewServer(caller, envoyrls.Options{SkipRemaining: true})
	skipRemaining.SetConfig(cfg)
	remainingClient, skipRemainingClient := serveRLS(b, withRemaining), serveRLS(b, skipRemaining)

	configs, err := ratelimit.NewConfigs(ratelimit.Named("bench", ratelimit.FixedWindowOptions{PermitLimit: 4_000_000_000, Window: time.Hour}))
	if err != nil {
		b.Fatal(err)
	}
	apiConn := serveAPI(b, caller, configs)

	apiRequest := func(i int, attempt bool) *apiv1.AcquireManyRequest {
		acquisition := func(key string) *apiv1.AcquireRequest {
			return &apiv1.AcquireRequest{Algorithm: apiv1.Algorithm_ALGORITHM_FIXED_WINDOW, Key: key, Config: "bench"}
		}
		return &apiv1.AcquireManyRequest{Attempt: attempt, Acquisitions: []*apiv1.AcquireRequest{
			acquisition("route:/api"), acquisition(fmt.Sprintf("ip:10.0.0.%d", i)), acquisition(fmt.Sprintf("user:/api:%d", i))}}
	}
	acquireMany := "/" + ratelimitv1connect.RateLimitServiceName + "/AcquireMany"
	variants := []rlsload.System{
		{Name: "envoy", Call: func(ctx context.Context, i int) error {
			_, err := remainingClient.ShouldRateLimit(ctx, rlsload.Request(i))
			return err
		}},
		{Name: "envoy-skip-remaining", Call: func(ctx context.Context, i int) error {
			_, err := skipRemainingClient.ShouldRateLimit(ctx, rlsload.Request(i))
			return err
		}},
		{Name: "api-attempt", Call: func(ctx context.Context, i int) error {
			return apiConn.Invoke(ctx, acquireMany, apiRequest(i, true), new(apiv1.AcquireManyResponse))
		}},
		{Name: "api-acquire", Call: func(ctx context.Context, i int) error {
			return apiConn.Invoke(ctx, acquireMany, apiRequest(i, false), new(apiv1.AcquireManyResponse))
		}},
	}
	b.ResetTimer()
	results, err := rlsload.Run(context.Background(), b.N, variants...)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range results {
		b.ReportMetric(r.OpsPerSecond(), "ops/s-"+r.Name)
		b.ReportMetric(float64(r.Quantile(0.99).Microseconds()), "p99-µs-"+r.Name)
	}
	// Ratios of one run hold on a loaded machine better than the rates.
	b.ReportMetric(results[0].OpsPerSecond()/results[2].OpsPerSecond(), "envoy/api-attempt")
	b.ReportMetric(results[1].OpsPerSecond()/results[2].OpsPerSecond(), "envoy-skip-remaining/api-attempt")
}

// serveAPI serves granary's rate-limit API on a loopback port in clear
// text HTTP/2, as the binary's HTTP port does, and returns a grpc-go
// connection to it.
func serveAPI(b *testing.B, caller proxy.Caller, configs *ratelimit.Configs) *grpc.ClientConn {
	path, h, err := ratelimitapi.NewHandler(caller, configs, ratelimitapi.Options{})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(path, h)
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: protocols}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	conn, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = conn.Close()
		_ = srv.Close()
		<-served
	})
	return conn
}

// BenchmarkShouldRateLimitInProcess is one ShouldRateLimit of three
// descriptors called in process (no gRPC) on a silo's own caller, with
// and without limit_remaining, beside the AcquireMany of three limits it
// is built on: the service's own cost and allocations (the process's,
// grain side included), to hold a change against.
func BenchmarkShouldRateLimitInProcess(b *testing.B) {
	c := testcluster.New(b, testcluster.Options{Silos: 1,
		Register: func(s *silo.Silo) error { return ratelimit.Register(s, ratelimit.Defaults{}) }})
	cfg, err := envoyrls.Parse("bench.yaml", []byte(rlsload.Config))
	if err != nil {
		b.Fatal(err)
	}
	req := rlsload.Request(1)
	// The decision alone, as the service takes it: the floor of its cost.
	open := ratelimit.FixedWindow(c.Silo(0).Caller(), "", ratelimit.FixedWindowOptions{PermitLimit: 4_000_000_000, Window: time.Hour})
	b.Run("acquire-many", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, ok := ratelimit.AcquireMany(context.Background(), ratelimit.ManyOptions{Try: true},
				ratelimit.Acquisition{Limiter: open.ForKey("route"), Permits: 1},
				ratelimit.Acquisition{Limiter: open.ForKey("ip"), Permits: 1},
				ratelimit.Acquisition{Limiter: open.ForKey("user"), Permits: 1})
			if !ok {
				b.Fatal("refused")
			}
		}
	})
	for _, remaining := range []bool{true, false} {
		s := envoyrls.NewServer(c.Silo(0).Caller(), envoyrls.Options{SkipRemaining: !remaining})
		s.SetConfig(cfg)
		name := "skip-remaining"
		if remaining {
			name = "with-remaining"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.ShouldRateLimit(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
