package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/persistence/redisstore"
	"github.com/granary-go/granary/silo"
)

// storeEnv is the environment variable of the -store flag.
const storeEnv = "GRANARY_STORE"

// checkStore checks the -store value without any I/O.
func checkStore(spec string) error {
	switch {
	case spec == "memory":
		return nil
	case strings.HasPrefix(spec, "redis://"), strings.HasPrefix(spec, "rediss://"):
		if _, err := redisstore.ParseURL(spec); err != nil {
			return fmt.Errorf("-store: %w", err)
		}
		return nil
	}
	return fmt.Errorf("-store %q: want memory or a redis:// URL", spec)
}

// storePingTimeout bounds the check, at start, that Redis answers.
const storePingTimeout = 10 * time.Second

// siloStore is the store the silo runs on.
type siloStore struct {
	persistence.Store
	// describe says which store it is, for the startup log; never a
	// password.
	describe string
	// close releases the store once the silo has stopped.
	close func() error
}

// openStore turns the -store value into the silo's store. A Redis store
// must answer at once: a wrong address or password fails the start, not the
// first activation. go-redis's own log lines go to log at debug level: the
// store's errors already say what failed.
func openStore(ctx context.Context, spec string, log *slog.Logger) (*siloStore, error) {
	if err := checkStore(spec); err != nil {
		return nil, err
	}
	if spec == "memory" {
		return &siloStore{Store: persistence.NewMemoryStore(), describe: "memory (state is lost when the process exits)", close: func() error { return nil }}, nil
	}
	redis.SetLogger(redisLogger{log})
	store, err := redisstore.NewFromURL(spec)
	if err != nil {
		return nil, fmt.Errorf("-store: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, storePingTimeout)
	defer cancel()
	if err := store.Ping(pingCtx); err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("-store %s: %w", store, err)
	}
	return &siloStore{Store: store, describe: store.String(), close: store.Close}, nil
}

// warnMemoryStoreInCluster warns, once at start, a silo of a cluster that
// keeps its state in memory: what a silo's grains hold, the limiters'
// counts among it, starts again from nothing when the silo dies or a
// grain moves to another silo.
func warnMemoryStoreInCluster(log *slog.Logger, opts silo.Options, spec string) {
	if !opts.Cluster.Enabled || spec != "memory" {
		return
	}
	log.Warn("the memory store in a cluster: grain state and rate limits reset when a silo dies or a grain moves to another silo; "+
		"share one store with -store redis://host:port/db (docs/ratelimit.md)", "store", spec)
}

// redisLogger passes go-redis's log lines to the silo's logger.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, args ...any) {
	l.log.DebugContext(ctx, fmt.Sprintf(format, args...), "component", "go-redis")
}
