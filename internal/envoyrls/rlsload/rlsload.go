// Package rlsload is the load of the ShouldRateLimit benchmarks, shared
// by internal/envoyrls's (granary against its own API) and
// bench/envoyratelimit's (granary against envoyproxy/ratelimit), so that
// both send the same requests the same way: three descriptors a request,
// 16 callers at once, the systems taking turns in slices of calls so
// that each sees the same machine.
package rlsload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// Config is the limits of the load, in envoyproxy/ratelimit's format,
// which granary reads too: a limit per route, per route and user, and per
// client address, each of 4 000 000 000 an hour, so that nothing is
// refused and every request counts against all three.
const Config = `
domain: bench
descriptors:
  - key: route
    rate_limit: {unit: hour, requests_per_unit: 4000000000}
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 4000000000}
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 4000000000}
`

// Callers is how many goroutines call at once, as in the issue's
// measurement.
const Callers = 16

// Slice is how many calls each caller makes in one turn of a system.
const Slice = 64

// Request is caller i's request: the route every caller shares (a hot
// key), the caller's address, and the route with the caller's user.
func Request(i int) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		descriptor("route", "/api"),
		descriptor("remote_address", fmt.Sprintf("10.0.0.%d", i)),
		descriptor("route", "/api", "user", fmt.Sprintf("user-%d", i)),
	}}
}

func descriptor(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// System is one system under the load: Call makes one call for caller i
// (0 <= i < Callers).
type System struct {
	Name string
	Call func(ctx context.Context, i int) error
}

// Result is what one system did: how many calls, in how long (its turns
// added up), and each call's latency.
type Result struct {
	Name      string
	Calls     int
	Elapsed   time.Duration
	latencies []time.Duration // sorted
}

// OpsPerSecond is the system's calls a second over its turns.
func (r Result) OpsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Calls) / r.Elapsed.Seconds()
}

// Quantile returns the latency below which the fraction q of the calls
// took (0.99: the p99); 0 without calls.
func (r Result) Quantile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	return r.latencies[min(int(float64(len(r.latencies))*q), len(r.latencies)-1)]
}

// Run calls every system once per caller first (activating what the
// calls need, untimed), then has them take turns, each turn Callers
// goroutines making Slice calls each, until at least total calls were
// made in all. It stops at the first failed call and returns its error.
func Run(ctx context.Context, total int, systems ...System) ([]Result, error) {
	for _, s := range systems {
		for i := range Callers {
			if err := s.Call(ctx, i); err != nil {
				return nil, fmt.Errorf("rlsload: %s: %w", s.Name, err)
			}
		}
	}
	results := make([]Result, len(systems))
	for done := 0; done < total; done += Callers * Slice * len(systems) {
		for n, s := range systems {
			per := make([][]time.Duration, Callers)
			errs := make([]error, Callers)
			start := time.Now()
			var wg sync.WaitGroup
			for i := range Callers {
				wg.Go(func() {
					per[i] = make([]time.Duration, 0, Slice)
					for range Slice {
						t0 := time.Now()
						if err := s.Call(ctx, i); err != nil {
							errs[i] = err
							return
						}
						per[i] = append(per[i], time.Since(t0))
					}
				})
			}
			wg.Wait()
			results[n].Elapsed += time.Since(start)
			if err := errors.Join(errs...); err != nil {
				return nil, fmt.Errorf("rlsload: %s: %w", s.Name, err)
			}
			for _, l := range per {
				results[n].latencies = append(results[n].latencies, l...)
			}
		}
	}
	for n, s := range systems {
		results[n].Name = s.Name
		results[n].Calls = len(results[n].latencies)
		slices.Sort(results[n].latencies)
	}
	return results, nil
}
