package silo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
)

// A connection with its limit of calls in flight gets OVERLOADED at once
// for one more, while a second client's calls keep succeeding.
func TestAConnectionOverItsLimitIsOverloadedAndOthersAreNot(t *testing.T) {
	e := startSilo(t, envConfig{opts: silo.Options{Limits: silo.Limits{MaxInFlight: 4}}})
	busy, other := e.client(client.Options{}), e.client(client.Options{})
	dones := make([]<-chan error, 4)
	for i := range dones {
		dones[i] = blockOn(context.Background(), testgrain.NewCounterRef(busy, fmt.Sprint("k", i)), fmt.Sprint("t", i))
	}
	for range dones {
		<-e.gate.Entered()
	}
	_, err := testgrain.NewCounterRef(busy, "one-more").Get(context.Background(), &testgrain.GetRequest{})
	require.ErrorIs(t, err, proxy.ErrOverloaded)
	assert.Contains(t, err.Error(), "4 calls in flight")
	for i := range 10 {
		_, err := testgrain.NewCounterRef(other, fmt.Sprint("other-", i)).Add(context.Background(), &testgrain.AddRequest{Delta: 1})
		require.NoError(t, err, "the second client is not held up")
	}
	assert.EqualValues(t, 1, e.silo.Stats().Gateway.Overloaded)
	for i := range dones {
		e.gate.Release(fmt.Sprint("t", i))
	}
	for _, done := range dones {
		require.NoError(t, <-done)
	}
	_, err = testgrain.NewCounterRef(busy, "one-more").Get(context.Background(), &testgrain.GetRequest{})
	require.NoError(t, err, "a retry once calls have finished succeeds")
}

// One connection creating activations as fast as it can spends its own
// budget: past it, new grains are refused with OVERLOADED while its calls to
// active grains, and other connections' new grains, still succeed; the
// budget refills with time.
func TestNewActivationsAreBudgetedPerConnection(t *testing.T) {
	e := startSilo(t, envConfig{fakeClock: true, opts: silo.Options{Limits: silo.Limits{ActivationRate: 1, ActivationBurst: 3}}})
	flood, other := e.client(client.Options{}), e.client(client.Options{})
	ctx := context.Background()
	for i := range 3 {
		_, err := testgrain.NewCounterRef(flood, fmt.Sprint("g", i)).Add(ctx, &testgrain.AddRequest{Delta: 1})
		require.NoError(t, err)
	}
	_, err := testgrain.NewCounterRef(flood, "g3").Add(ctx, &testgrain.AddRequest{Delta: 1})
	require.ErrorIs(t, err, proxy.ErrOverloaded)
	assert.Contains(t, err.Error(), "budget of new activations")
	r, err := testgrain.NewCounterRef(flood, "g0").Add(ctx, &testgrain.AddRequest{Delta: 1})
	require.NoError(t, err, "an active grain is not a new activation")
	assert.EqualValues(t, 2, r.Value)
	_, err = testgrain.NewCounterRef(other, "h0").Add(ctx, &testgrain.AddRequest{Delta: 1})
	require.NoError(t, err, "another connection has a budget of its own")

	e.clock.Advance(time.Second)
	_, err = testgrain.NewCounterRef(flood, "g3").Add(ctx, &testgrain.AddRequest{Delta: 1})
	require.NoError(t, err, "the budget refilled")
	st := e.silo.Stats()
	assert.EqualValues(t, 1, st.Host.RefusedActivations)
	assert.EqualValues(t, 5, st.Host.Activations, "the refused request created nothing")
}

func TestTheSiloWideActivationLimitAnswersOverloaded(t *testing.T) {
	e := startSilo(t, envConfig{opts: silo.Options{Limits: silo.Limits{MaxActivations: 2}}})
	ctx := context.Background()
	for _, key := range []string{"a", "b"} {
		_, err := testgrain.NewCounterRef(e.silo.Caller(), key).Add(ctx, &testgrain.AddRequest{Delta: 1})
		require.NoError(t, err)
	}
	_, err := testgrain.NewCounterRef(e.silo.Caller(), "c").Add(ctx, &testgrain.AddRequest{Delta: 1})
	require.ErrorIs(t, err, proxy.ErrOverloaded)
	assert.Contains(t, err.Error(), "2 activations")
	_, err = testgrain.NewCounterRef(e.silo.Caller(), "a").Get(ctx, &testgrain.GetRequest{})
	require.NoError(t, err)
}

// A client connection with nothing in flight is closed once idle for the
// limit, and the client dials again on its next call; one with a call in
// flight stays.
func TestIdleClientConnectionsAreClosed(t *testing.T) {
	e := startSilo(t, envConfig{opts: silo.Options{Limits: silo.Limits{IdleTimeout: 100 * time.Millisecond}}})
	idle, busy := e.client(client.Options{}), e.client(client.Options{})
	done := blockOn(context.Background(), testgrain.NewCounterRef(busy, "held"), "held")
	require.Equal(t, "held", <-e.gate.Entered())
	eventually(t, func() bool { return idle.Gateway() == "" }, "the idle connection was closed")
	assert.NotEmpty(t, busy.Gateway(), "the busy one is kept")
	_, err := testgrain.NewCounterRef(idle, "k").Get(context.Background(), &testgrain.GetRequest{})
	require.NoError(t, err, "the client dials again")
	e.gate.Release("held")
	require.NoError(t, <-done)
}
