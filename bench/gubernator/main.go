package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/granary-go/granary/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the harness on the gubernator system and returns the exit
// code: 0 when every case succeeded, 1 when one failed, 2 for bad input.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gubernator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.Config
	if err := cfg.Bind(fs, lookupEnv); err != nil {
		fmt.Fprintln(stderr, "gubernator:", err)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	err := bench.Execute(ctx, cfg, []bench.System{newSystem()}, nil, stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "gubernator:", err)
	}
	return bench.ExitCode(err)
}
