package silo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/internal/testgrain"
)

// A turn that blocks must not hold up calls to other grains that arrive on
// the same connection, even though the connection's runner runs idle
// activations' turns itself.
func TestBlockedTurnDoesNotStallOtherGrainsOnTheConnection(t *testing.T) {
	e := startSilo(t, envConfig{})
	c := e.client(client.Options{})
	ctx := context.Background()
	busy, other := testgrain.NewCounterRef(c, "busy"), testgrain.NewCounterRef(c, "other")
	for _, r := range []testgrain.CounterRef{busy, other} { // active and idle
		_, err := r.Get(ctx, &testgrain.GetRequest{})
		require.NoError(t, err)
	}

	blocked := make(chan error, 1)
	go func() {
		_, err := busy.Block(ctx, &testgrain.BlockRequest{Tag: "held"})
		blocked <- err
	}()
	require.Equal(t, "held", <-e.gate.Entered())

	for i := int64(1); i <= 3; i++ {
		done := make(chan error, 1)
		go func() {
			r, err := other.Add(ctx, &testgrain.AddRequest{Delta: 1})
			if err == nil && r.Value != i {
				err = assert.AnError
			}
			done <- err
		}()
		select {
		case err := <-done:
			require.NoError(t, err, "call %d to another grain", i)
		case <-time.After(5 * time.Second):
			t.Fatalf("call %d to another grain waited for the blocked turn", i)
		}
	}

	e.gate.Release("held")
	require.NoError(t, <-blocked)
	<-e.gate.Exited()
	r, err := other.Add(ctx, &testgrain.AddRequest{Delta: 1})
	require.NoError(t, err)
	assert.EqualValues(t, 4, r.Value, "calls after the blocked turn still run")
}
