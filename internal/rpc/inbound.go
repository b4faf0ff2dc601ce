package rpc

import (
	"sync"
	"time"

	"github.com/granary-go/granary/internal/delivery"
)

// InlineInbound is an Inbound that can hand a request's turn back to the
// delivering goroutine. The activation host is one.
type InlineInbound interface {
	Inbound
	// DeliverInline delivers reqs, which all call the same grain, and,
	// when its activation was idle, returns the processing that runs their
	// turns, for the caller to run instead of waking another goroutine;
	// otherwise nil. It does not retain reqs.
	DeliverInline(reqs []*delivery.Request) (run func())
}

// stallCheckInterval is how often a busy inbound runner is checked for a
// turn that does not end. It uses real time, not the endpoint's clock: it
// keeps requests moving, it does not decide any outcome, and a test that
// freezes its clock must not freeze delivery.
const stallCheckInterval = 5 * time.Millisecond

// inboundRunner runs the turns of requests that arrive on one connection.
//
// The reader goroutine must not run grain code, yet handing every request
// to its activation's worker costs a goroutine wake per request whenever
// the activation is idle (always, when load spreads over many grains). So
// the reader queues requests here and wakes this one runner only when it
// is not already running; the runner delivers them in order and runs the
// turn of each idle activation itself, inside the activation's protoactor
// mailbox. A batch of requests read together costs one wake.
//
// A grain that blocks its turn would hold up the requests queued behind
// it. A stall check (one timer per connection, armed only while the runner
// works) notices a turn that made no progress between two checks and then
// delivers the queue, and everything that arrives until the turn ends, the
// ordinary way.
type inboundRunner struct {
	inbound    InlineInbound
	handOffFn  func()        // r.handOff, bound once: every request it runs carries it
	checkEvery time.Duration // stallCheckInterval; tests may lengthen it
	wake       chan struct{} // capacity 1; closed to stop the runner
	done       chan struct{}
	helpers    sync.WaitGroup // goroutines running turns a stalled runner had claimed

	mu struct {
		sync.Mutex
		queue     []*delivery.Request
		claimed   []func() // turns of idle activations, to run in order
		next      int      // first of claimed not yet run
		started   bool     // the runner goroutine exists
		running   bool     // the runner is draining the queue
		inTurn    bool     // the runner is running a turn
		turns     uint64
		stalled   bool   // a turn outlasted a check: deliver directly
		checked   uint64 // turns at the previous check
		wasInTurn bool   // inTurn at the previous check
		timer     *time.Timer
		armed     bool
		stopping  bool
	}
}

func newInboundRunner(in InlineInbound) *inboundRunner {
	r := &inboundRunner{inbound: in, checkEvery: stallCheckInterval, wake: make(chan struct{}, 1), done: make(chan struct{})}
	r.handOffFn = r.handOff
	return r
}

// deliver is called on the reader goroutine. It never runs grain code.
func (r *inboundRunner) deliver(req *delivery.Request) {
	req.Waiting = r.handOffFn
	r.mu.Lock()
	if r.mu.stalled || r.mu.stopping {
		r.mu.Unlock()
		r.inbound.Deliver(req)
		return
	}
	r.mu.queue = append(r.mu.queue, req)
	if !r.mu.running {
		r.mu.running = true
		if !r.mu.started {
			r.mu.started = true
			go r.loop()
		}
		if !r.mu.armed {
			r.mu.armed = true
			r.mu.wasInTurn = false
			if r.mu.timer == nil {
				r.mu.timer = time.AfterFunc(r.checkEvery, r.check)
			} else {
				r.mu.timer.Reset(r.checkEvery)
			}
		}
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	r.mu.Unlock()
}

func (r *inboundRunner) loop() {
	defer close(r.done)
	// A plain receive, not a select over a second channel: the runner
	// parks and wakes once per batch, and a select costs twice as much.
	// close closes wake only once deliver can no longer send on it.
	for range r.wake {
		r.drain()
	}
}

// drain delivers queued requests until the queue is empty. It delivers
// everything queued first, collecting the turns of idle activations, and
// then runs those: a hot grain's requests then share one mailbox run, and
// requests for many grains share one wake. Consecutive requests for the
// same grain are delivered together, as one mailbox message. Delivering
// happens under the lock, so a stall check that takes over cannot reorder
// requests.
func (r *inboundRunner) drain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.mu.queue) > 0 {
		q := r.mu.queue
		for i := 0; i < len(q); {
			j := i + 1
			for j < len(q) && q[j].Target == q[i].Target {
				j++
			}
			if run := r.inbound.DeliverInline(q[i:j]); run != nil {
				r.mu.claimed = append(r.mu.claimed, run)
			}
			clear(q[i:j])
			i = j
		}
		r.mu.queue = r.mu.queue[:0]
		for r.mu.next < len(r.mu.claimed) {
			run := r.mu.claimed[r.mu.next]
			r.mu.claimed[r.mu.next] = nil
			r.mu.next++
			r.mu.inTurn = true
			r.mu.Unlock()

			run()

			r.mu.Lock()
			r.mu.inTurn = false
			r.mu.turns++
			r.mu.stalled = false
		}
		r.mu.claimed, r.mu.next = r.mu.claimed[:0], 0
	}
	r.mu.running = false
}

