package directory

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A grain deactivates on b and a new call activates it on b again while
// the old activation's unregistration is still on its way to the owner.
// Entries name a silo, not an activation: had the new registration gone
// first, the owner would have kept the old entry as the new one's and then
// deleted it on the late unregistration, leaving the new activation
// running with no entry for the next call to place the grain elsewhere
// beside it. The registration waits for the unregistration instead.
func TestARegistrationWaitsForTheUnregistrationOfTheActivationBefore(t *testing.T) {
	c := newFakeCluster(t, "a", "b")
	a, b := c.all()[0], c.all()[1]
	id := grainsOwnedBy("a", 1, "a", "b")[0]
	require.Empty(t, register(t, b, id))

	gate := make(chan struct{})
	c.mu.Lock()
	c.gates["Unregister"] = gate
	c.mu.Unlock()
	b.dir.Unregister(id) // the first activation deactivated; its unregistration is slow
	registered := make(chan string, 1)
	b.dir.Register(id, func(winner string, err error) {
		assert.NoError(t, err)
		registered <- winner
	})
	select {
	case w := <-registered:
		t.Fatalf("the registration was answered (winner %q) before the unregistration before it", w)
	default:
	}
	close(gate)
	assert.Empty(t, <-registered, "b's new activation wins")
	require.NoError(t, b.dir.Wait(context.Background()))
	where, found, err := a.dir.Find(context.Background(), id)
	require.NoError(t, err)
	assert.True(t, found, "the owner has the new activation's entry")
	assert.Equal(t, "b", where)
}
