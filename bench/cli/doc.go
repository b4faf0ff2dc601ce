// Package cli is the granary-bench command (cmd/granary-bench): its flags
// and environment, the systems it measures and its exit code. It lives
// here so that the harness's smoke test runs the very command in process.
package cli
