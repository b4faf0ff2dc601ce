package silo_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/granary-go/granary/internal/testgrain"
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
			s, c := benchSilo(b, silo.WithMeterProvider(mp))
			refs := benchRefs(c, tc.workers, 1)
			in := &testgrain.AddRequest{Delta: 1}
			ctx := context.Background()
			for _, r := range refs {
				if _, err := r.Add(ctx, in); err != nil {
					b.Fatal(err)
				}
			}
			runWorkers(b, tc.workers, func(w int) error {
				_, err := refs[w].Add(ctx, in)
				return err
			})
			reportBatching(b, s, c)
		})
	}
}
