// Package ratelimitapi serves granary's cluster-wide limiters to callers
// in any language: the service ratelimitv1.RateLimitService, defined once
// in protobuf (ratelimitv1/ratelimit.proto) and served by one handler as
// gRPC, gRPC-Web and the Connect protocol, whose unary calls are plain
// HTTP POSTs of JSON:
//
//	curl -s localhost:8080/granary.ratelimit.v1.RateLimitService/Acquire \
//	  -H 'Content-Type: application/json' \
//	  -d '{"algorithm":"ALGORITHM_FIXED_WINDOW","key":"user:42","config":"login"}'
//	{"acquired":true,"leaseId":"7316","releaseOptional":true}
//
// Mount the handler on a silo's HTTP port (or any server whose process
// reaches the cluster):
//
//	path, h, err := ratelimitapi.NewHandler(s.Caller(), configs, ratelimitapi.Options{})
//	mux.Handle(path, h)
//
// Each method maps to a holder method of package ratelimit: Acquire
// (Acquire, or AcquireAndCheckConfiguration with a named configuration or
// explicit options), Release (of a concurrency lease, by id), Statistics,
// Configure, GetConfiguration, Reset, DeleteState and TryReplenish. A
// rejected acquisition is a response with acquired false, its reason and
// retry_after, and a Retry-After header in whole seconds, rounded up.
//
// The call's context is the grain call's: its deadline (the gRPC or
// Connect timeout the client sent) bounds how long an acquisition waits
// in a limiter's queue, and a client that cancels or disconnects cancels
// the wait. A wait that outlives the call's deadline ends with
// deadline_exceeded; one that outlives the server's own budget (80% of
// its response timeout) with a rejected lease, reason "Lease not
// acquired". Errors carry connect codes: invalid_argument for bad
// requests and options, not_found for an unknown configuration,
// permission_denied for changes when Options.DisableChanges is set or,
// with WithChangeRights, when the caller lacks the admin right (the error
// names it), unavailable when the cluster cannot be reached.
//
// docs/ratelimit.md has a curl example of every call.
package ratelimitapi
