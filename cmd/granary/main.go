package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/granary-go/granary/examples/counter"
	"github.com/granary-go/granary/silo"
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		// -h or -help: the usage was printed, as asked.
	case err != nil:
		fmt.Fprintln(os.Stderr, "granary:", err)
		os.Exit(1)
	}
}

// run starts a silo and blocks until ctx ends or a stop signal arrives.
func run(ctx context.Context, args []string, stdout, stderr *os.File) error {
	fs := flag.NewFlagSet("granary", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: granary [flags]\n\n"+
			"Runs a silo that hosts the example counter grain (examples/counter) on\n"+
			"the memory store, until Ctrl-C or SIGTERM stops it gracefully.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var opts silo.Options
	fs.StringVar(&opts.GatewayAddress, "gateway", silo.DefaultGatewayAddress, "gateway listen address (host:port; port 0 picks one)")
	fs.StringVar(&opts.Name, "name", "", "silo name (default hostname-pid)")
	stopTimeout := fs.Duration("stop-timeout", 30*time.Second, "how long a graceful stop may take")
	storeSpec := storeFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *stopTimeout <= 0 {
		return fmt.Errorf("-stop-timeout must be positive, got %v", *stopTimeout)
	}

	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	store, err := openStore(ctx, *storeSpec, log)
	if err != nil {
		return err
	}
	defer store.close()
	log.Info("grain state store", "store", store.describe)
	s, err := silo.New(opts, silo.WithLogger(log), silo.WithStore(store.Store))
	if err != nil {
		return err
	}
	if err := counter.RegisterCounterGrain(s, counter.New); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := s.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "granary silo %s: gateway listening on %s (Ctrl-C to stop)\n", s.Name(), s.GatewayAddr())

	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping...")
	stopCtx, cancel := context.WithTimeout(context.Background(), *stopTimeout)
	defer cancel()
	if err := s.Stop(stopCtx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	fmt.Fprintln(stdout, "stopped")
	return nil
}
