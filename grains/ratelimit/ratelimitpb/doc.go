// Package ratelimitpb is the wire contract of the rate-limiting grains:
// the messages and the four grain services (ConcurrencyLimiter,
// FixedWindowLimiter, SlidingWindowLimiter, TokenBucketLimiter) defined in
// ratelimit.proto, and the code granarygen generates from them. Go programs
// use the holders of package ratelimit instead; this package is for
// callers that speak the contract directly and for the grains themselves.
package ratelimitpb
