// Package connectlimit limits the calls of connect-go handlers (over
// gRPC, gRPC-Web and Connect's own protocol alike) with granary's
// limiters. It is grpclimit's rules and answers for a program that serves
// connect-go alone: it links no grpc-go.
//
// Rules say which calls share a limiter, each by a key: the procedure
// (ByMethod), the peer's address (ByPeer), a request header (ByMetadata),
// an authenticated identity an interceptor before it put in the context
// (ByIdentity), or any key (ByKey); ForMethods narrows a rule to some
// procedures or services. Each rule names a configuration of a
// ratelimit.Configs:
//
//	configs, _ := ratelimit.NewConfigs(
//		ratelimit.Named("per-tenant", ratelimit.TokenBucketOptions{TokenLimit: 100, TokensPerPeriod: 10, ReplenishmentPeriod: time.Second}))
//	limits, _ := connectlimit.New(client, configs, connectlimit.Options{Rules: []connectlimit.Rule{
//		connectlimit.ByMetadata("per-tenant", "x-tenant"),
//	}})
//	path, handler := pingv1connect.NewPingServiceHandler(ping, connect.WithInterceptors(limits.Interceptor()))
//
// The rules that apply to a call are one decision, sent at once
// (ratelimit.AcquireMany). A refused call fails CodeResourceExhausted
// with a google.rpc.RetryInfo detail and the retry-after metadata (whole
// seconds, as HTTP's Retry-After); a limiter that cannot be reached fails
// it CodeUnavailable unless Options.FailOpen. Concurrency permits are
// held until the handler returns (for a stream, until it ends). Its
// limiter keys are grpclimit's, so that a service moving between the two
// frameworks keeps its limits. docs/envoy.md has the manual.
package connectlimit
