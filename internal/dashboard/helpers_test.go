package dashboard

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/silo"
)

// startSilo starts a silo with the limiter grains, its dashboard, and a
// meter provider whose Prometheus exporter reports to the registry
// returned, as the granary binary's does.
func startSilo(t testing.TB, opts Options) (*silo.Silo, *Dashboard, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	require.NoError(t, err)
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	s, err := silo.New(silo.Options{Name: "dash", GatewayAddress: "127.0.0.1:0"},
		silo.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), silo.WithMeterProvider(provider))
	require.NoError(t, err)
	require.NoError(t, ratelimit.Register(s, ratelimit.Defaults{}))
	d, err := New(s, reg, opts)
	require.NoError(t, err)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
		d.Close()
		require.NoError(t, provider.Shutdown(ctx))
	})
	return s, d, reg
}

// acquire takes n single permits from l and returns how many it was
// refused.
func acquire(t testing.TB, l ratelimit.Limiter, n int) int {
	t.Helper()
	refused := 0
	for range n {
		lease, err := l.TryAcquire(context.Background(), 1)
		require.NoError(t, err)
		if !lease.Acquired() {
			refused++
		}
		_ = lease.Release(context.Background())
	}
	return refused
}
