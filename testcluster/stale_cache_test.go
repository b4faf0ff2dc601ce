package testcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/examples/counter"
	"github.com/granary-go/granary/internal/silohost"
	"github.com/granary-go/granary/testcluster"
)

// A gateway whose directory cache points at a silo that no longer hosts
// the grain learns where it lives from the reply: the stale entry costs
// one call an extra hop, and the next call goes straight to the grain.
func TestAStaleCachedLocationIsCorrectedByTheReply(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Silos: 3, Register: registerCounter})
	ctx := context.Background()
	via := func(i int) counter.CounterRef {
		cl := c.NewClient(client.Options{Gateways: []string{c.Silo(i).GatewayAddr().String()}})
		return counter.NewCounterRef(cl, "moving")
	}
	through0, through2 := via(0), via(2)
	id := through0.GrainID()

	// Silo 0 places the grain on silo 1, and learns it is there from the
	// directory on the next call.
	_, err := through0.Add(ctx, &counter.AddRequest{Delta: 1}, c.PlaceOn(1))
	require.NoError(t, err)
	_, err = through0.Add(ctx, &counter.AddRequest{Delta: 1})
	require.NoError(t, err)
	require.Equal(t, 1, c.Activations(id))
	require.True(t, silohost.Host(c.Silo(1)).IsActive(id))

	// The grain moves to silo 2 behind silo 0's back.
	require.True(t, silohost.Host(c.Silo(1)).Deactivate(id))
	require.Eventually(t, func() bool { _, found, err := c.Locate(ctx, id); return err == nil && !found }, 10*time.Second, 10*time.Millisecond,
		"silo 1 unregistered the grain")
	_, err = through2.Add(ctx, &counter.AddRequest{Delta: 1}, c.PlaceOn(2))
	require.NoError(t, err)
	require.True(t, silohost.Host(c.Silo(2)).IsActive(id))

	// Silo 0 still sends the next call to silo 1, which passes it on.
	created := c.Silo(1).Stats().Host.Activations
	r, err := through0.Add(ctx, &counter.AddRequest{Delta: 1})
	require.NoError(t, err)
	assert.EqualValues(t, 4, r.Value, "the call reached the grain and its state")
	stale := c.Silo(1).Stats().Host.Activations - created
	assert.LessOrEqual(t, stale, int64(1), "silo 1 tried at most one activation of its own, which lost")

	// The reply told silo 0 where the grain is.
	created = c.Silo(1).Stats().Host.Activations
	for range 5 {
		_, err := through0.Add(ctx, &counter.AddRequest{Delta: 1})
		require.NoError(t, err)
	}
	assert.Equal(t, created, c.Silo(1).Stats().Host.Activations, "later calls do not pass through silo 1")
	assert.Equal(t, 1, c.Activations(id))
	where, _, err := c.Locate(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, testcluster.Name(2), where)
}
