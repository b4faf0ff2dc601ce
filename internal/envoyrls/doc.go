// Package envoyrls serves Envoy's global rate limit service,
// envoy.service.ratelimit.v3.RateLimitService, over a granary cluster, so
// that Envoy's ratelimit filters (and Istio, Contour, Gloo) can point at
// granary instead of envoyproxy/ratelimit and Redis.
//
// The configuration is envoyproxy/ratelimit's YAML (Load, Parse): domains
// of nested descriptors with rate_limit, unlimited, shadow_mode, replaces,
// wildcard values and share_threshold; a rate_limit may also name a
// granary algorithm (fixed_window, the default, sliding_window or
// token_bucket) and its options. Each limit of each descriptor value is a
// limiter grain; a request's descriptors are decided in one concurrent
// round of calls, all or nothing (ratelimit.AcquireMany with attempts):
// when one is over its limit, what the others took is given back. Watcher
// reloads the configuration when its files change and keeps the one in
// use when the new one has problems, which it reports all at once.
//
// The silo binary serves it (-envoy-rls); docs/envoy.md is the manual,
// with what differs from envoyproxy/ratelimit.
package envoyrls
