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
		nextID    uint64
		calls     idmap.Map[*pending]
		closed    error
		sweeping  bool
		lastSweep int64  // unix nanos of the last sweep, while sweeping
		swept     uint64 // nextID at the last sweep: later calls have estimated deadlines
	}
	timeouts atomic.Int64
}

func (t *callTable) init(c clock.Clock, interval time.Duration) {
	t.clock, t.interval = c, interval
	t.mu.calls.Init(callSlots)
}

// add registers p under a fresh call id.
//
// While the sweep runs, the deadline is taken from the time of the last
// sweep plus one interval (when the next sweep is due) instead of reading
// the clock: under load no call reads the clock. A sweep that runs late
// first moves the deadlines of the calls added since the previous one by
// its lateness, so a deadline is never earlier than the exact one, only up
// to one interval (and the timer's lateness) later. Deadlines saturate: a
// timeout of math.MaxInt64, a common way to say "never", does not wrap.
func (t *callTable) add(p *pending) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed != nil {
		return 0, fmt.Errorf("%w: %w", ErrNotSent, t.mu.closed)
	}
	if t.mu.sweeping {
		p.deadline = addSaturating(t.mu.lastSweep+int64(t.interval), int64(p.call.Timeout))
	} else {
		now := t.clock.Now().UnixNano()
		p.deadline = addSaturating(now, int64(p.call.Timeout))
		t.mu.lastSweep = now // the next sweep is one interval from now
		t.mu.swept = t.mu.nextID
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
	// Calls added since the previous sweep took this one's due time as the
	// present; when it runs late, their deadlines move by as much.
	late, swept := now-(t.mu.lastSweep+int64(t.interval)), t.mu.swept
	t.mu.lastSweep, t.mu.swept = now, t.mu.nextID
	expired := t.mu.calls.RemoveIf(nil, func(id uint64, p *pending) bool {
		if late > 0 && id > swept {
			p.deadline = addSaturating(p.deadline, late)
		}
		return now >= p.deadline
	})
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
