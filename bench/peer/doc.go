// Package peer holds the systems granary is measured against in the same
// run (bench.System implementations), each in the scenarios where it
// applies:
//
//   - Echo, the transport ceiling: a bare length-prefixed echo over one
//     loopback connection (internal/echo), with no envelope, dispatch or
//     grain;
//   - ProtoActor, protoactor-go's own cluster: a bare grain on a second
//     member on loopback, called from the first;
//   - XRate, golang.org/x/time/rate in process: the floor, no network;
//   - RedisRate, redis_rate against a redis-server the harness starts on a
//     free loopback port and stops (unavailable when none is installed);
//   - Gubernator, a bench.Source: two gubernator nodes in a process of
//     their own, built from the module under bench/gubernator, which keeps
//     gubernator's dependencies out of this module.
//
// Peers limit with their own algorithm (or none), so every granary case is
// compared with the peer's figure for the same scenario and overload.
package peer
