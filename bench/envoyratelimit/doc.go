// Package envoyratelimit measures granary's Envoy rate limit service
// against envoyproxy/ratelimit, the service Envoy users run today, with
// Redis, in a module of its own so that envoyproxy/ratelimit's
// dependencies never reach the framework's module.
//
// StartReference runs envoyproxy/ratelimit's own service
// (src/service, with its Redis fixed-window cache, src/redis) in this
// process, on a loopback gRPC port, against a redis-server the caller
// started; it is wired as its runner wires it, with stats off and no
// local cache, the defaults otherwise (a pool of 10 connections, no
// pipelining window). The benchmark starts redis-server (on a free
// loopback port; skipped with one line when it is missing, failed under
// GRANARY_CI=1), the reference and a granary silo serving the same
// limits, and drives both with internal/envoyrls/rlsload's load: three
// descriptors a request, 16 callers, turns in slices of calls:
//
//	cd bench/envoyratelimit && go test -run '^$' -bench . -benchtime 16384x -count 3
package envoyratelimit
