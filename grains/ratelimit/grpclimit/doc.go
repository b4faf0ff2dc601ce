// Package grpclimit limits the calls of gRPC servers with granary's
// limiters: unary and stream server interceptors for grpc-go, and an
// adapter for go-grpc-middleware v2's ratelimit interceptors. Its twin
// connectlimit serves connect-go handlers with the same rules and
// answers, without linking grpc-go.
//
// Rules say which calls share a limiter, each by a key: the full method
// (ByMethod), the peer's address (ByPeer), a metadata value (ByMetadata),
// an authenticated identity (ByIdentity, with TLSIdentity for client
// certificates or an extractor of what an authentication interceptor put
// in the context), or any key (ByKey); ForMethods narrows a rule to some
// methods or services. Each rule names a configuration of a
// ratelimit.Configs, whose options every limiter of the rule has:
//
//	configs, _ := ratelimit.NewConfigs(
//		ratelimit.Named("per-tenant", ratelimit.TokenBucketOptions{TokenLimit: 100, TokensPerPeriod: 10, ReplenishmentPeriod: time.Second}),
//		ratelimit.Named("one-export", ratelimit.ConcurrencyOptions{PermitLimit: 1}))
//	limits, _ := grpclimit.New(client, configs, grpclimit.Options{Rules: []grpclimit.Rule{
//		grpclimit.ByMetadata("per-tenant", "x-tenant"),
//		grpclimit.ByIdentity("one-export", grpclimit.TLSIdentity).ForMethods("/shop.v1.Reports/Export"),
//	}})
//	server := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(limits.UnaryServerInterceptor()),
//		grpc.ChainStreamInterceptor(limits.StreamServerInterceptor()))
//
// The rules that apply to a call are one decision, sent at once
// (ratelimit.AcquireMany): the call runs only when all grant a permit,
// and otherwise what the others granted is given back. A refused call
// fails codes.ResourceExhausted with a google.rpc.RetryInfo detail and a
// retry-after trailer (whole seconds, as HTTP's Retry-After); a limiter
// that cannot be reached fails it codes.Unavailable unless
// Options.FailOpen. Concurrency permits are held until the handler
// returns (for a stream, until it ends).
//
// grpc-go is linked by this package alone: the client, the silo and the
// other rate-limiting packages (connectlimit included) never import it. docs/envoy.md has the
// manual, beside Envoy's rate limit service.
package grpclimit