// check runs on a timer while the runner works. A turn still running with
// no turn finished since the previous check is stalled: the requests
// queued behind it are delivered the ordinary way, to their activations'
// own workers, and so is everything that arrives until the turn ends.
func (r *inboundRunner) check() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.stopping {
		r.mu.armed = false
		return
	}
	if r.mu.inTurn && r.mu.wasInTurn && r.mu.turns == r.mu.checked && !r.mu.stalled {
		r.stallLocked()
	}
	r.mu.checked, r.mu.wasInTurn = r.mu.turns, r.mu.inTurn
	if r.mu.running {
		r.mu.timer.Reset(r.checkEvery)
	} else {
		r.mu.armed = false
	}
}

// handOff is called by a turn that is about to wait for a call of its own
// (a grain calling another grain): if the runner is running a turn, it
// stops holding the requests behind it at once, as a stall check would
// once the turn had outlasted it. A turn that runs elsewhere (on its
// activation's worker) may call it too; handing off early costs nothing
// but the batching of a few requests.
func (r *inboundRunner) handOff() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.inTurn && !r.mu.stalled && !r.mu.stopping {
		r.stallLocked()
	}
}

// stallLocked hands what the runner holds to others: turns already claimed
// run on goroutines of their own (a rare path), each activation's mailbox
// being claimed by this runner, and the queued requests go to their
// activations' own workers, as does everything that arrives until the
// running turn ends. r.mu must be held.
func (r *inboundRunner) stallLocked() {
	r.mu.stalled = true
	for i := r.mu.next; i < len(r.mu.claimed); i++ {
		run := r.mu.claimed[i]
		r.mu.claimed[i] = nil
		r.helpers.Add(1)
		go func() {
			defer r.helpers.Done()
			run()
		}()
	}
	r.mu.claimed, r.mu.next = r.mu.claimed[:0], 0
	r.deliverQueued()
}

// close stops the runner after it has delivered what is queued; requests
// that arrive later are delivered the ordinary way. It waits for the
// runner goroutine to exit.
func (r *inboundRunner) close() {
	r.mu.Lock()
	if r.mu.stopping {
		r.mu.Unlock()
		return
	}
	r.mu.stopping = true
	started := r.mu.started
	if r.mu.timer != nil {
		r.mu.timer.Stop()
	}
	r.mu.Unlock()
	if !started {
		r.helpers.Wait()
		return
	}
	// deliver sends on wake only under r.mu, and never once stopping is
	// set. The runner drains what was queued before it sees wake closed,
	// so nothing is left behind when it exits.
	close(r.wake)
	<-r.done
	r.helpers.Wait()
}

// deliverQueued hands every queued request to its activation the ordinary
// way, in order. r.mu must be held.
func (r *inboundRunner) deliverQueued() {
	for i, req := range r.mu.queue {
		r.inbound.Deliver(req)
		r.mu.queue[i] = nil
	}
	r.mu.queue = r.mu.queue[:0]
}
