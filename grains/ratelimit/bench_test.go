package ratelimit_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/granary-go/granary/examples/counter"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/internal/echo"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// huge is a limit no benchmark reaches: every measured acquisition is
// granted.
const huge = 1 << 40

// benchOp is one measured operation on a holder.
type benchOp struct {
	name string
	// holder returns a holder bound to options that never reject.
	holder func(c proxy.Caller, key string) ratelimit.Limiter
	// release says whether the operation releases what it acquired.
	release bool
	// attempt makes the operation TryAcquire rather than
	// AcquireAndConfigure.
	attempt bool
}

var benchOps = []benchOp{
	{"fixed-window", func(c proxy.Caller, key string) ratelimit.Limiter {
		return ratelimit.FixedWindow(c, key, fixedOptions(huge, 0))
	}, false, false},
	{"sliding-window", func(c proxy.Caller, key string) ratelimit.Limiter {
		return ratelimit.SlidingWindow(c, key, slidingOptions(huge, 0))
	}, false, false},
	{"token-bucket", func(c proxy.Caller, key string) ratelimit.Limiter {
		return ratelimit.TokenBucket(c, key, tokenOptions(huge, 0))
	}, false, false},
	{"concurrency-acquire-release", func(c proxy.Caller, key string) ratelimit.Limiter {
		return ratelimit.Concurrency(c, key, concurrencyOptions(huge, 0))
	}, true, false},
	{"fixed-window-try", func(c proxy.Caller, key string) ratelimit.Limiter {
		return ratelimit.FixedWindow(c, key, fixedOptions(huge, 0))
	}, false, true},
	// Leased quota answers from a slice: automatic replenishment, which
	// leasing needs, over a window no run outlasts.
	{"fixed-window-leased", func(c proxy.Caller, key string) ratelimit.Limiter {
		return ratelimit.FixedWindow(c, key, ratelimit.FixedWindowOptions{PermitLimit: huge, Window: time.Hour}).Leased(ratelimit.LeaseOptions{})
	}, false, false},
}

// closeHolders closes the holders that lease when the benchmark ends.
func closeHolders(b *testing.B, holders []ratelimit.Limiter) {
	b.Cleanup(func() {
		for _, h := range holders {
			if c, ok := h.(interface{ Close(context.Context) error }); ok {
				_ = c.Close(context.Background())
			}
		}
	})
}

var benchScenarios = []struct {
	name          string
	workers, keys int
}{{"sequential", 1, 1}, {"hot-key-16", 16, 1}, {"partitioned-16", 16, 16}}

func registerCounter(s *silo.Silo) error { return counter.RegisterCounterGrain(s, counter.New) }

// benchEcho starts the bare transport echo and a client of it.
func benchEcho(b *testing.B) *echo.Client {
	b.Helper()
	srv, err := echo.Listen("127.0.0.1:0", transport.Options{})
	if err != nil {
		b.Fatal(err)
	}
	c, err := echo.Dial(context.Background(), srv.Addr().String(), transport.Options{})
	if err != nil {
		_ = srv.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = c.Close()
		_ = srv.Close()
	})
	return c
}

// acquirer returns worker w's measured operation.
func acquirer(op benchOp, holders []ratelimit.Limiter) func(w int) error {
	ctx := context.Background()
	return func(w int) error {
		var l *ratelimit.Lease
		var err error
		if op.attempt {
			l, err = holders[w].TryAcquire(ctx, 1)
		} else {
			l, err = holders[w].AcquireAndConfigure(ctx, 1)
		}
		if err != nil {
			return err
		}
		if !l.Acquired() {
			return fmt.Errorf("rejected: %v", l)
		}
		if op.release {
			return l.Release(ctx)
		}
		return nil
	}
}

