package ratelimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/silo"
)

// acquisitionsReported reads the limiter acquisitions of one collection
// by result, with the silo each was reported for.
func acquisitionsReported(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "granary.ratelimit.acquisitions" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				s, _ := dp.Attributes.Value(attribute.Key("silo"))
				res, _ := dp.Attributes.Value(attribute.Key("result"))
				out[s.AsString()+"/"+res.AsString()] = dp.Value
			}
		}
	}
	return out
}

// A program that embeds a silo with a meter provider gets the limiter
// instruments beside the silo's own, from Register alone, for as long as
// the silo runs.
func TestRegisterReportsLimiterMetricsThroughTheSilosMeterProvider(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	s, err := silo.New(silo.Options{Name: "metered", DisableGateway: true}, silo.WithLogger(quiet), silo.WithMeterProvider(mp))
	require.NoError(t, err)
	require.NoError(t, ratelimit.Register(s, ratelimit.Defaults{}))
	require.NoError(t, ratelimit.Register(s, ratelimit.Defaults{}), "registering again")
	require.NoError(t, s.Start(context.Background()))
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = s.Stop(context.Background())
		}
	})

	ctx := context.Background()
	h := ratelimit.FixedWindow(s.Caller(), "metered", ratelimit.FixedWindowOptions{PermitLimit: 1, Window: 1 << 40, ManualReplenishment: true})
	for range 3 {
		_, err := h.Acquire(ctx, 1)
		require.NoError(t, err)
	}
	assert.Equal(t, map[string]int64{
		"metered/granted": 1, "metered/rejected": 2, "metered/expired": 0, "metered/cancelled": 0,
	}, acquisitionsReported(t, reader), "one data point per result, registered once")

	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, s.Stop(stopCtx))
	stopped = true
	assert.Empty(t, acquisitionsReported(t, reader), "a stopped silo's limiters are no longer reported")
}

// Registering the limiter instruments while the provider collects does
// not deadlock: a collection holds the provider's lock while it reads
// each silo, and registering takes that lock.
func TestRegisterWhileTheProviderCollects(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	registerWhileCollecting(t, mp, reader)
}

// A program may report SiloStats from an instrument of its own, as the
// limiter counters were read before Register attached them: its callback
// runs inside a collection, which holds the provider's lock. Registering
// on another silo meanwhile must not wait for that lock while it holds
// what SiloStats takes.
func TestRegisterWhileACollectionReadsSiloStats(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	first, err := silo.New(silo.Options{DisableGateway: true}, silo.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, ratelimit.Register(first, ratelimit.Defaults{}))
	meter := mp.Meter("app")
	granted, err := meter.Int64ObservableCounter("app.granted")
	require.NoError(t, err)
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st, _ := ratelimit.SiloStats(first)
		o.ObserveInt64(granted, int64(st.Granted))
		return nil
	}, granted)
	require.NoError(t, err)
	registerWhileCollecting(t, mp, reader)
}

// registerWhileCollecting registers the limiters on new silos with mp
// while reader collects without pause, and fails if that deadlocks.
func registerWhileCollecting(t *testing.T, mp *sdkmetric.MeterProvider, reader *sdkmetric.ManualReader) {
	t.Helper()
	stop := make(chan struct{})
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var rm metricdata.ResourceMetrics
			_ = reader.Collect(context.Background(), &rm)
		}
	}()
	done := make(chan struct{})
	var registered atomic.Int64
	go func() {
		defer close(done)
		for range 100 {
			s, err := silo.New(silo.Options{DisableGateway: true}, silo.WithLogger(quiet), silo.WithMeterProvider(mp))
			if !assert.NoError(t, err) {
				return
			}
			assert.NoError(t, ratelimit.Register(s, ratelimit.Defaults{}))
			registered.Add(1)
		}
	}()
	// Each collection reads every silo registered so far, so the
	// registrations slow down as they go, more so on a loaded machine: a
	// deadlock is no registration at all for a long while, not a slow
	// total.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, still := int64(-1), 0
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-tick.C:
			if n := registered.Load(); n != last {
				last, still = n, 0
			} else if still++; still == 20 {
				t.Fatalf("registering deadlocked with a collection after %d registrations", n) // both goroutines stay stuck
			}
		}
	}
	close(stop)
	<-collected
}
