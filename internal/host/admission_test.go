package host

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
)

// While the host's admission refuses, no grain code runs: a request is
// answered with the refusal, a callback is dropped, and the grain
// deactivates, flushing the state its admitted turns left. Once admitted
// again, the next call activates it anew.
func TestARefusedTurnRunsNoGrainCodeAndDeactivatesTheGrain(t *testing.T) {
	refusal := errors.New("fenced")
	var refusing atomic.Bool
	f := newFixture(t, HostOptions{}, WithAdmission(func() error {
		if refusing.Load() {
			return refusal
		}
		return nil
	}))
	_, err := f.call("a", mAdd, 5)
	require.NoError(t, err)
	invoked := f.invoked.Load()
	f.host.mu.RLock()
	a := f.host.mu.acts.get(actor.GrainID{Type: testType, Key: "a"})
	f.host.mu.RUnlock()

	refusing.Store(true)
	var ran atomic.Bool
	a.post(turnFunc(func() { ran.Store(true) })) // the first message refused
	_, err = f.call("a", mAdd, 1)
	require.ErrorIs(t, err, refusal)
	f.waitLeft("a")
	assert.Equal(t, invoked, f.invoked.Load(), "the refused call ran no method")
	assert.False(t, ran.Load(), "the refused callback did not run")
	assert.EqualValues(t, 1, f.deactivated.Load(), "the grain deactivated")

	refusing.Store(false)
	v, err := f.call("a", mGet, 0)
	require.NoError(t, err)
	assert.EqualValues(t, 5, v, "the state of the admitted turns was flushed, the refused one changed nothing")
	assert.EqualValues(t, 2, f.activated.Load())
}

// A registration sent before the admission refused, and answered after,
// loads no state and runs no OnActivate: the activation fails with the
// refusal, and so does the call that waited for it.
func TestARegistrationAnsweredWhileRefusedActivatesNothing(t *testing.T) {
	refusal := errors.New("fenced")
	var refusing atomic.Bool
	dir := &scriptedDirectory{hold: true}
	f := newFixture(t, HostOptions{}, WithDirectory(dir), WithAdmission(func() error {
		if refusing.Load() {
			return refusal
		}
		return nil
	}))
	res := f.send(context.Background(), "a", mAdd, 1, 0)
	require.Eventually(t, func() bool {
		dir.mu.Lock()
		defer dir.mu.Unlock()
		return len(dir.held) == 1
	}, time.Second, time.Millisecond, "the registration is on its way")
	refusing.Store(true)
	dir.answer("", nil) // this silo won
	r := <-res
	assert.ErrorIs(t, r.err, refusal)
	assert.Zero(t, f.activated.Load(), "OnActivate ran while the admission refused")
}
