// Package silo is the host process of granary: a Silo keeps grain
// activations, persists their state, and accepts clients on its gateway.
// Package client reaches grains from another process.
//
// Both a client.Client and the silo's own Caller implement proxy.Caller, so
// the generated references work the same anywhere:
//
//	s, _ := silo.New(silo.Options{}) // defaults: gateway on 127.0.0.1:30000, memory store
//	counter.RegisterCounterGrain(s, counter.New)
//	s.Start(ctx)
//	defer s.Stop(ctx)
//
//	ref := counter.NewCounterRef(s.Caller(), "visits") // or a client.Client
//	reply, err := ref.Add(ctx, &counter.AddRequest{Delta: 1})
//
// A grain calls other grains through the caller of the silo that hosts it,
// silo.CallerOf(gc), with its method's context: the nested call inherits
// what is left of the method's budget and its cancellation.
//
// Stop is graceful: queued requests are served, activations deactivate
// and flush their state, and only then do connections close.
//
// Ready says whether the silo serves, for health checks, and why not
// (starting, joining its cluster, stopping). WithMeterProvider reports the
// silo's metrics through the OpenTelemetry metric API: calls by grain
// type, method and outcome, call durations, activations, the directory,
// transport traffic and rejections, state writes; docs/operations.md lists
// them. Stats has the same counters without a provider.
package silo
