// Package httplimit is net/http middleware that limits requests with
// granary's cluster-wide limiters: every instance of a service, behind any
// load balancer, shares the same quota per client, user or route.
//
// # Rules
//
// A Middleware has rules, each naming a configuration (ratelimit.Named)
// and saying which requests share a limiter of it:
//
//	configs, _ := ratelimit.NewConfigs(
//		ratelimit.Named("per-client", ratelimit.TokenBucketOptions{TokenLimit: 20, TokensPerPeriod: 10, ReplenishmentPeriod: time.Second}),
//		ratelimit.Named("per-user", ratelimit.FixedWindowOptions{PermitLimit: 1000, Window: time.Hour}),
//		ratelimit.Named("exports", ratelimit.ConcurrencyOptions{PermitLimit: 4}),
//	)
//	m, err := httplimit.New(client, configs, httplimit.Options{
//		Rules: []httplimit.Rule{
//			httplimit.ByIP("per-client"),
//			httplimit.ByUser("per-user", userFromContext),
//			httplimit.ByEndpoint("exports", nil),
//		},
//		TrustedProxies: []string{"10.0.0.0/8"},
//	})
//	mux.Handle("GET /exports/{id}", m.Handler(exportHandler))
//
// ByIP, ByUser, ByGroup, ByTenant, ByRole, ByEndpoint (the ServeMux route
// pattern) and ByKey (any function of the request) make rules. Identities
// come from Extractor functions the application supplies: the middleware
// assumes no authentication framework. A rule whose extractor finds
// nothing in a request does not apply to it.
//
// The rules of a middleware are one decision (ratelimit.AcquireMany): the
// acquisitions of every rule that applies are sent at once, and a request
// passes only when all of them grant a permit; when any refuses, what the
// others granted goes back (time-based quota refunded as far as the
// algorithm can), and the first refusing rule in order answers. A rule naming a
// configuration that does not exist makes New fail: a missing limit is a
// startup error, never a request that silently passes.
//
// # Client addresses
//
// A ByIP rule limits the connection's peer address. Forwarded headers are
// believed only from the proxies listed in Options.TrustedProxies: then
// X-Forwarded-For is read from the right, past trusted hops, to the first
// address that is not a trusted proxy. A client that writes its own
// X-Forwarded-For therefore cannot pick its bucket, nor make fresh
// buckets by changing it. IPv4-mapped IPv6 addresses count as their IPv4
// form; requests without a readable address share one bucket,
// UnknownClient.
//
// # Keys
//
// Each rule's limiter key is Key(KeyPrefix, kind, rule name, value); Key
// escapes '%' and ':' in each part before joining them with ':', so two
// different inputs never share a limiter.
//
// # Rejections
//
// A rejected request is answered 429 Too Many Requests with
//
//	Retry-After: 8
//	RateLimit-Policy: "per-user";q=1000;w=3600
//	RateLimit: "per-user";r=0;t=8
//	Content-Type: application/json
//
//	{"status":429,"error":"Too Many Requests","reason":"Rate limit exceeded","retry_after":8}
//
// Retry-After is the limiter's hint in whole seconds, rounded up (1 when
// it gives none); the RateLimit fields follow the IETF draft
// draft-ietf-httpapi-ratelimit-headers (see response.go for the
// revision). A request whose limiter cannot be reached gets 503, or
// passes with Options.FailOpen.
//
// # Cancellation and concurrency permits
//
// Acquisitions use the request's context: a client that disconnects while
// its acquisition waits in a limiter's queue cancels the wait, and the
// request's deadline bounds the wait's budget. Concurrency permits are
// held while the handler runs and released when it returns, or panics
// (the panic then goes on).
package httplimit
