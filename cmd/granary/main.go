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
			"Runs a silo that hosts the example counter grain (examples/counter), alone\n"+
			"or as a member of a cluster (-silo-address, -seeds), until Ctrl-C or SIGTERM\n"+
			"stops it gracefully. docs/cluster.md shows how to run three.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	flags, err := defineSiloFlags(fs)
	if err != nil {
		return err
	}
	storeSpec := storeFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts, err := flags.options()
	if err != nil {
		return err
	}
	stopTimeout := &flags.stopTimeout

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
	gateway := "no gateway"
	if addr := s.GatewayAddr(); addr != nil {
		gateway = "gateway listening on " + addr.String()
	}
	cluster := ""
	if v, err := s.Members(); err == nil {
		self, _ := v.Member(s.Name())
		cluster = fmt.Sprintf(", silo address %s, gossip %s, %d silos in the cluster", self.Address, self.GossipAddress, len(v.Members))
	}
	fmt.Fprintf(stdout, "granary silo %s: %s%s (Ctrl-C to stop)\n", s.Name(), gateway, cluster)

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