// BenchmarkHolder measures a holder's acquisition (and release, for the
// concurrency limiter) through the silo's own caller and through a gateway
// client, with its allocation per operation (ns/op, B/op and allocs/op).
func BenchmarkHolder(b *testing.B) {
	for _, k := range entries {
		for _, op := range benchOps {
			for _, sc := range benchScenarios {
				b.Run(fmt.Sprintf("%s/%s/%s", k, op.name, sc.name), func(b *testing.B) {
					e := newEnv(b, uncounted())
					caller := e.caller(k)
					holders := make([]ratelimit.Limiter, sc.workers)
					for w := range holders {
						holders[w] = op.holder(caller, fmt.Sprint("bench-", w%sc.keys))
					}
					closeHolders(b, holders)
					call := acquirer(op, holders)
					if _, err := timeWorkers(sc.workers, 4096, call); err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					b.ResetTimer()
					elapsed, err := timeWorkers(sc.workers, b.N, call)
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
				})
			}
		}
	}
}

// BenchmarkHolderRatio measures, in alternating slices of 4096 operations
// in one process, a holder's operation, the plain grain call through the
// same caller (the counter example's Add) and the bare transport echo, and
// reports each one's throughput and the holder's as a ratio of the other
// two. The machines we measure on are shared and drift within a minute;
// slices taken turn about see the same drift. Allocation is counted over
// the holder's slices only, for the whole process (client and silo
// together).
func BenchmarkHolderRatio(b *testing.B) {
	const slice = 4096
	for _, k := range entries {
		for _, op := range benchOps {
			for _, sc := range benchScenarios {
				b.Run(fmt.Sprintf("%s/%s/%s", k, op.name, sc.name), func(b *testing.B) {
					e := newEnv(b, uncounted(), withGrains(registerCounter))
					caller := e.caller(k)
					holders := make([]ratelimit.Limiter, sc.workers)
					refs := make([]counter.CounterRef, sc.workers)
					for w := range holders {
						key := fmt.Sprint("bench-", w%sc.keys)
						holders[w] = op.holder(caller, key)
						refs[w] = counter.NewCounterRef(caller, key)
					}
					closeHolders(b, holders)
					ec := benchEcho(b)
					ctx, in, payload := context.Background(), &counter.AddRequest{Delta: 1}, make([]byte, 48)
					limit := acquirer(op, holders)
					grain := func(w int) error { _, err := refs[w].Add(ctx, in); return err }
					bare := func(int) error { _, err := ec.Call(payload); return err }
					for _, warm := range []func(int) error{limit, grain, bare} {
						if _, err := timeWorkers(sc.workers, slice, warm); err != nil {
							b.Fatal(err)
						}
					}
					var limitTime, grainTime, echoTime time.Duration
					var bytes, mallocs uint64
					var ms runtime.MemStats
					b.ResetTimer()
					done := 0
					for done < b.N {
						n := min(slice, b.N-done)
						runtime.ReadMemStats(&ms)
						bytes0, mallocs0 := ms.TotalAlloc, ms.Mallocs
						l, err := timeWorkers(sc.workers, n, limit)
						if err != nil {
							b.Fatal(err)
						}
						runtime.ReadMemStats(&ms)
						bytes, mallocs = bytes+ms.TotalAlloc-bytes0, mallocs+ms.Mallocs-mallocs0
						g, err := timeWorkers(sc.workers, n, grain)
						if err != nil {
							b.Fatal(err)
						}
						x, err := timeWorkers(sc.workers, n, bare)
						if err != nil {
							b.Fatal(err)
						}
						limitTime, grainTime, echoTime = limitTime+l, grainTime+g, echoTime+x
						done += n
					}
					b.StopTimer()
					b.ReportMetric(float64(done)/limitTime.Seconds(), "ops/s")
					b.ReportMetric(float64(done)/grainTime.Seconds(), "grain-calls/s")
					b.ReportMetric(float64(done)/echoTime.Seconds(), "echo-calls/s")
					b.ReportMetric(grainTime.Seconds()/limitTime.Seconds(), "x-grain")
					b.ReportMetric(echoTime.Seconds()/limitTime.Seconds(), "x-echo")
					b.ReportMetric(float64(bytes)/float64(done), "op-B/op")
					b.ReportMetric(float64(mallocs)/float64(done), "op-allocs/op")
				})
			}
		}
	}
}

// timeWorkers runs n calls spread over workers goroutines (worker w calls
// call(w)) and returns how long they took and the first error.
func timeWorkers(workers, n int, call func(worker int) error) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for w := range workers {
		count := n / workers
		if w < n%workers {
			count++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range count {
				if err := call(w); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	return elapsed, <-errs
}
