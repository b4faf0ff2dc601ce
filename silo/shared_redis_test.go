package silo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/redistest"
	"github.com/granary-go/granary/internal/testgrain"
	"github.com/granary-go/granary/persistence/redisstore"
	"github.com/granary-go/granary/silo"
)

// redisStoreOn returns a store on srv, as a silo process of its own would
// open it, closed when the test ends (after the silos using it stop).
func redisStoreOn(t *testing.T, srv *redistest.Server) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(redisstore.Options{Addr: srv.Addr(), KeyPrefix: "granary:test:"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestTwoSilosShareOneRedis moves a grain between two silos that share
// only a Redis: each activation reads what the previous one, on the other
// silo, wrote when it deactivated.
func TestTwoSilosShareOneRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	a := startSilo(t, envConfig{siloOpts: []silo.Option{silo.WithStore(redisStoreOn(t, srv))}})
	b := startSilo(t, envConfig{siloOpts: []silo.Option{silo.WithStore(redisStoreOn(t, srv))}})
	onA := testgrain.NewCounterRef(a.client(client.Options{}), "shared")
	onB := testgrain.NewCounterRef(b.client(client.Options{}), "shared")
	id := actor.GrainID{Type: testgrain.CounterGrainType, Key: "shared"}
	ctx := context.Background()

	r, err := onA.Add(ctx, &testgrain.AddRequest{Delta: 5})
	require.NoError(t, err)
	require.EqualValues(t, 5, r.Value)
	require.True(t, a.silo.Host().Deactivate(id))
	// A grain stops serving when its deactivation begins, and has written
	// its state when the deactivation is counted.
	eventually(t, func() bool { return a.silo.Host().Stats().Deactivations == 1 }, "deactivated on A, its state written")

	got, err := onB.Get(ctx, &testgrain.GetRequest{})
	require.NoError(t, err)
	assert.EqualValues(t, 5, got.Value, "B's activation reads what A wrote")
	r, err = onB.Add(ctx, &testgrain.AddRequest{Delta: 2})
	require.NoError(t, err)
	require.EqualValues(t, 7, r.Value)

	// Stopping a silo writes its grains' state too.
	require.NoError(t, b.silo.Stop(ctx))
	got, err = onA.Get(ctx, &testgrain.GetRequest{})
	require.NoError(t, err)
	assert.EqualValues(t, 7, got.Value, "A's new activation reads what B wrote")
	assert.EqualValues(t, 2, a.silo.Host().Stats().Activations)
	assert.Zero(t, a.silo.Stats().Flusher.WritesFailed)
}
