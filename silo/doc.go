// Package silo is the host process of granary: a Silo keeps grain
// activations, persists their state, and accepts clients on its gateway; a
// Client reaches grains through a gateway from another process.
//
// Both a Client and the silo's own Caller implement proxy.Caller, so the
// generated references work the same anywhere:
//
//	s, _ := silo.New(silo.Options{})               // defaults: gateway on 127.0.0.1:30000, memory store
//	counter.RegisterCounterGrain(s, counter.New(nil))
//	s.Start(ctx)
//	defer s.Stop(ctx)
//
//	c, _ := silo.NewClient(silo.ClientOptions{Gateway: "127.0.0.1:30000"})
//	ref := counter.NewCounterRef(c, "visits")
//	reply, err := ref.Add(ctx, &counter.AddRequest{Delta: 1})
//
// Stop is graceful: queued requests are served, activations deactivate
// and flush their state, and only then do connections close.
package silo
