// Package silotest starts the silos the tests of the rate-limiting
// packages run against: one silo on loopback hosting the limiter grains,
// stopped when the test ends.
package silotest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/silo"
)

// Quiet is a logger that keeps nothing.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Epoch is where the tests' fake clocks start.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Start starts a silo named name, with a gateway on a loopback port and
// the limiter grains registered with the library defaults; with a fake
// clock, time moves only when the test says. The silo stops when the test
// ends.
func Start(t testing.TB, name string, fake *clock.Fake) *silo.Silo {
	t.Helper()
	opts := []silo.Option{silo.WithLogger(Quiet)}
	if fake != nil {
		opts = append(opts, silo.WithClock(fake))
	}
	s, err := silo.New(silo.Options{Name: name, GatewayAddress: "127.0.0.1:0"}, opts...)
	require.NoError(t, err)
	require.NoError(t, ratelimit.Register(s, ratelimit.Defaults{}))
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})
	return s
}

// Configs returns the named configurations, or fails the test.
func Configs(t testing.TB, configs ...ratelimit.Config) *ratelimit.Configs {
	t.Helper()
	set, err := ratelimit.NewConfigs(configs...)
	require.NoError(t, err)
	return set
}
