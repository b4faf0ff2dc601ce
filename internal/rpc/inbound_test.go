package rpc

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/delivery"
)

// recordingInbound records how requests reach it. The first turn of a
// held key blocks until the test releases that key; every turn signals
// done once per request it ran.
type recordingInbound struct {
	mu      sync.Mutex
	batches [][]string // keys of each DeliverInline call
	direct  []string   // keys delivered with Deliver
	held    map[string]chan struct{}
	holding map[string]bool // held keys whose first turn was claimed
	entered chan string     // the key of each held turn, as it starts
	done    chan string     // one key per request run inline
}

func newRecordingInbound(held ...string) *recordingInbound {
	in := &recordingInbound{held: make(map[string]chan struct{}), holding: make(map[string]bool), entered: make(chan string, 16), done: make(chan string, 64)}
	for _, k := range held {
		in.held[k] = make(chan struct{})
	}
	return in
}

// release lets the held turn of key end.
func (r *recordingInbound) release(key string) {
	r.mu.Lock()
	ch := r.held[key]
	delete(r.held, key)
	r.mu.Unlock()
	close(ch)
}

func (r *recordingInbound) Deliver(req *delivery.Request) {
	r.mu.Lock()
	r.direct = append(r.direct, req.Target.Key)
	r.mu.Unlock()
}

func (r *recordingInbound) DeliverInline(reqs []*delivery.Request) func() {
	keys := make([]string, len(reqs))
	for i, req := range reqs {
		keys[i] = req.Target.Key
	}
	r.mu.Lock()
	r.batches = append(r.batches, keys)
	hold := r.held[keys[0]]
	if r.holding[keys[0]] {
		hold = nil // only the first turn of a held key is held
	}
	r.holding[keys[0]] = true
	r.mu.Unlock()
	return func() {
		if hold != nil {
			r.entered <- keys[0]
			<-hold
		}
		for _, k := range keys {
			r.done <- k
		}
	}
}

func (r *recordingInbound) batchesSoFar() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]string(nil), r.batches...)
}

func grainRequest(key string) *delivery.Request {
	return &delivery.Request{Target: actor.GrainID{Type: "t", Key: key}}
}

// waitDone waits for the turn of key to signal that it ran.
func waitTurn(t *testing.T, in *recordingInbound, key string) {
	t.Helper()
	select {
	case got := <-in.done:
		require.Equal(t, key, got)
	case <-time.After(10 * time.Second):
		t.Fatalf("the turn of %s did not run", key)
	}
}

// A turn that does not end holds up only its own grain: a request for
// another grain that arrives while it runs is run at once, by another
// worker, while the first turn is still held. No timer is involved.
func TestRunnerRunsAnotherGrainWhileATurnIsHeld(t *testing.T) {
	in := newRecordingInbound("slow")
	r := newInboundRunner(in)
	defer r.close()
	r.deliver(grainRequest("slow"))
	require.Equal(t, "slow", <-in.entered)
	for range 3 {
		r.deliver(grainRequest("fast"))
		waitTurn(t, in, "fast")
	}
	in.release("slow")
	waitTurn(t, in, "slow")
}

// Turns claimed together, by one delivery of what was queued, do not wait
// for each other either: the worker that takes the first leaves a free
// worker behind for the rest.
func TestRunnerRunsTurnsClaimedTogetherSideBySide(t *testing.T) {
	in := newRecordingInbound("slow")
	r := newInboundRunner(in)
	defer r.close()
	r.mu.Lock() // both queued before any worker looks
	r.mu.queue = append(r.mu.queue, grainRequest("slow"), grainRequest("fast"))
	r.wakeLocked()
	r.mu.Unlock()
	require.Equal(t, "slow", <-in.entered)
	waitTurn(t, in, "fast")
	assert.Equal(t, [][]string{{"slow"}, {"fast"}}, in.batchesSoFar(), "delivered in one pass, in order")
	in.release("slow")
	waitTurn(t, in, "slow")
}

// Requests for a grain whose turn a worker runs wake nobody: they are
// delivered together, in order, once a worker is free, and requests for
// other grains between them split them, so each grain's requests keep
// their order.
func TestRunnerDeliversConsecutiveRequestsForOneGrainTogether(t *testing.T) {
	in := newRecordingInbound("a")
	r := newInboundRunner(in)
	defer r.close()
	r.deliver(grainRequest("a"))
	require.Equal(t, "a", <-in.entered)
	for range 3 {
		r.deliver(grainRequest("a")) // the worker runs a's turn: nobody wakes
	}
	r.mu.Lock()
	assert.Len(t, r.mu.queue, 3, "queued behind a's turn")
	r.mu.Unlock()
	r.deliver(grainRequest("b")) // wakes a worker, which delivers all four
	for _, k := range []string{"a", "a", "a", "b"} {
		waitTurn(t, in, k)
	}
	assert.Equal(t, [][]string{{"a"}, {"a", "a", "a"}, {"b"}}, in.batchesSoFar())
	in.release("a")
	waitTurn(t, in, "a")
}

// Closing the runner while a turn holds it and requests wait behind it
// leaves nothing behind: close waits for the turn, a worker delivers what
// was queued, in order, and only then exits; a request that arrives after
// close began goes the ordinary way.
func TestRunnerCloseDeliversWhatWasQueued(t *testing.T) {
	in := newRecordingInbound("first")
	r := newInboundRunner(in)
	r.deliver(grainRequest("first"))
	require.Equal(t, "first", <-in.entered)
	r.deliver(grainRequest("first"))
	r.deliver(grainRequest("first"))
	closed := make(chan struct{})
	go func() {
		r.close()
		close(closed)
	}()
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.mu.stopping
	}, 5*time.Second, time.Millisecond)
	r.deliver(grainRequest("late"))
	in.release("first")
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return")
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	assert.Equal(t, [][]string{{"first"}, {"first", "first"}}, in.batches)
	assert.Equal(t, []string{"late"}, in.direct)
	assert.Empty(t, r.mu.queue)
}

// Workers park when they run out of work, at most maxParkedWorkers of
// them, and are woken again rather than started anew.
func TestRunnerParksIdleWorkers(t *testing.T) {
	held := []string{"h0", "h1", "h2", "h3"}
	in := newRecordingInbound(held...)
	r := newInboundRunner(in)
	for _, k := range held {
		r.deliver(grainRequest(k))
		require.Equal(t, k, <-in.entered)
	}
	for _, k := range held {
		in.release(k)
		waitTurn(t, in, k)
	}
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.mu.parked == maxParkedWorkers && r.mu.free == 0
	}, 5*time.Second, time.Millisecond)
	r.deliver(grainRequest("next"))
	waitTurn(t, in, "next")
	r.close()
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Zero(t, r.mu.parked)
	assert.Zero(t, r.mu.free)
}
