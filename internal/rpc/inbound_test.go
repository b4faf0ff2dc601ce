package rpc

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

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

// waitTurn waits for the next turn to signal that it ran, and checks it
// was key's.
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

// Past its bound of workers, a runner whose workers are all in turns of
// other grains delivers the ordinary way instead of starting another: a
// connection owns at most maxWorkers goroutines, and the request is not
// held up either.
func TestRunnerBoundsItsWorkers(t *testing.T) {
	held := []string{"h0", "h1", "h2"}
	in := newRecordingInbound(held...)
	r := newInboundRunner(in)
	r.maxWorkers = len(held)
	for _, k := range held {
		r.deliver(grainRequest(k))
		require.Equal(t, k, <-in.entered)
	}
	r.deliver(grainRequest("other")) // every worker is in a turn
	r.deliver(grainRequest("h0"))    // h0's worker delivers it after its turn
	r.mu.Lock()
	assert.Equal(t, len(held), r.mu.workers)
	assert.Len(t, r.mu.queue, 1, "h0's request waits for h0's turn")
	r.mu.Unlock()
	in.mu.Lock()
	assert.Equal(t, []string{"other"}, in.direct, "delivered the ordinary way")
	in.mu.Unlock()

	for _, k := range held {
		in.release(k)
	}
	got := map[string]int{}
	for range len(held) + 1 {
		select {
		case k := <-in.done:
			got[k]++
		case <-time.After(10 * time.Second):
			t.Fatal("a turn did not run")
		}
	}
	assert.Equal(t, map[string]int{"h0": 2, "h1": 1, "h2": 1}, got)
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.mu.workers == maxParkedWorkers && r.mu.parked == maxParkedWorkers
	}, 5*time.Second, time.Millisecond, "the worker over the parked ones exits")
	r.close()
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Zero(t, r.mu.workers)
}

// One pass of delivery claims no more turns than the workers allowed: the
// requests past the bound go the ordinary way, in order, and the claimed
// turns run side by side.
func TestRunnerClaimsNoMoreTurnsThanItsWorkers(t *testing.T) {
	in := newRecordingInbound("k0", "k1", "k2")
	r := newInboundRunner(in)
	r.maxWorkers = 3
	defer r.close()
	r.mu.Lock() // all queued before any worker looks
	for _, k := range []string{"k0", "k1", "k2", "k3", "k4"} {
		r.mu.queue = append(r.mu.queue, grainRequest(k))
	}
	r.wakeLocked()
	r.mu.Unlock()
	entered := map[string]bool{}
	for range 3 {
		entered[<-in.entered] = true
	}
	assert.Equal(t, map[string]bool{"k0": true, "k1": true, "k2": true}, entered, "the three claimed turns run at once")
	r.mu.Lock()
	assert.Equal(t, 3, r.mu.workers)
	r.mu.Unlock()
	in.mu.Lock()
	assert.Equal(t, [][]string{{"k0"}, {"k1"}, {"k2"}}, in.batches)
	assert.Equal(t, []string{"k3", "k4"}, in.direct)
	in.mu.Unlock()
	for _, k := range []string{"k0", "k1", "k2"} {
		in.release(k)
	}
	for range 3 {
		<-in.done
	}
}

// Closing the runner while turns of several grains hold their workers and
// requests wait behind them: close returns only once every turn has ended
// and every request queued before it has run, with no worker left; what
// arrives after close goes the ordinary way.
func TestRunnerCloseRunsQueuedWorkAndLeavesNoWorker(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	in := newRecordingInbound("a", "b")
	r := newInboundRunner(in)
	r.deliver(grainRequest("a"))
	r.deliver(grainRequest("b"))
	for range 2 {
		<-in.entered
	}
	r.deliver(grainRequest("a"))
	r.deliver(grainRequest("a"))
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
	in.release("a")
	for range 3 {
		waitTurn(t, in, "a")
	}
	select {
	case <-closed:
		t.Fatal("close returned while b's turn was held")
	default:
	}
	in.release("b")
	waitTurn(t, in, "b")
	<-closed
	r.deliver(grainRequest("late"))
	in.mu.Lock()
	assert.Equal(t, [][]string{{"a"}, {"b"}, {"a", "a"}}, in.batches)
	assert.Equal(t, []string{"late"}, in.direct)
	in.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Zero(t, r.mu.workers)
	assert.Empty(t, r.mu.queue)
}

// A request delivered once close has begun, while requests wait behind a
// running turn, goes the ordinary way after them: it cannot overtake a
// request for its grain.
func TestRunnerDeliversWhatArrivesDuringCloseAfterWhatWasQueued(t *testing.T) {
	in := newRecordingInbound("a")
	r := newInboundRunner(in)
	r.deliver(grainRequest("a"))
	<-in.entered
	r.deliver(grainRequest("a")) // both wait for a's turn
	r.deliver(grainRequest("a"))
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
	r.deliver(grainRequest("a"))
	in.mu.Lock()
	assert.Equal(t, []string{"a", "a", "a"}, in.direct, "the queued requests, then the late one")
	in.mu.Unlock()
	in.release("a")
	waitTurn(t, in, "a")
	<-closed
}
