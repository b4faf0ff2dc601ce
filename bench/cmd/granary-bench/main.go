// Command granary-bench is the benchmark harness: the rate-limiting matrix
// measured against granary and, with --peers, against its peers in the
// same run. See docs/performance.md ("The harness") for its flags, their
// environment variables and what each figure means.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/granary-go/granary/bench/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
