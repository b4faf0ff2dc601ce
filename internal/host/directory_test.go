package host

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/granary-go/granary/actor"
)

// scriptedDirectory answers registrations as a test says: at once with
// winner, or, when hold is set, later through answer.
type scriptedDirectory struct {
	mu           sync.Mutex
	winner       string
	hold         bool
	held         []func(string, error)
	registered   []actor.GrainID
	unregistered []actor.GrainID
	log          *[]string // shared with a store, to order unregistering after flushing
}

func (d *scriptedDirectory) Register(id actor.GrainID, done func(string, error)) {
	d.mu.Lock()
	d.registered = append(d.registered, id)
	if d.hold {
		d.held = append(d.held, done)
		d.mu.Unlock()
		return
	}
	winner := d.winner
	d.mu.Unlock()
	done(winner, nil)
}

func (d *scriptedDirectory) Unregister(id actor.GrainID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unregistered = append(d.unregistered, id)
	if d.log != nil {
		*d.log = append(*d.log, "unregister")
	}
}

func (d *scriptedDirectory) answer(winner string, err error) {
	d.mu.Lock()
	held := d.held
	d.held = nil
	d.mu.Unlock()
	for _, done := range held {
		done(winner, err)
	}
}

// recordingRouter records what the host hands it, answering forwarded
// requests as the winning silo would.
type recordingRouter struct {
	mu        sync.Mutex
	routed    []actor.GrainID
	forwarded []string
}

func (r *recordingRouter) Route(req *Request) {
	r.mu.Lock()
	r.routed = append(r.routed, req.Target)
	r.mu.Unlock()
	req.Reply.Reply(req, wrapperspb.Int64(-100), nil)
	req.Release()
}

func (r *recordingRouter) Forward(req *Request, silo string) {
	r.mu.Lock()
	r.forwarded = append(r.forwarded, silo)
	r.mu.Unlock()
	req.Reply.Reply(req, wrapperspb.Int64(-200), nil)
	req.Release()
}

// A host with a router leaves the decision to it: a request for a grain
// with no activation here is routed, not activated.
func TestHostWithARouterDoesNotActivateWhatReachesIt(t *testing.T) {
	router := &recordingRouter{}
	f := newFixture(t, HostOptions{}, WithRouter(router))
	v, err := f.call("a", mAdd, 1)
	require.NoError(t, err)
	assert.EqualValues(t, -100, v, "the router answered")
	assert.Equal(t, []actor.GrainID{{Type: testType, Key: "a"}}, router.routed)
	assert.False(t, f.host.IsActive(actor.GrainID{Type: testType, Key: "a"}))
	assert.Zero(t, f.activated.Load())
}

// An activation that loses its registration forwards its queued requests
// to the winner and never loads state or runs OnActivate.
func TestDuplicateActivationForwardsToTheWinner(t *testing.T) {
	dir := &scriptedDirectory{hold: true}
	router := &recordingRouter{}
	f := newFixture(t, HostOptions{}, WithDirectory(dir), WithRouter(router))
	id := actor.GrainID{Type: testType, Key: "dup"}
	replies := make([]chanReplier, 3)
	for i := range replies {
		replies[i] = make(chanReplier, 1)
		f.host.Activate(&Request{Target: id, MethodID: mAdd, Payload: mustPayload(t, 1), Reply: replies[i]})
	}
	require.Eventually(t, func() bool { dir.mu.Lock(); defer dir.mu.Unlock(); return len(dir.held) == 1 }, testWait, testPoll)
	dir.answer("silo-2", nil)
	for _, rc := range replies {
		r := <-rc
		require.NoError(t, r.err)
		assert.EqualValues(t, -200, r.reply.(*wrapperspb.Int64Value).Value, "answered by the winner")
	}
	assert.Equal(t, []string{"silo-2", "silo-2", "silo-2"}, router.forwarded)
	assert.Zero(t, f.activated.Load(), "OnActivate never ran")
	assert.Zero(t, f.invoked.Load())
	require.Eventually(t, func() bool { return !f.host.IsActive(id) }, testWait, testPoll)
	assert.Empty(t, dir.unregistered, "a loser has nothing to unregister")
}

