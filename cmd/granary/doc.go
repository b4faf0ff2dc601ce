// Command granary runs a silo on its embedded defaults: a gateway on
// 127.0.0.1:30000, the memory store, and the example grains. It prints where
// it listens and stops gracefully on Ctrl-C (SIGINT) or SIGTERM.
//
//	go run ./cmd/granary [-gateway host:port] [-name silo-name] [-store memory|redis://host:port/db]
//
// -store (or the environment variable GRANARY_STORE, which the flag
// overrides) chooses where grain state lives: memory, lost when the process
// exits, or Redis, shared by every silo pointed at the same server (see
// docs/persistence.md). The silo logs which store it uses at start, and
// refuses to start if Redis does not answer.
package main
