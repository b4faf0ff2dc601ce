package host

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
)

// gatedStore is a memStore whose OpenState waits until the test lets it
// go: the activation stays in its activating state meanwhile.
type gatedStore struct {
	*memStore
	entered chan actor.GrainID
	open    chan struct{}
}

func (s *gatedStore) OpenState(ctx context.Context, id actor.GrainID, schedule func(func()) bool, snapshot func() ([]byte, error)) (StateRecord, []byte, error) {
	s.entered <- id
	<-s.open
	return s.memStore.OpenState(ctx, id, schedule, snapshot)
}

// The core claims the grain's registration from the moment it asks for it
// until it deactivates, and not once it lost, failed or deactivated.
func TestCoreClaimsTheRegistrationFromAskingUntilItGoes(t *testing.T) {
	var c core
	assert.False(t, c.claims(), "new: it has asked nothing yet")
	c.start()
	assert.True(t, c.claims(), "registering: the owner may have decided already")
	c.registered("", nil)
	assert.True(t, c.claims(), "activating: it won")
	assert.False(t, c.active())
	c.activated(nil)
	assert.True(t, c.claims(), "active")
	c.deactivate("idle")
	assert.False(t, c.claims(), "deactivated")

	var lost core
	lost.start()
	lost.registered("silo-2", nil)
	assert.False(t, lost.claims(), "forwarding to the winner")

	var failed core
	failed.start()
	failed.registered("", nil)
	failed.activated(assert.AnError)
	assert.False(t, failed.claims(), "failed to activate")
}

// What a directory rebuilds a range from lists an activation whose
// registration the owner may hold even though it does not serve yet: while
// the directory has not answered, and while it won and still loads its
// state. The rebuild after an owner's crash asked only for what served, so
// an activation that won from the dying owner and was still activating was
// missed, and the grain was placed a second time.
func TestRegisteredListsAnActivationThatWonAndStillActivates(t *testing.T) {
	dir := &scriptedDirectory{hold: true}
	store := &gatedStore{memStore: &memStore{data: map[actor.GrainID][]byte{}}, entered: make(chan actor.GrainID, 1), open: make(chan struct{})}
	f := newFixture(t, HostOptions{}, WithDirectory(dir), WithStateStore(store))
	id := actor.GrainID{Type: testType, Key: "slow"}
	rc := f.send(context.Background(), "slow", mAdd, 1, 0)

	require.Eventually(t, func() bool { dir.mu.Lock(); defer dir.mu.Unlock(); return len(dir.held) == 1 }, testWait, testPoll)
	assert.Contains(t, f.host.Registered(), id, "registering: listed")
	assert.False(t, f.host.IsActive(id), "and not serving")

	dir.answer("", nil)
	require.Equal(t, id, <-store.entered)
	assert.Contains(t, f.host.Registered(), id, "won, loading its state: listed")
	assert.False(t, f.host.IsActive(id), "and not serving yet")
	assert.NotContains(t, f.host.Active(), id)

	close(store.open)
	r := <-rc
	require.NoError(t, r.err)
	assert.EqualValues(t, 1, r.reply.(*wrapperspb.Int64Value).Value)
	assert.True(t, f.host.IsActive(id))
	assert.Contains(t, f.host.Registered(), id, "active: listed")

	require.True(t, f.host.Deactivate(id))
	require.Eventually(t, func() bool { return !slices.Contains(f.host.Registered(), id) }, testWait, testPoll,
		"deactivated: no longer listed")
}

// An activation that lost its registration is not listed: the winner is.
func TestRegisteredLeavesOutAnActivationThatLost(t *testing.T) {
	dir := &scriptedDirectory{hold: true}
	f := newFixture(t, HostOptions{}, WithDirectory(dir), WithRouter(&recordingRouter{}))
	id := actor.GrainID{Type: testType, Key: "lost"}
	rc := make(chanReplier, 1)
	f.host.Activate(&Request{Target: id, MethodID: mAdd, Payload: mustPayload(t, 1), Reply: rc})
	require.Eventually(t, func() bool { dir.mu.Lock(); defer dir.mu.Unlock(); return len(dir.held) == 1 }, testWait, testPoll)
	assert.Contains(t, f.host.Registered(), id)
	dir.answer("silo-2", nil)
	require.NoError(t, (<-rc).err)
	require.Eventually(t, func() bool { return !slices.Contains(f.host.Registered(), id) }, testWait, testPoll)
}
