package silo_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/silo"
)

// A Start that fails (its gateway port is taken) undoes what it started,
// and Start may be called again once the port is free: the silo then
// starts and serves calls.
func TestStartAfterFailedStart(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := taken.Addr().String()
	s, err := silo.New(silo.Options{GatewayAddress: addr}, silo.WithLogger(quiet))
	require.NoError(t, err)
	require.NoError(t, testgrain.RegisterCounterGrain(s, testgrain.New(nil)))
	require.Error(t, s.Start(context.Background()), "the port is taken")
	require.NoError(t, taken.Close())

	require.NoError(t, s.Start(context.Background()), "the port is free now")
	r, err := testgrain.NewCounterRef(s.Caller(), "k").Add(context.Background(), &testgrain.AddRequest{Delta: 2})
	require.NoError(t, err)
	require.EqualValues(t, 2, r.Value)
	require.NoError(t, s.Stop(context.Background()))
	require.Positive(t, s.Stats().Flusher.WritesSucceeded, "the fresh flusher wrote the grain's state")
}