// Requests that arrive while the directory has not answered wait, then
// run in order once the activation won.
func TestRequestsWaitForTheRegistration(t *testing.T) {
	dir := &scriptedDirectory{hold: true}
	f := newFixture(t, HostOptions{}, WithDirectory(dir))
	replies := make([]chanReplier, 4)
	for i := range replies {
		replies[i] = f.send(context.Background(), "w", mAdd, 1, 0)
	}
	require.Eventually(t, func() bool { dir.mu.Lock(); defer dir.mu.Unlock(); return len(dir.held) == 1 }, testWait, testPoll)
	assert.Zero(t, f.activated.Load(), "nothing activates before the directory answers")
	dir.answer("", nil)
	for i, rc := range replies {
		r := <-rc
		require.NoError(t, r.err)
		assert.EqualValues(t, i+1, r.reply.(*wrapperspb.Int64Value).Value, "in arrival order")
	}
	assert.EqualValues(t, 1, f.activated.Load())
}

// A directory that cannot be reached fails the requests that waited with
// an error that says the grain is unavailable, and the next call tries
// again.
func TestRegistrationErrorFailsTheWaitingRequests(t *testing.T) {
	dir := &scriptedDirectory{hold: true}
	f := newFixture(t, HostOptions{}, WithDirectory(dir))
	rc := f.send(context.Background(), "e", mAdd, 1, 0)
	require.Eventually(t, func() bool { dir.mu.Lock(); defer dir.mu.Unlock(); return len(dir.held) == 1 }, testWait, testPoll)
	dir.answer("", assert.AnError)
	r := <-rc
	require.ErrorIs(t, r.err, actor.ErrUnavailable)
	assert.ErrorIs(t, r.err, assert.AnError)
	// Until the failed activation leaves the table, calls that reach it
	// fail with its cause too; IsActive is false from the start.
	f.waitLeft("e")

	dir.mu.Lock()
	dir.hold = false
	dir.mu.Unlock()
	v, err := f.call("e", mAdd, 5)
	require.NoError(t, err)
	assert.EqualValues(t, 5, v)
}

// A host that stops while an activation waits for the directory still
// deactivates it: the activation cannot deactivate before it has
// activated, so it does once it is active, after running the requests
// that waited for it. Asked only once, by Stop, it used to stay active and
// hold Stop until its context ended.
func TestStopDeactivatesAnActivationThatWasRegistering(t *testing.T) {
	dir := &scriptedDirectory{hold: true}
	f := newFixture(t, HostOptions{}, WithDirectory(dir))
	id := actor.GrainID{Type: testType, Key: "s"}
	rc := f.send(context.Background(), id.Key, mAdd, 1, 0)
	require.Eventually(t, func() bool { dir.mu.Lock(); defer dir.mu.Unlock(); return len(dir.held) == 1 }, testWait, testPoll)
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		defer cancel()
		stopped <- f.host.Stop(ctx)
	}()
	require.Eventually(t, func() bool {
		f.host.mu.RLock()
		defer f.host.mu.RUnlock()
		return f.host.mu.stopping
	}, testWait, testPoll, "Stop has asked every activation to deactivate")
	dir.answer("", nil)

	r := <-rc
	require.NoError(t, r.err)
	assert.EqualValues(t, 1, r.reply.(*wrapperspb.Int64Value).Value, "the request that waited ran")
	require.NoError(t, <-stopped, "the activation deactivated once it was active")
	assert.EqualValues(t, 1, f.activated.Load())
	assert.EqualValues(t, 1, f.deactivated.Load())
	dir.mu.Lock()
	defer dir.mu.Unlock()
	assert.Equal(t, []actor.GrainID{id}, dir.unregistered)
}

// A deactivating grain writes its state before it unregisters, so that the
// grain's next activation, wherever the directory puts it, reads it.
func TestDeactivationUnregistersAfterTheFinalFlush(t *testing.T) {
	var order []string
	dir := &scriptedDirectory{log: &order}
	f := newFixture(t, HostOptions{}, WithDirectory(dir))
	f.store.onWrite = func() { order = append(order, "write") }
	_, err := f.call("d", mAdd, 3)
	require.NoError(t, err)
	_, err = f.call("d", mLeave, 0)
	require.NoError(t, err)
	require.Eventually(t, func() bool { dir.mu.Lock(); defer dir.mu.Unlock(); return len(dir.unregistered) == 1 }, testWait, testPoll)
	dir.mu.Lock()
	defer dir.mu.Unlock()
	assert.Equal(t, []string{"write", "unregister"}, order)
	assert.Equal(t, []actor.GrainID{{Type: testType, Key: "d"}}, dir.registered)
}
