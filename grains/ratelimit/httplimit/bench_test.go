package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/httplimit"
	"github.com/granary-go/granary/proxy"
)

// discard is a ResponseWriter that keeps nothing, so that the benchmarks
// measure the middleware rather than a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkMiddleware measures a request through the middleware (one ByIP
// rule on a fixed window) against the same handler without it ("bare"),
// and against the holder's acquisition alone ("holder": the grain call
// the middleware makes, without HTTP). "allowed" never reaches the limit;
// "rejected" is over it, so every request is answered 429. Requests are
// served in process (no HTTP connection), so the figures are the
// middleware's own cost plus its grain call, through the silo's own
// caller or a client of its gateway.
func BenchmarkMiddleware(b *testing.B) {
	s := startSilo(b, nil)
	entries := []struct {
		name   string
		caller proxy.Caller
	}{
		{"silo-caller", s.Caller()},
		{"gateway", connect(b, s)},
	}
	configs := mustConfigs(b,
		ratelimit.Named("open", ratelimit.FixedWindowOptions{PermitLimit: 1 << 62, Window: never, ManualReplenishment: true}),
		ratelimit.Named("shut", ratelimit.FixedWindowOptions{PermitLimit: 1, Window: never, ManualReplenishment: true}),
	)
	for _, e := range entries {
		allowed := mustMiddleware(b, e.caller, configs, httplimit.Options{Rules: []httplimit.Rule{httplimit.ByIP("open")}, KeyPrefix: e.name})
		rejected := mustMiddleware(b, e.caller, configs, httplimit.Options{Rules: []httplimit.Rule{httplimit.ByIP("shut")}, KeyPrefix: e.name})
		holder := ratelimit.FixedWindow(e.caller, "bench", ratelimit.FixedWindowOptions{PermitLimit: 1 << 62, Window: never, ManualReplenishment: true})
		serveOnce := func(h http.Handler) func() {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			w := &discard{h: http.Header{}}
			return func() {
				clear(w.h)
				h.ServeHTTP(w, r)
			}
		}
		// Take the one permit "shut" has, so that every measured request is rejected.
		serveOnce(rejected.Handler(ok))()
		cases := []struct {
			name string
			run  func() func()
		}{
			{"bare", func() func() { return serveOnce(ok) }},
			{"holder", func() func() {
				return func() {
					l, err := holder.Acquire(context.Background(), 1)
					if err != nil || !l.Acquired() {
						b.Fatal(l, err)
					}
				}
			}},
			{"allowed", func() func() { return serveOnce(allowed.Handler(ok)) }},
			{"rejected", func() func() { return serveOnce(rejected.Handler(ok)) }},
		}
		for _, c := range cases {
			b.Run(e.name+"/"+c.name+"/serial", func(b *testing.B) {
				op := c.run()
				op() // the grain is active before the clock starts
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					op()
				}
			})
			b.Run(e.name+"/"+c.name+"/parallel16", func(b *testing.B) {
				c.run()()
				b.ReportAllocs()
				b.SetParallelism(8) // 16 goroutines on 2 cores
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					op := c.run()
					for pb.Next() {
						op()
					}
				})
			})
		}
	}
	require.NotNil(b, s)
}

// BenchmarkMiddlewareOverhead alternates, in slices of 512 requests, the
// same handler bare, the holder's acquisition alone and the handler behind
// the middleware, so that the three see the same machine; it reports the
// mean time of each (ns/bare, ns/holder, ns/middleware) and the
// middleware's cost beyond its grain call (ns/overhead = middleware -
// holder). ns/op is the middleware's. The rejected cases compare a
// rejected acquisition with a 429 answered by the middleware.
func BenchmarkMiddlewareOverhead(b *testing.B) {
	s := startSilo(b, nil)
	configs := mustConfigs(b,
		ratelimit.Named("open", ratelimit.FixedWindowOptions{PermitLimit: 1 << 62, Window: never, ManualReplenishment: true}),
		ratelimit.Named("shut", ratelimit.FixedWindowOptions{PermitLimit: 1, Window: never, ManualReplenishment: true}),
	)
	for _, e := range []struct {
		name   string
		caller proxy.Caller
	}{{"silo-caller", s.Caller()}, {"gateway", connect(b, s)}} {
		for _, outcome := range []string{"allowed", "rejected"} {
			b.Run(e.name+"/"+outcome, func(b *testing.B) {
				config := map[string]string{"allowed": "open", "rejected": "shut"}[outcome]
				prefix := "overhead-" + e.name
				m := mustMiddleware(b, e.caller, configs, httplimit.Options{Rules: []httplimit.Rule{httplimit.ByIP(config)}, KeyPrefix: prefix})
				o, _ := ratelimit.Lookup[ratelimit.FixedWindowOptions](configs, config)
				// The holder of the very limiter the middleware uses.
				holder := ratelimit.FixedWindow(e.caller, httplimit.Key(prefix, "ip", config, "192.0.2.1"), o)
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				w := &discard{h: http.Header{}}
				limited := m.Handler(ok)
				steps := []func(){
					func() { clear(w.h); ok.ServeHTTP(w, r) },
					func() {
						if _, err := holder.Acquire(context.Background(), 1); err != nil {
							b.Fatal(err)
						}
					},
					func() { clear(w.h); limited.ServeHTTP(w, r) },
				}
				steps[2]() // the grain is active, and "shut" is spent
				var spent [3]time.Duration
				b.ReportAllocs()
				b.ResetTimer()
				for done := 0; done < b.N; {
					n := min(512, b.N-done)
					for i, step := range steps {
						if i != 2 {
							b.StopTimer()
						}
						start := time.Now()
						for range n {
							step()
						}
						spent[i] += time.Since(start)
						if i != 2 {
							b.StartTimer()
						}
					}
					done += n
				}
				per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
				b.ReportMetric(per(spent[0]), "ns/bare")
				b.ReportMetric(per(spent[1]), "ns/holder")
				b.ReportMetric(per(spent[2]), "ns/middleware")
				b.ReportMetric(per(spent[2]-spent[1]), "ns/overhead")
			})
		}
	}
}
