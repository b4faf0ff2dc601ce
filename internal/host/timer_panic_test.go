package host

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
)

// A grain timer callback is grain code like a method: when it panics, the
// activation must deactivate (flushing its state) and the next call must
// find a fresh activation, exactly as for a panicking method.
func TestTimerPanicDeactivatesLikeAMethodPanic(t *testing.T) {
	f := newFixture(t, HostOptions{})
	_, err := f.call("a", mAdd, 5)
	require.NoError(t, err)
	f.host.mu.RLock()
	a := f.host.mu.acts.get(actor.GrainID{Type: testType, Key: "a"})
	f.host.mu.RUnlock()
	a.post(turnFunc(func() {
		a.gc.AfterFunc(time.Second, func() { panic("timer bug") })
	}))
	require.Eventually(t, func() bool { return f.clock.Pending() >= 2 }, 5*time.Second, time.Millisecond)
	f.clock.Advance(time.Second)

	require.Eventually(t, func() bool { return f.deactivated.Load() == 1 }, 5*time.Second, time.Millisecond,
		"the activation whose timer panicked deactivates")
	v, err := f.call("a", mGet, 0)
	require.NoError(t, err)
	assert.EqualValues(t, 5, v, "state flushed on the way out survives the panic")
	assert.EqualValues(t, 2, f.activated.Load(), "the next call reactivates the grain")
	assert.EqualValues(t, 1, f.host.Stats().Panics)
}
