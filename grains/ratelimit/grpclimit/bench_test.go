package grpclimit_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/grpclimit"
	"github.com/granary-go/granary/grains/ratelimit/internal/silotest"
)

// BenchmarkInterceptorPassingCall is the cost of the interceptor on a call
// it lets through: a health Check over loopback with no interceptor, with
// one rule (a fixed window by method, on a silo in the process), and with
// three (by method, by peer, by metadata), one call at a time. The
// difference to "none" is the interceptor's overhead per call (a grain
// call of the silo in the process, for each rule, at once).
func BenchmarkInterceptorPassingCall(b *testing.B) {
	caller := silotest.Start(b, "grpclimit-bench", nil).Caller()
	configs, err := ratelimit.NewConfigs(ratelimit.Named("open", ratelimit.FixedWindowOptions{PermitLimit: 1 << 62, Window: time.Hour}))
	if err != nil {
		b.Fatal(err)
	}
	limiter := func(rules ...grpclimit.Rule) grpc.ServerOption {
		l, err := grpclimit.New(caller, configs, grpclimit.Options{Rules: rules})
		if err != nil {
			b.Fatal(err)
		}
		return grpc.UnaryInterceptor(l.UnaryServerInterceptor())
	}
	cases := []struct {
		name string
		opts []grpc.ServerOption
	}{
		{"none", nil},
		{"one-rule", []grpc.ServerOption{limiter(grpclimit.ByMethod("open"))}},
		{"three-rules", []grpc.ServerOption{limiter(grpclimit.ByMethod("open"), grpclimit.ByPeer("open").WithName("peer"), grpclimit.ByMetadata("open", "user-agent"))}},
	}
	clients := make([]healthpb.HealthClient, len(cases))
	for i, c := range cases {
		dial, _ := healthServer(b, nil, c.opts...)
		clients[i] = dial(nil)
		if _, err := clients[i].Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			b.Fatal(err) // and the limiters' grains are active
		}
	}
	// The variants take turns in slices of calls, so that they see the
	// same machine; allocations are the process's, server side included.
	const slice = 256
	spent := make([]time.Duration, len(cases))
	allocs := make([]uint64, len(cases))
	calls := 0
	var before, after runtime.MemStats
	b.ResetTimer()
	for calls < b.N {
		for i, client := range clients {
			runtime.ReadMemStats(&before)
			start := time.Now()
			for range slice {
				if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
					b.Fatal(err)
				}
			}
			spent[i] += time.Since(start)
			runtime.ReadMemStats(&after)
			allocs[i] += after.Mallocs - before.Mallocs
		}
		calls += slice * len(clients)
	}
	b.StopTimer()
	perVariant := float64(calls / len(clients))
	for i, c := range cases {
		b.ReportMetric(float64(spent[i].Nanoseconds())/perVariant, "ns/call-"+c.name)
		b.ReportMetric(float64(allocs[i])/perVariant, "allocs/call-"+c.name)
	}
	b.ReportMetric(float64((spent[1]-spent[0]).Nanoseconds())/perVariant, "ns-overhead-one-rule")
	b.ReportMetric(float64((spent[2]-spent[0]).Nanoseconds())/perVariant, "ns-overhead-three-rules")
}
