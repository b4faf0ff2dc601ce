package silo_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/echo"
	"github.com/granary-go/granary/internal/testcerts"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

// benchTLS is the TLS of a benchmark's connections, server and client
// ends; nil means plain TCP.
type benchTLS struct{ server, client *tls.Config }

// newBenchTLS makes a CA and the configurations of a TLS benchmark.
func newBenchTLS(b *testing.B) *benchTLS {
	ca := testcerts.NewCA(b, "bench")
	return &benchTLS{server: ca.ServerConfig(b), client: ca.ClientConfig()}
}

func (t *benchTLS) serverConfig() *tls.Config {
	if t == nil {
		return nil
	}
	return t.server
}

func (t *benchTLS) clientConfig() *tls.Config {
	if t == nil {
		return nil
	}
	return t.client
}

// benchSilo starts a silo and a client connected to its gateway over
// loopback, with TLS when sec is set.
func benchSilo(b *testing.B, sec *benchTLS, opts ...silo.Option) (*silo.Silo, *client.Client) {
	b.Helper()
	s, err := silo.New(silo.Options{GatewayAddress: "127.0.0.1:0", Name: "bench", Security: silo.Security{TLS: sec.serverConfig()}},
		append([]silo.Option{silo.WithLogger(quiet)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	if err := testgrain.RegisterCounterGrain(s, testgrain.New(nil)); err != nil {
		b.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	c, err := client.New(client.Options{Gateways: []string{s.GatewayAddr().String()}, TLS: sec.clientConfig()}, client.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Stop(ctx)
	})
	return s, c
}

// benchRefs returns one reference per worker, spread over keys grains.
func benchRefs(c *client.Client, workers, keys int) []testgrain.CounterRef {
	refs := make([]testgrain.CounterRef, workers)
	for w := range refs {
		refs[w] = testgrain.NewCounterRef(c, fmt.Sprint("key-", w%keys))
	}
	return refs
}

// benchEcho starts a bare echo server and a client connected to it over
// loopback, with TLS when sec is set: the same transport as the grain
// calls'.
func benchEcho(b *testing.B, sec *benchTLS) *echo.Client {
	b.Helper()
	srv, err := echo.Listen("127.0.0.1:0", transport.Options{TLS: sec.serverConfig()})
	if err != nil {
		b.Fatal(err)
	}
	c, err := echo.Dial(context.Background(), srv.Addr().String(), transport.Options{TLS: sec.clientConfig()})
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

// reportBatching reports how many frames each socket write carried, on the
// client and on the silo.
func reportBatching(b *testing.B, s *silo.Silo, c *client.Client) {
	ct := c.Stats().Transport
	st := s.Stats().Gateway.Transport
	if ct.BatchesWritten > 0 {
		b.ReportMetric(float64(ct.FramesWritten)/float64(ct.BatchesWritten), "client-frames/write")
	}
	if st.BatchesWritten > 0 {
		b.ReportMetric(float64(st.FramesWritten)/float64(st.BatchesWritten), "silo-frames/write")
	}
}

// runWorkers spreads b.N calls over workers goroutines; worker w calls
// call(w) and reports round trips per second.
func runWorkers(b *testing.B, workers int, call func(worker int) error) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	elapsed, err := timeWorkers(workers, b.N, call)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
}

// BenchmarkGrainCall measures a client-to-silo round trip through a
// generated reference: one key (hot) and sixteen keys (partitioned), with a
// caller that cannot cancel and with one that can.
func BenchmarkGrainCall(b *testing.B) { benchGrainCall(b, nil) }

// BenchmarkGrainCallTLS is BenchmarkGrainCall over TLS.
func BenchmarkGrainCallTLS(b *testing.B) { benchGrainCall(b, newBenchTLS(b)) }

func benchGrainCall(b *testing.B, sec *benchTLS) {
	for _, tc := range []struct {
		name        string
		workers     int
		keys        int
		cancellable bool
	}{
		{"sequential", 1, 1, false},
		{"sequential-cancellable", 1, 1, true},
		{"hot-key-16", 16, 1, false},
		{"hot-key-16-cancellable", 16, 1, true},
		{"partitioned-16", 16, 16, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, c := benchSilo(b, sec)
			refs := benchRefs(c, tc.workers, tc.keys)
			ctx := context.Background()
			if tc.cancellable {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			benchAdds(b, ctx, s, c, refs)
		})
	}
}

// benchAdds measures Add calls, one worker per reference, once each
// reference's grain is active.
func benchAdds(b *testing.B, ctx context.Context, s *silo.Silo, c *client.Client, refs []testgrain.CounterRef) {
	in := &testgrain.AddRequest{Delta: 1}
	for _, r := range refs { // activate before measuring
		if _, err := r.Add(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	runWorkers(b, len(refs), func(w int) error {
		_, err := refs[w].Add(ctx, in)
		return err
	})
	reportBatching(b, s, c)
}

// BenchmarkEcho is the transport ceiling measured beside the grain calls:
// a bare length-prefixed echo over one loopback connection, 48-byte
// payloads, answered inline on the server's reader goroutine.
func BenchmarkEcho(b *testing.B) { benchEchoCalls(b, nil) }

// BenchmarkEchoTLS is BenchmarkEcho over TLS.
func BenchmarkEchoTLS(b *testing.B) { benchEchoCalls(b, newBenchTLS(b)) }

func benchEchoCalls(b *testing.B, sec *benchTLS) {
	for _, tc := range []struct {
		name    string
		workers int
	}{{"sequential", 1}, {"parallel-16", 16}} {
		b.Run(tc.name, func(b *testing.B) {
			c := benchEcho(b, sec)
			payload := make([]byte, 48)
			runWorkers(b, tc.workers, func(int) error {
				_, err := c.Call(payload)
				return err
			})
			if st := c.Stats(); st.BatchesWritten > 0 {
				b.ReportMetric(float64(st.FramesWritten)/float64(st.BatchesWritten), "client-frames/write")
			}
		})
	}
}

// timeWorkers runs n calls spread over workers goroutines (worker w calls
// call(w)) and returns how long they took and the first error.
func timeWorkers(workers, n int, call func(worker int) error) (time.Duration, error) {
	return timeWorkersRecording(workers, n, call, nil)
}

// timeWorkersRecording is timeWorkers that also appends each call's
// latency to record[worker], when record is not nil.
func timeWorkersRecording(workers, n int, call func(worker int) error, record [][]time.Duration) (time.Duration, error) {
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
				var t0 time.Time
				if record != nil {
					t0 = time.Now()
				}
				if err := call(w); err != nil {
					errs <- err
					return
				}
				if record != nil {
					record[w] = append(record[w], time.Since(t0))
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	return elapsed, <-errs
}

// p99 returns the 99th percentile of the latencies recorded per worker.
func p99(record [][]time.Duration) time.Duration {
	var all []time.Duration
	for _, r := range record {
		all = append(all, r...)
	}
	if len(all) == 0 {
		return 0
	}
	slices.Sort(all)
	return all[len(all)*99/100]
}

// BenchmarkGrainToEchoRatio measures grain calls and the bare echo in
// alternating slices of a few thousand calls each, in one process, and
// reports the ratio of their throughputs. The machines we measure on are
// shared: their speed drifts by 10-20% within a minute, which moves two
// benchmarks run one after the other apart; slices taken turn about see
// the same drift, so the ratio is steadier than one computed from
// BenchmarkGrainCall and BenchmarkEcho.
func BenchmarkGrainToEchoRatio(b *testing.B) { benchGrainToEchoRatio(b, nil) }

// BenchmarkGrainToEchoRatioTLS is BenchmarkGrainToEchoRatio with both the
// grain calls and the echo over TLS.
func BenchmarkGrainToEchoRatioTLS(b *testing.B) { benchGrainToEchoRatio(b, newBenchTLS(b)) }

func benchGrainToEchoRatio(b *testing.B, sec *benchTLS) {
	const slice = 4096
	for _, tc := range []struct {
		name string
		keys int
	}{{"hot-key-16", 1}, {"partitioned-16", 16}} {
		b.Run(tc.name, func(b *testing.B) {
			const workers = 16
			_, c := benchSilo(b, sec)
			refs, ec := benchRefs(c, workers, tc.keys), benchEcho(b, sec)
			ctx, in, payload := context.Background(), &testgrain.AddRequest{Delta: 1}, make([]byte, 48)
			grain := func(w int) error { _, err := refs[w].Add(ctx, in); return err }
			bare := func(int) error { _, err := ec.Call(payload); return err }
			for _, warm := range []func(int) error{grain, bare} {
				if _, err := timeWorkers(workers, slice, warm); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			var grainTime, echoTime, grainCPU, echoCPU time.Duration
			calls := 0
			for calls < b.N {
				n := min(slice, b.N-calls)
				cpu0 := processCPU()
				g, err := timeWorkers(workers, n, grain)
				if err != nil {
					b.Fatal(err)
				}
				cpu1 := processCPU()
				e, err := timeWorkers(workers, n, bare)
				if err != nil {
					b.Fatal(err)
				}
				cpu2 := processCPU()
				grainTime, echoTime = grainTime+g, echoTime+e
				grainCPU, echoCPU = grainCPU+cpu1-cpu0, echoCPU+cpu2-cpu1
				calls += n
			}
			b.StopTimer()
			b.ReportMetric(float64(calls)/grainTime.Seconds(), "grain-calls/s")
			b.ReportMetric(float64(calls)/echoTime.Seconds(), "echo-calls/s")
			b.ReportMetric(echoTime.Seconds()/grainTime.Seconds(), "ratio")
			// CPU per call, both ends together: what a call costs whatever
			// the machine's neighbours do to the wall clock.
			if grainCPU > 0 && echoCPU > 0 {
				b.ReportMetric(float64(grainCPU.Nanoseconds())/float64(calls), "grain-cpu-ns/call")
				b.ReportMetric(float64(echoCPU.Nanoseconds())/float64(calls), "echo-cpu-ns/call")
				b.ReportMetric(float64(echoCPU)/float64(grainCPU), "cpu-ratio")
			}
		})
	}
}

// BenchmarkForwardedToEchoRatio measures, in alternating slices as
// BenchmarkGrainToEchoRatio does, on a two-silo cluster of the test kit: a
// client calling grains on the silo it is connected to (direct), a client
// calling the same grains through the other silo's gateway, which finds
// them in its directory cache and relays each call (forwarded), and the
// bare echo. It reports throughput and p99 of each, and the forwarded
// call's throughput as ratios to the other two.
func BenchmarkForwardedToEchoRatio(b *testing.B) {
	const slice = 4096
	for _, tc := range []struct {
		name string
		keys int
	}{{"hot-key-16", 1}, {"partitioned-16", 16}} {
		b.Run(tc.name, func(b *testing.B) {
			const workers = 16
			c := testcluster.New(b, testcluster.Options{Silos: 2, Register: func(s *silo.Silo) error {
				return testgrain.RegisterCounterGrain(s, testgrain.New(nil))
			}})
			clientOf := func(i int) *client.Client {
				return c.NewClient(client.Options{Gateways: []string{c.Silo(i).GatewayAddr().String()}})
			}
			direct, forwarded := benchRefs(clientOf(1), workers, tc.keys), benchRefs(clientOf(0), workers, tc.keys)
			ctx, in, payload := context.Background(), &testgrain.AddRequest{Delta: 1}, make([]byte, 48)
			for _, ref := range direct {
				if _, err := ref.Add(ctx, in, c.PlaceOn(1)); err != nil {
					b.Fatal(err)
				}
			}
			ec := benchEcho(b, nil)
			kinds := []func(int) error{
				func(w int) error { _, err := direct[w].Add(ctx, in); return err },
				func(w int) error { _, err := forwarded[w].Add(ctx, in); return err },
				func(int) error { _, err := ec.Call(payload); return err },
			}
			for _, warm := range kinds {
				if _, err := timeWorkers(workers, slice, warm); err != nil {
					b.Fatal(err)
				}
			}
			for _, ref := range direct {
				if !c.Silo(1).Host().IsActive(ref.GrainID()) {
					b.Fatalf("%s is not on silo 1", ref.GrainID())
				}
			}
			var record [3][][]time.Duration
			for i := range record {
				record[i] = make([][]time.Duration, workers)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var took [3]time.Duration
			calls := 0
			for calls < b.N {
				n := min(slice, b.N-calls)
				for i, kind := range kinds {
					d, err := timeWorkersRecording(workers, n, kind, record[i])
					if err != nil {
						b.Fatal(err)
					}
					took[i] += d
				}
				calls += n
			}
			b.StopTimer()
			b.ReportMetric(float64(calls)/took[0].Seconds(), "direct-calls/s")
			b.ReportMetric(float64(calls)/took[1].Seconds(), "forwarded-calls/s")
			b.ReportMetric(float64(calls)/took[2].Seconds(), "echo-calls/s")
			b.ReportMetric(took[0].Seconds()/took[1].Seconds(), "forwarded/direct")
			b.ReportMetric(took[2].Seconds()/took[1].Seconds(), "forwarded/echo")
			b.ReportMetric(took[2].Seconds()/took[0].Seconds(), "direct/echo")
			for i, name := range []string{"direct", "forwarded", "echo"} {
				b.ReportMetric(float64(p99(record[i]).Microseconds()), name+"-p99-µs")
			}
		})
	}
}

// BenchmarkSiloCallerGrainCall measures a call made in the silo's process
// through its own caller (as a grain calls another on the same silo):
// no connection, the request and reply still copied through their
// encoding.
func BenchmarkSiloCallerGrainCall(b *testing.B) {
	for _, tc := range []struct {
		name    string
		workers int
		keys    int
	}{{"sequential", 1, 1}, {"partitioned-16", 16, 16}} {
		b.Run(tc.name, func(b *testing.B) {
			s, _ := benchSilo(b, nil)
			refs := make([]testgrain.CounterRef, tc.workers)
			for w := range refs {
				refs[w] = testgrain.NewCounterRef(s.Caller(), fmt.Sprint("key-", w%tc.keys))
			}
			ctx, in := context.Background(), &testgrain.AddRequest{Delta: 1}
			for _, r := range refs {
				if _, err := r.Add(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
			runWorkers(b, len(refs), func(w int) error {
				_, err := refs[w].Add(ctx, in)
				return err
			})
		})
	}
}
