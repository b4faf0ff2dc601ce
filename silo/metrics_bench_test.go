package silo_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/granary-go/granary/silo"
)

// BenchmarkMeteredGrainCall is BenchmarkGrainCall's sequential and hot-key
// cases on a silo with a meter provider (the OpenTelemetry SDK, as the
// binary runs it): what timing each call into the duration histogram
// costs. Its name does not match BenchmarkGrainCall, so that comparisons
// of builds with and without it run the same benchmarks.
func BenchmarkMeteredGrainCall(b *testing.B) {
	for _, tc := range []struct {
		name    string
		workers int
	}{{"sequential", 1}, {"hot-key-16", 16}} {
		b.Run(tc.name, func(b *testing.B) {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			s, c := benchSilo(b, nil, silo.WithMeterProvider(mp))
			benchAdds(b, context.Background(), s, c, benchRefs(c, tc.workers, 1))
		})
	}
}
