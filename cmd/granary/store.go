package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/persistence/redisstore"
)

// storeEnv, when set, is the default of the -store flag.
const storeEnv = "GRANARY_STORE"

// storePingTimeout bounds the check, at start, that Redis answers.
const storePingTimeout = 10 * time.Second

// storeFlag defines -store on fs, defaulting to $GRANARY_STORE or memory.
func storeFlag(fs *flag.FlagSet) *string {
	def := os.Getenv(storeEnv)
	if def == "" {
		def = "memory"
	}
	return fs.String("store", def, "where grain state lives: memory, or redis://[[user]:password@]host:port/db[?prefix=granary:] (rediss:// for TLS); $"+storeEnv+" sets the default")
}

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
	switch {
	case spec == "memory":
		return &siloStore{Store: persistence.NewMemoryStore(), describe: "memory (state is lost when the process exits)", close: func() error { return nil }}, nil
	case strings.HasPrefix(spec, "redis://"), strings.HasPrefix(spec, "rediss://"):
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
	return nil, fmt.Errorf("-store %q: want memory or a redis:// URL", spec)
}

// redisLogger passes go-redis's log lines to the silo's logger.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, args ...any) {
	l.log.DebugContext(ctx, fmt.Sprintf(format, args...), "component", "go-redis")
}
