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
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/silo"
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		// -h or -help: the usage was printed, as asked.
	case errors.Is(err, errCtlUsage):
		fmt.Fprintln(os.Stderr, "granary:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "granary:", err)
		os.Exit(1)
	}
}

// config is everything the binary was told, checked.
type config struct {
	flags  *siloFlags
	silo   silo.Options
	limits limits
}

// parseConfig reads the settings from the command line, the environment
// and the config file, and checks them, reporting every problem at once.
func parseConfig(args []string, stderr *os.File) (*config, error) {
	fs := flag.NewFlagSet("granary", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: granary [flags]\n\n"+
			"Runs a silo that hosts the rate-limiting grains (grains/ratelimit) and the\n"+
			"example counter grain, alone or as a member of a cluster (-silo-address,\n"+
			"-seeds), with an HTTP port for the rate-limit API, health, metrics and\n"+
			"profiles, until Ctrl-C or SIGTERM stops it gracefully.\n\n"+
			"Each flag may also be set by its environment variable or, under its name,\n"+
			"in the config file's silo section; the command line wins, then the\n"+
			"environment, then the file. docs/operations.md has every setting.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	var configPath string
	fs.StringVar(&configPath, "config", os.Getenv(configEnv), "a YAML or JSON file of settings: the silo's (any flag) and the rate limiters' ($"+configEnv+")")
	s := newSettings(fs)
	flags := defineSiloFlags(s)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	fileSettings, limits, fileErr := readConfigFile(configPath)
	applyErr := s.apply(fileSettings, configPath)
	opts, optsErr := flags.options()
	if err := errors.Join(fileErr, applyErr, optsErr); err != nil {
		return nil, err
	}
	return &config{flags: flags, silo: opts, limits: limits}, nil
}

// run starts a silo and blocks until ctx ends or a stop signal arrives.
func run(ctx context.Context, args []string, stdout, stderr *os.File) error {
	if len(args) > 0 && args[0] == "ctl" {
		return runCtl(ctx, args[1:], stdout, stderr)
	}
	cfg, err := parseConfig(args, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	store, err := openStore(ctx, cfg.flags.store, log)
	if err != nil {
		return err
	}
	defer store.close()
	log.Info("grain state store", "store", store.describe)
	warnMemoryStoreInCluster(log, cfg.silo, cfg.flags.store)

	siloOpts := []silo.Option{silo.WithLogger(log), silo.WithStore(store.Store)}
	var prom *prometheusMetrics
	if cfg.flags.http != "none" {
		// Without an HTTP port nobody could scrape the metrics, so the
		// silo gets no meter provider and times no calls.
		if prom, err = newPrometheusMetrics(); err != nil {
			return err
		}
		defer func() { _ = prom.provider.Shutdown(context.Background()) }()
		siloOpts = append(siloOpts, silo.WithMeterProvider(prom.provider))
	}
	s, err := silo.New(cfg.silo, siloOpts...)
	if err != nil {
		return err
	}
	if err := counter.RegisterCounterGrain(s, counter.New); err != nil {
		return err
	}
	if err := ratelimit.Register(s, cfg.limits.defaults); err != nil {
		return err
	}

	dash, err := newDashboard(s, prom)
	if err != nil {
		return err
	}
	defer dash.Close()

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ready := &readiness{silo: s, expected: expectedSilos{n: cfg.flags.expectSilos, view: s}}
	var port *httpPort
	refusals, err := newHTTPRefusals(prom)
	if err != nil {
		return err
	}
	if prom != nil {
		// Listening before the silo starts: /healthz answers and /readyz
		// says "starting" while the silo joins its cluster.
		apiPath, api, err := serviceAPI(s.Caller(), cfg.limits.configs, cfg.flags, cfg.flags.apiDisableChanges, refusals.on("http")...)
		if err != nil {
			return err
		}
		mux := newMux(apiPath, api, ready, prom.handler)
		handleCluster(mux, s)
		dash.Register(mux, false)
		creds := &cfg.flags.credentials
		if port, err = listenHTTP(cfg.flags.http, creds.auth.wrap(mux), creds.httpTLS, log); err != nil {
			return err
		}
		port.serve()
	}
	admin, err := listenAdmin(cfg, s, dash, refusals, log)
	if err != nil {
		if port != nil {
			shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.flags.stopTimeout)
			defer cancel()
			err = errors.Join(err, port.shutdown(shutdownCtx))
		}
		return err
	}
	stopTimeout := cfg.flags.stopTimeout
	rls, err := listenEnvoy(&cfg.flags.envoy, s.Caller(), log)
	if err == nil {
		err = s.Start(ctx)
	}
	if err != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		err = errors.Join(err, rls.shutdown(shutdownCtx))
		for _, p := range []*httpPort{port, admin} {
			if p != nil {
				err = errors.Join(err, p.shutdown(shutdownCtx))
			}
		}
		return err
	}
	fmt.Fprintf(stdout, "granary silo %s: %s%s%s%s (Ctrl-C to stop)\n", s.Name(), describeHTTP(port), describeAdmin(admin), describeEnvoy(rls), describeSilo(s))

	<-ctx.Done()
	stop() // a second signal ends the process at once, as by default
	fmt.Fprintln(stdout, "stopping...")
	stopCtx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	var httpErr error
	if port != nil {
		// /readyz fails first, so that load balancers stop sending; then
		// the HTTP port drains, its requests still served by the silo;
		// then the silo stops.
		ready.stopping.Store(true)
		if d := cfg.flags.shutdownDelay; d > 0 {
			log.Info("stop: /readyz answers 503 before the HTTP port closes", "delay", d)
			select {
			case <-time.After(d):
			case <-stopCtx.Done():
			}
		}
		httpErr = port.shutdown(stopCtx)
	}
	if admin != nil {
		httpErr = errors.Join(httpErr, admin.shutdown(stopCtx))
	}
	httpErr = errors.Join(httpErr, rls.shutdown(stopCtx))
	if err := s.Stop(stopCtx); err != nil && !errors.Is(err, context.Canceled) {
		return errors.Join(httpErr, err)
	}
	if httpErr != nil {
		return httpErr
	}
	fmt.Fprintln(stdout, "stopped")
	return nil
}

// describeHTTP says where the HTTP port listens, for the startup line.
func describeHTTP(port *httpPort) string {
	if port == nil {
		return "no HTTP port, "
	}
	return "HTTP on " + port.ln.Addr().String() + ", "
}

// describeSilo says where the silo listens, for the startup line.
func describeSilo(s *silo.Silo) string {
	out := "no gateway"
	if addr := s.GatewayAddr(); addr != nil {
		out = "gateway listening on " + addr.String()
	}
	if v, err := s.Members(); err == nil {
		self, _ := v.Member(s.Name())
		out += fmt.Sprintf(", silo address %s, gossip %s, silos in the cluster: %d", self.Address, self.GossipAddress, len(v.Members))
	}
	return out
}
