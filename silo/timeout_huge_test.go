package silo_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// Options.Validate accepts any positive ResponseTimeout, and the call table
// adds it to the clock's time saturating: a timeout meant as "practically never"
// (math.MaxInt64) must not overflow into a deadline in the past, failing every call made
// through the silo's caller with a response timeout at the first sweep.
func TestHugeResponseTimeoutDoesNotFireAtOnce(t *testing.T) {
	e := startSilo(t, envConfig{opts: silo.Options{ResponseTimeout: math.MaxInt64}, fakeClock: true})
	require.EqualValues(t, math.MaxInt64, e.silo.Options().ResponseTimeout, "Validate accepted it")

	caller := e.silo.Caller()
	errc := make(chan error, 1)
	go func() {
		_, err := testgrain.NewCounterRef(caller, "k").Never(context.Background(), &testgrain.NeverRequest{})
		errc <- err
	}()
	pending := caller.(interface{ Pending() int })
	eventually(t, func() bool { return pending.Pending() == 1 && e.silo.Stats().Host.Invocations == 1 },
		"the call reached the grain")

	// 100 ms of a timeout that is 292 years long.
	e.clock.Advance(100 * time.Millisecond)

	// Stopping the silo ends the call with ErrUnavailable; a call that
	// already failed with a timeout reports that instead.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, e.silo.Stop(ctx))
	err := <-errc
	assert.NotErrorIs(t, err, proxy.ErrTimeout, "a 292-year timeout fired after 100ms: %v", err)
	assert.ErrorIs(t, err, proxy.ErrUnavailable)
}

// The same through a client with a per-call timeout.
func TestHugePerCallTimeoutDoesNotFireAtOnce(t *testing.T) {
	e := startSilo(t, envConfig{})
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	c := e.client(client.Options{}, client.WithClock(fake))
	errc := make(chan error, 1)
	go func() {
		_, err := testgrain.NewCounterRef(c, "k").Never(context.Background(), &testgrain.NeverRequest{},
			proxy.WithTimeout(math.MaxInt64))
		errc <- err
	}()
	eventually(t, func() bool { return e.silo.Stats().Host.Invocations == 1 }, "the call reached the grain")
	fake.Advance(100 * time.Millisecond)
	// Closing the client ends the call with ErrUnavailable; a call that
	// already failed with a timeout reports that instead.
	require.NoError(t, c.Close())
	err := <-errc
	assert.NotErrorIs(t, err, proxy.ErrTimeout, "a 292-year per-call timeout fired after 100ms: %v", err)
	assert.ErrorIs(t, err, proxy.ErrUnavailable)
}
