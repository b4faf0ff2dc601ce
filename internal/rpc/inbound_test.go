package rpc

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/host"
)

// recordingInbound records how requests reach it. The first DeliverInline
// blocks until release is closed, so that the test can queue more behind it.
type recordingInbound struct {
	mu      sync.Mutex
	batches [][]string // keys of each DeliverInline call
	direct  []string   // keys delivered with Deliver
	entered chan struct{}
	release chan struct{}
	once    sync.Once
	done    chan struct{} // one signal per request delivered inline
}

func (r *recordingInbound) Deliver(req *host.Request) {
	r.mu.Lock()
	r.direct = append(r.direct, req.Target.Key)
	r.mu.Unlock()
}

func (r *recordingInbound) DeliverInline(reqs []*host.Request) func() {
	keys := make([]string, len(reqs))
	for i, req := range reqs {
		keys[i] = req.Target.Key
	}
	r.mu.Lock()
	r.batches = append(r.batches, keys)
	r.mu.Unlock()
	return func() {
		r.once.Do(func() {
			close(r.entered)
			<-r.release
		})
		for range keys {
			r.done <- struct{}{}
		}
	}
}

// Consecutive requests for one grain reach it together; requests for other
// grains in between split them, so each grain's requests keep their order.
func TestRunnerDeliversConsecutiveRequestsForOneGrainTogether(t *testing.T) {
	in := &recordingInbound{entered: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{}, 16)}
	r := newInboundRunner(in)
	r.checkEvery = time.Hour // the held first turn must not count as stalled
	defer r.close()
	req := func(key string) *host.Request {
		return &host.Request{Target: actor.GrainID{Type: "t", Key: key}}
	}
	r.deliver(req("first"))
	<-in.entered // the runner is inside the first turn: the rest queue up
	for _, k := range []string{"a", "a", "a", "b", "a", "c", "c"} {
		r.deliver(req(k))
	}
	close(in.release)
	for range 8 {
		select {
		case <-in.done:
		case <-time.After(10 * time.Second):
			t.Fatal("a queued request was not delivered")
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	require.Empty(t, in.direct)
	assert.Equal(t, [][]string{{"first"}, {"a", "a", "a"}, {"b"}, {"a"}, {"c", "c"}}, in.batches)
}

// Closing the runner while a turn holds it and requests wait behind it
// leaves nothing behind: close waits for the turn, the runner delivers
// what was queued, in order, and only then exits; a request that arrives
// after close began goes the ordinary way.
func TestRunnerCloseDeliversWhatWasQueued(t *testing.T) {
	in := &recordingInbound{entered: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{}, 16)}
	r := newInboundRunner(in)
	r.checkEvery = time.Hour // the held turn must not count as stalled
	req := func(key string) *host.Request {
		return &host.Request{Target: actor.GrainID{Type: "t", Key: key}}
	}
	r.deliver(req("first"))
	<-in.entered
	r.deliver(req("a"))
	r.deliver(req("b"))
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
	r.deliver(req("late"))
	close(in.release)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return")
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	assert.Equal(t, [][]string{{"first"}, {"a"}, {"b"}}, in.batches)
	assert.Equal(t, []string{"late"}, in.direct)
	assert.Empty(t, r.mu.queue)
}
