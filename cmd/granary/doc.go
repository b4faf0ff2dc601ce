// Command granary runs a silo on its embedded defaults: a gateway on
// 127.0.0.1:30000, the memory store, and the example grains. It prints where
// it listens and stops gracefully on Ctrl-C (SIGINT) or SIGTERM.
//
//	go run ./cmd/granary [-gateway host:port] [-name silo-name]
package main
