package host

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kinds lists the kinds of effects, for comparing steps.
func kinds(effects []effect) []effectKind {
	out := make([]effectKind, len(effects))
	for i, e := range effects {
		out[i] = e.kind
	}
	return out
}

func TestCoreWinnerActivatesThenRunsWhatWaited(t *testing.T) {
	var c core
	a, b := &Request{CallID: 1}, &Request{CallID: 2}
	assert.Equal(t, effect{}, c.request(a), "a request before start waits")
	assert.Equal(t, []effectKind{effRegister}, kinds(c.start()))
	assert.Equal(t, stateRegistering, c.state)
	assert.Equal(t, effect{}, c.request(b), "so does one while registering")
	assert.Empty(t, c.start(), "starting twice does nothing")

	assert.Equal(t, []effectKind{effActivate}, kinds(c.registered("", nil)))
	assert.Equal(t, stateActivating, c.state)
	step := c.activated(nil)
	require.Equal(t, []effectKind{effRun, effRun}, kinds(step))
	assert.Same(t, a, step[0].req, "in arrival order")
	assert.Same(t, b, step[1].req)
	assert.Empty(t, c.queue)

	r := &Request{CallID: 3}
	assert.Equal(t, effect{kind: effRun, req: r}, c.request(r), "an active grain runs at once")
}

func TestCoreLoserForwardsAndNeverActivates(t *testing.T) {
	var c core
	a, b := &Request{CallID: 1}, &Request{CallID: 2}
	c.start()
	c.request(a)
	c.request(b)
	step := c.registered("silo-2", nil)
	require.Equal(t, []effectKind{effForward, effForward, effFinish}, kinds(step), "no effActivate: OnActivate never runs")
	assert.Equal(t, "silo-2", step[0].silo)
	assert.Same(t, a, step[0].req)
	assert.Same(t, b, step[1].req)
	assert.Equal(t, stateForwarding, c.state)

	late := &Request{CallID: 3}
	assert.Equal(t, effect{kind: effForward, req: late, silo: "silo-2"}, c.request(late), "what still reaches it follows")
	assert.Empty(t, c.activated(nil), "an outcome of activation is meaningless now")
	assert.Empty(t, c.deactivate("idle"))
}

// A registration that failed may have been recorded by the owner before
// its answer was lost: the activation unregisters, or the entry would stay.
func TestCoreRegistrationErrorFailsWhatWaitedAndUnregisters(t *testing.T) {
	var c core
	c.start()
	c.request(&Request{})
	assert.Equal(t, []effectKind{effFail, effUnregister, effFinish}, kinds(c.registered("", errors.New("directory down"))))
	assert.Equal(t, stateFailed, c.state)
	assert.Equal(t, effFail, c.request(&Request{}).kind)
}

func TestCoreActivationFailureFailsAndUnregisters(t *testing.T) {
	var c core
	c.start()
	c.registered("", nil)
	c.request(&Request{})
	assert.Equal(t, []effectKind{effFail, effUnregister, effFinish}, kinds(c.activated(errors.New("bad state"))))
	assert.Equal(t, stateFailed, c.state)
	assert.Equal(t, effFail, c.request(&Request{}).kind)
}

func TestCoreDeactivationFlushesBeforeUnregistering(t *testing.T) {
	var c core
	c.start()
	c.registered("", nil)
	c.activated(nil)
	assert.Equal(t, []effectKind{effDeactivate, effUnregister, effFinish}, kinds(c.deactivate("idle")),
		"the state is flushed before the directory lets another silo activate the grain")
	assert.Equal(t, stateDead, c.state)
	assert.Equal(t, "idle", c.reason)
	assert.Equal(t, effReroute, c.request(&Request{}).kind, "a dead activation hands requests back to the router")
	assert.Empty(t, c.deactivate("again"), "deactivating twice does nothing")
	assert.Empty(t, c.registered("", nil), "nor does a late answer from the directory")
}

// A deactivation asked for before the activation is active (a host that
// stops while it registers asks once) waits for it: the requests queued
// meanwhile run first, then it deactivates.
func TestCoreDeactivatesOnceActiveWhenAskedBefore(t *testing.T) {
	var c core
	assert.Empty(t, c.deactivate("shutting down"))
	c.start()
	assert.Empty(t, c.deactivate("again"))
	c.request(&Request{})
	c.registered("", nil)
	assert.Empty(t, c.deactivate("and again"))
	assert.Equal(t, stateActivating, c.state)
	assert.Equal(t, []effectKind{effRun, effAsked}, kinds(c.activated(nil)))
	assert.Equal(t, []effectKind{effDeactivate, effUnregister, effFinish}, kinds(c.deactivateAsked()))
	assert.Equal(t, "shutting down", c.reason, "the first ask's reason")
	assert.Empty(t, c.deactivateAsked(), "asked once, carried out once")
}

// An activation that never activates has nothing to deactivate, asked or
// not.
func TestCoreAskedDeactivationOfALoserIsDropped(t *testing.T) {
	var c core
	c.start()
	c.deactivate("shutting down")
	assert.Equal(t, []effectKind{effFinish}, kinds(c.registered("silo-2", nil)))
	assert.Empty(t, c.activated(nil))
	assert.Empty(t, c.deactivateAsked())
}

// The request event allocates nothing: it is the event of every call.
func TestCoreRequestDoesNotAllocate(t *testing.T) {
	var c core
	c.start()
	c.registered("", nil)
	c.activated(nil)
	r := &Request{}
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = c.request(r) }))
}
