package rpc

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/idmap"
	"github.com/granary-go/granary/proxy"
)

// DefaultSweepInterval is how often pending calls are checked against their
// response timeouts: the resolution of a timeout.
const DefaultSweepInterval = 10 * time.Millisecond

// pending is one outgoing call waiting for its reply. Whoever removes it from
// the table completes it, exactly once.
type pending struct {
	done     chan struct{} // buffered(1): completion signal
	id       uint64        // call id, while in a call table
	deadline int64         // unix nanos after which the sweep fails the call
	call     proxy.Call
	out      outFrame // the request while it is being sent

	payload []byte // encoded reply
	err     error

	relay *relayEntry // set when the entry relays another connection's request instead of a waiting caller
}

var pendingPool = sync.Pool{New: func() any { return &pending{done: make(chan struct{}, 1)} }}

func getPending() *pending { return pendingPool.Get().(*pending) }

func putPending(p *pending) {
	*p = pending{done: p.done}
	pendingPool.Put(p)
}

// callSlots is the size of a call table's ring of slots: a power of two,
// comfortably above the calls one connection keeps in flight.
const callSlots = 256

// callTable tracks the outgoing calls of one connection (or of the local
// caller) and fails those whose response timeout passed. One coarse clock
// per table does this: no timer per call. The clock is armed only while
// calls are pending.
//
// Call ids count up, so calls live in an idmap.Map: a call takes the ring
// slot its id selects, and goes to an overflow map only when an older one
// (a slow call among many fast ones) still holds that slot. Registering and
// taking a call thus index an array instead of hashing into a map that
// churns.
type callTable struct {
	clock    clock.Clock
	interval time.Duration

	mu struct {
		sync.Mutex
		nextID   uint64
		calls    idmap.Map[*pending]
		closed   error
		sweeping bool
	}
	timeouts atomic.Int64
}

func (t *callTable) init(c clock.Clock, interval time.Duration) {
	t.clock, t.interval = c, interval
	t.mu.calls.Init(callSlots)
}

// add registers p under a fresh call id, with the exact deadline: the
// time of the call plus its response timeout. Deadlines saturate: a
// timeout of math.MaxInt64, a common way to say "never", does not wrap.
//
// The deadline is read from the clock on every call. Estimating it from
// the sweep's due time instead, and moving the estimates by a late sweep's
// lateness so as never to shorten a timeout, lengthened the timeout of a
// call made just after a sweep by the whole lateness, on top of the
// lateness of the sweep that failed it: a process stall at the start of a
// call counted twice. docs/performance.md has what the read costs.
func (t *callTable) add(p *pending) (uint64, error) {
	// The clock is read before the lock, so that every caller of this
	// endpoint does not wait on another's clock read.
	p.deadline = addSaturating(t.clock.Now().UnixNano(), int64(p.call.Timeout))
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed != nil {
		return 0, fmt.Errorf("%w: %w", ErrNotSent, t.mu.closed)
	}
	if !t.mu.sweeping {
		t.mu.sweeping = true
		t.clock.AfterFunc(t.interval, t.sweep)
	}
	t.mu.nextID++
	id := t.mu.nextID
	p.id = id
	t.mu.calls.Add(id, p) // ids are fresh: it cannot be present
	return id, nil
}

// take removes and returns the call with the given id, or nil when it was
// already completed (answered, timed out or abandoned).
func (t *callTable) take(id uint64) *pending {
	t.mu.Lock()
	p := t.mu.calls.Take(id)
	t.mu.Unlock()
	return p
}

func (t *callTable) sweep() {
	now := t.clock.Now().UnixNano()
	t.mu.Lock()
	expired := t.mu.calls.RemoveIf(nil, func(_ uint64, p *pending) bool { return now >= p.deadline })
	if t.mu.calls.Len() > 0 && t.mu.closed == nil {
		t.clock.AfterFunc(t.interval, t.sweep)
	} else {
		t.mu.sweeping = false
	}
	t.mu.Unlock()
	for _, p := range expired {
		t.timeouts.Add(1)
		if p.relay != nil {
			p.relay.fail(p, &proxy.CallError{Code: proxy.CodeTimeout, Message: fmt.Sprintf("%s: relayed call got no reply within %v", p.relay.req.Target, p.call.Timeout)})
			continue
		}
		p.err = &proxy.TimeoutError{Target: p.call.Target, Method: p.call.Method.FullName(), Timeout: p.call.Timeout}
		p.done <- struct{}{}
	}
}

// close fails every pending call with err and refuses new ones.
func (t *callTable) close(err error) {
	t.mu.Lock()
	if t.mu.closed == nil {
		t.mu.closed = err
	}
	calls := t.mu.calls.RemoveIf(nil, func(uint64, *pending) bool { return true })
	t.mu.Unlock()
	for _, p := range calls {
		if p.relay != nil {
			p.relay.fail(p, err)
			continue
		}
		p.err = err
		p.done <- struct{}{}
	}
}

// len reports how many calls are pending.
func (t *callTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.calls.Len()
}

// addSaturating returns a+b, or math.MaxInt64 when that overflows. A
// negative b (a timeout a filter or a direct caller got wrong) is added as
// it is: such a call times out at the next sweep.
func addSaturating(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// givenUp returns ctx's error when a caller that can cancel has already
// given up, so that the request is not sent and the grain cannot act on
// it. Callers that cannot cancel pay for nothing but the test.
func givenUp(ctx context.Context, call proxy.Call) error {
	if call.Cancellable {
		return ctx.Err()
	}
	return nil
}
