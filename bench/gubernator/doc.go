// Command gubernator is the gubernator peer of granary's benchmark
// harness, in a module of its own so that gubernator's dependencies never
// reach the framework's module: two gubernator nodes in this process on
// loopback, and a gRPC client of the first node asking for one hit per
// operation of a token bucket holding the quota.
//
// It takes the harness's flags and environment (bench.Config.Bind) and
// runs the same measurement as granary-bench, on the gubernator system
// alone. granary-bench --peers builds it (or runs the binary its
// --gubernator flag names) and reads the report it writes with
// --output=-; it can also be run by hand:
//
//	cd bench/gubernator && go run . --quick
//
// The measured keys are chosen so that node 0, the node the client talks
// to, owns them, as granary's measured grains live on the gateway silo;
// their ownership is checked before and after every repetition.
package main
