package rpc

import (
	"sync"

	"github.com/granary-go/granary/actor"
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

const (
	// maxParkedWorkers is how many idle workers a connection's runner
	// keeps parked; one more exits.
	maxParkedWorkers = 2
	// maxTurnWorkers bounds the workers of a connection's runner. Past
	// it, requests go the ordinary way, to their activations' own
	// workers (the host's), so that a connection never owns more than
	// this many goroutines however many of its grains' turns are long.
	maxTurnWorkers = 16
)

// inboundRunner runs the turns of requests that arrive on one connection.
//
// The reader goroutine must not run grain code, yet handing every request
// to its activation's worker costs a goroutine wake per request whenever
// the activation is idle (always, when load spreads over many grains). So
// the reader queues requests here and wakes a worker of the runner only
// when none is free to look at the queue; a worker delivers what is queued,
// in order, and runs the turns of idle activations itself, inside each
// activation's protoactor mailbox. A batch of requests read together costs
// one wake.
//
// A turn can be long (a grain that computes, or blocks), and requests for
// other grains must not wait for it: a worker that starts a turn while
// more turns are claimed, or while the queue holds a request for a grain
// whose turn no worker runs, leaves a free worker behind (a parked one, or
// a new one). So turns of different grains run side by side, each grain's
// requests still delivered in the order they came, and a request waits
// only for its own grain's turns. Requests for a grain whose turn a worker
// runs wake nobody: that worker delivers them when its turn ends.
//
// Invariants, under mu: workers = free + parked + len(busy) <=
// maxWorkers; len(busy) + the claims not yet taken <= maxWorkers, so that
// every claim has a worker to come; claims wait only while a worker is
// free; and the queue holds a request for a grain no worker runs only
// while a worker is free. Every delivery to an activation, inline or the
// ordinary way, is made under mu, which keeps each grain's requests in
// the order the reader read them.
type inboundRunner struct {
	inbound    InlineInbound
	maxWorkers int // maxTurnWorkers; tests may lower it
	// wake carries one token to each parked worker that is woken; it
	// holds up to maxParkedWorkers, so a send never blocks.
	wake chan struct{}
	done sync.WaitGroup // the workers

	mu struct {
		sync.Mutex
		queue    []*delivery.Request
		claimed  []claim // turns of idle activations, to run in order
		next     int     // first of claimed not yet taken
		free     int     // workers awake and not in a turn: each looks at the queue before it parks
		parked   int
		workers  int
		busy     []actor.GrainID // the grains whose turns workers run now
		stopping bool
	}
}

// claim is the processing of an idle activation's mailbox that a delivery
// claimed, and the grain it belongs to.
type claim struct {
	run   func()
	grain actor.GrainID
}

func newInboundRunner(in InlineInbound) *inboundRunner {
	return &inboundRunner{inbound: in, maxWorkers: maxTurnWorkers, wake: make(chan struct{}, maxParkedWorkers)}
}

// deliver is called on the reader goroutine. It never runs grain code.
func (r *inboundRunner) deliver(req *delivery.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.stopping {
		// What is still queued (behind running turns) goes first, so
		// that req cannot overtake a request for its grain.
		r.mu.queue = append(r.mu.queue, req)
		r.deliverQueued()
		return
	}
	r.mu.queue = append(r.mu.queue, req)
	if r.mu.free > 0 || r.busyWith(req.Target) {
		return // a worker will look at the queue
	}
	if r.mu.parked > 0 || r.mu.workers < r.maxWorkers {
		r.wakeLocked()
		return
	}
	// Every worker is in a turn, each of another grain than req's: the
	// queue goes the ordinary way, in order, rather than wait for one.
	r.deliverQueued()
}

// busyWith reports whether a worker runs a turn of grain. r.mu must be
// held.
func (r *inboundRunner) busyWith(grain actor.GrainID) bool {
	for _, g := range r.mu.busy {
		if g == grain {
			return true
		}
	}
	return false
}

// wakeLocked makes one more worker free: a parked one, or a new one.
// r.mu must be held, and a worker must be parked or fewer than
// r.maxWorkers exist.
func (r *inboundRunner) wakeLocked() {
	r.mu.free++
	if r.mu.parked > 0 {
		r.mu.parked--
		r.wake <- struct{}{}
		return
	}
	r.mu.workers++
	r.done.Add(1)
	go r.work()
}

// work is a worker: counted free, it delivers what is queued, runs the
// claimed turns one at a time, and parks (or exits) when nothing is left.
// Consecutive requests for the same grain are delivered together, as one
// mailbox message.
func (r *inboundRunner) work() {
	defer r.done.Done()
	r.mu.Lock()
	for {
		r.deliverQueuedInline()
		if r.mu.next < len(r.mu.claimed) {
			c := r.mu.claimed[r.mu.next]
			r.mu.claimed[r.mu.next] = claim{}
			r.mu.next++
			if r.mu.next == len(r.mu.claimed) {
				r.mu.claimed, r.mu.next = r.mu.claimed[:0], 0
			}
			r.mu.free--
			r.mu.busy = append(r.mu.busy, c.grain)
			if r.mu.free == 0 && r.mu.next < len(r.mu.claimed) {
				// The turns behind this one must not wait for it. A
				// worker is parked, or len(busy) < the claims' bound.
				r.wakeLocked()
			}
			r.mu.Unlock()

			c.run()

			r.mu.Lock()
			r.doneWith(c.grain)
			r.mu.free++
			continue
		}
		r.mu.free--
		if r.mu.stopping || r.mu.parked >= maxParkedWorkers {
			r.mu.workers--
			r.mu.Unlock()
			return
		}
		r.mu.parked++
		r.mu.Unlock()
		// A plain receive, not a select over a second channel: a worker
		// parks and wakes once per batch, and a select costs twice as
		// much. close wakes parked workers with tokens too.
		<-r.wake
		r.mu.Lock()
	}
}

// doneWith forgets that a worker runs a turn of grain. r.mu must be held.
func (r *inboundRunner) doneWith(grain actor.GrainID) {
	for i, g := range r.mu.busy {
		if g == grain {
			last := len(r.mu.busy) - 1
			r.mu.busy[i] = r.mu.busy[last]
			r.mu.busy[last] = actor.GrainID{}
			r.mu.busy = r.mu.busy[:last]
			return
		}
	}
}

// deliverQueuedInline delivers every queued request, collecting the turns
// of idle activations that the deliveries claimed; once the claims would
// outnumber the workers allowed, the rest go the ordinary way. r.mu must
// be held.
func (r *inboundRunner) deliverQueuedInline() {
	q := r.mu.queue
	for i := 0; i < len(q); {
		j := i + 1
		for j < len(q) && q[j].Target == q[i].Target {
			j++
		}
		if len(r.mu.busy)+len(r.mu.claimed)-r.mu.next < r.maxWorkers {
			grain := q[i].Target
			if run := r.inbound.DeliverInline(q[i:j]); run != nil {
				r.mu.claimed = append(r.mu.claimed, claim{run: run, grain: grain})
			}
		} else {
			for _, req := range q[i:j] {
				r.inbound.Deliver(req)
			}
		}
		clear(q[i:j])
		i = j
	}
	r.mu.queue = q[:0]
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

// close stops the runner after its workers have delivered what is queued
// and run the turns they claimed; requests that arrive later are
// delivered the ordinary way, after what is still queued then. (The
// endpoint closes its runner on the reader goroutine once reading has
// stopped, so none arrive; the order holds if one does.) It waits for every worker to exit, and so
// for the turns they run.
func (r *inboundRunner) close() {
	r.mu.Lock()
	if r.mu.stopping {
		r.mu.Unlock()
		return
	}
	r.mu.stopping = true
	for r.mu.parked > 0 {
		r.mu.parked--
		r.mu.free++
		r.wake <- struct{}{}
	}
	r.mu.Unlock()
	r.done.Wait()
}
