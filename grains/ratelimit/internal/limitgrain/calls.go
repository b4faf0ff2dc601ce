package limitgrain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

// Errors the grains answer with.
var (
	errNoOptions = errors.New("ratelimit: no options given")
	// errWaitExpired answers a configuration change, reset or delete whose
	// budget ran out while it waited for the acquisitions ahead of it. It
	// matches proxy.ErrTimeout, which keeps its meaning across a
	// connection.
	errWaitExpired = fmt.Errorf("%w: ratelimit: the budget ran out while the change waited for queued acquisitions", proxy.ErrTimeout)
)

// callKind says what a waiting call will do when its turn comes.
type callKind uint8

const (
	acquireCall     callKind = iota // take permits
	reconfigureCall                 // reconfigure when the options differ, then take permits
	configureCall                   // replace the options
	resetCall                       // restore full quota
	deleteCall                      // clear stored state, back to the defaults
)

func (k callKind) acquires() bool { return k == acquireCall || k == reconfigureCall }

// end says why the grain gave up on a call before answering it.
type end uint8

const (
	endNone      end = iota
	endExpired       // its budget ran out
	endCancelled     // its caller cancelled
)

// call is a call whose reply the grain keeps: an acquisition waiting in the
// limiter's queue, or any call waiting behind a configuration change. Its
// one deadline, fixed when the reply was kept, covers both waits.
type call[O any] struct {
	kind       callKind
	permits    int64
	options    O
	refundable bool // a time-based grant keeps what a Refund needs

	reply    deferred
	deadline time.Time // zero when the call has no budget
	timer    timer     // fires at the deadline
	waiter   *limiter.Waiter
	end      end
	done     bool
}

func (c *call[O]) expired(now time.Time) bool {
	return c.end == endExpired || (!c.deadline.IsZero() && !now.Before(c.deadline))
}

func (c *call[O]) cancelled() bool {
	return c.end == endCancelled || c.reply.Context().Err() != nil
}

// keep defers the running method's reply into c and, only now that the
// call must wait, arms its deadline from the call's budget and watches
// for its caller's cancellation (which sets up nothing for a caller that
// cannot cancel).
func (g *grain[O, P, R]) keep(c *call[O], now time.Time) {
	d, err := g.act.Defer()
	if err != nil { // keep is only called from request turns
		panic(err)
	}
	c.reply = d
	g.counters.waiting.Add(1)
	if c.kind.acquires() {
		g.counters.queued.Add(1)
	}
	if deadline, ok := d.Deadline(); ok {
		c.deadline = deadline
		c.timer = g.act.AfterFunc(deadline.Sub(now), func() { g.expire(c) })
	}
	if d.Cancellable() { // a caller that cannot cancel gets nothing set up, not even this closure
		d.OnCancel(func() { g.cancel(c) })
	}
}

// hold keeps the running method's call behind the configuration change
// ahead of it.
func (g *grain[O, P, R]) hold(c *call[O]) {
	g.keep(c, g.act.Now())
	g.held = append(g.held, c)
	if c.kind.acquires() {
		g.heldPermits += c.permits
	}
}

func (g *grain[O, P, R]) unhold(i int) *call[O] {
	c := g.held[i]
	g.held = slices.Delete(g.held, i, i+1)
	if c.kind.acquires() {
		g.heldPermits -= c.permits
	}
	return c
}

// answer sends c's reply and stops its deadline. reply must be nil or a
// non-nil message.
func (g *grain[O, P, R]) answer(c *call[O], reply proto.Message, err error) {
	if !c.done {
		g.counters.waiting.Add(-1)
	}
	c.done = true
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	c.reply.Reply(reply, err)
}

// expire is the deadline of c: the call leaves the queue, or the line of
// calls behind a change, and is answered here, without waiting for a
// cancel from its caller.
func (g *grain[O, P, R]) expire(c *call[O]) {
	c.timer = nil
	if c.done {
		return
	}
	c.end = endExpired
	g.giveUp(c)
}

// cancel runs when c's caller cancels.
func (g *grain[O, P, R]) cancel(c *call[O]) {
	if c.done {
		return
	}
	c.end = endCancelled
	g.giveUp(c)
}

func (g *grain[O, P, R]) giveUp(c *call[O]) {
	now := g.act.Now()
	if c.waiter != nil {
		g.core.Cancel(now, c.waiter) // completes it; settle answers
	} else if i := slices.Index(g.held, c); i >= 0 {
		g.unhold(i)
		g.answerGivenUp(c)
	}
	g.settle(now)
}

// answerGivenUp answers a call the grain gave up on: a rejected lease for
// an acquisition whose budget ran out (the holder returns it, not an
// error), the caller's own error for a cancelled call.
func (g *grain[O, P, R]) answerGivenUp(c *call[O]) {
	switch {
	case c.end == endCancelled:
		if c.kind.acquires() {
			g.counters.cancelled.Add(1)
		}
		g.answer(c, nil, context.Canceled)
	case c.kind.acquires():
		g.counters.expired.Add(1)
		g.answer(c, g.notAcquiredReply(), nil)
	default:
		g.answer(c, nil, errWaitExpired)
	}
}

// settle answers the waiters the core completed and runs the calls held
// behind a configuration change once they may run, until neither is left,
// then rearms the replenishment tick. Every method that may complete a
// waiter ends with it.
func (g *grain[O, P, R]) settle(now time.Time) {
	for {
		if len(g.completed) > 0 {
			w := g.completed[0]
			g.completed[0] = nil
			g.completed = g.completed[1:]
			g.finish(w, now)
			continue
		}
		if !g.runHeld(now) {
			break
		}
	}
	g.completed = g.completed[:0]
	g.rearm(now)
}

// finish answers a waiter the core completed.
func (g *grain[O, P, R]) finish(w *limiter.Waiter, now time.Time) {
	c := w.Value.(*call[O])
	c.waiter = nil
	g.queued--
	switch w.Outcome() {
	case limiter.OutcomeGranted:
		lease := w.Lease()
		switch {
		case c.cancelled():
			g.giveBack(lease, now)
			g.counters.cancelled.Add(1)
			g.answer(c, nil, context.Canceled)
		case c.expired(now) && g.releaser != nil:
			// The caller's budget has run out, so it may be gone: a
			// concurrency permit it would never release goes back before
			// the expiry is reported. A time-based grant has used its quota
			// either way, and the caller still waits out its response
			// timeout, so it gets the lease.
			g.giveBack(lease, now)
			g.counters.expired.Add(1)
			g.answer(c, g.notAcquiredReply(), nil)
		default:
			g.answer(c, g.leaseReply(lease, c.refundable, now), nil)
		}
	case limiter.OutcomeCanceled:
		g.answerGivenUp(c)
	case limiter.OutcomeClosed:
		g.counters.rejected.Add(1)
		g.answer(c, g.notAcquiredReply(), nil)
	default: // evicted by a newer waiter
		g.answer(c, g.rejectedReply(w.Lease(), now), nil)
	}
}

// giveBack returns the permits of a concurrency lease granted to a caller
// that will not hold it; the waiters this grants are settled in turn.
func (g *grain[O, P, R]) giveBack(lease limiter.Lease, now time.Time) {
	if g.releaser != nil {
		_ = g.releaser.Release(now, lease.Permits()) // the core granted them: never more than held
	}
}

// runHeld runs the first call held behind a configuration change if it
// may run now, and reports whether it did. An acquisition may always run
// once it is first in line; a change waits until the limiter's queue is
// empty. A call whose deadline passed before its expiry turn came is
// answered as expired: an expired budget neither acquires nor
// reconfigures.
func (g *grain[O, P, R]) runHeld(now time.Time) bool {
	if len(g.held) == 0 {
		return false
	}
	c := g.held[0]
	if c.kind != acquireCall && g.queued > 0 {
		return false
	}
	g.unhold(0)
	if c.expired(now) {
		c.end = endExpired
		g.answerGivenUp(c)
		return true
	}
	switch c.kind {
	case acquireCall:
		g.acquireHeld(c, now)
	case reconfigureCall:
		if c.options != g.options {
			if !g.reconfigureHeld(c, now) {
				return true
			}
		}
		g.acquireHeld(c, now)
	case configureCall:
		if g.reconfigureHeld(c, now) {
			g.answer(c, &pb.ConfigureReply{}, nil)
		}
	case resetCall:
		g.reset(now)
		g.answer(c, &pb.ResetReply{}, nil)
	case deleteCall:
		if err := g.deleteState(now); err != nil {
			g.answer(c, nil, err)
		} else {
			g.answer(c, &pb.DeleteStateReply{}, nil)
		}
	}
	return true
}

// reconfigureHeld applies a held call's options, answering it with the
// error when they cannot be installed.
func (g *grain[O, P, R]) reconfigureHeld(c *call[O], now time.Time) bool {
	fresh, err := g.trial(c.options, c.permits, now)
	if err != nil {
		g.answer(c, nil, err)
		return false
	}
	g.reconfigure(c.options, fresh, now, c.kind == configureCall)
	return true
}

// acquireHeld runs a held acquisition now that its turn has come.
func (g *grain[O, P, R]) acquireHeld(c *call[O], now time.Time) {
	lease, w, err := g.core.Acquire(now, c.permits)
	switch {
	case err != nil:
		g.answer(c, nil, err)
	case w == nil:
		g.act.MarkDirty()
		g.answer(c, g.leaseReply(lease, c.refundable, now), nil)
	default:
		g.act.MarkDirty()
		g.enqueued(c, w)
	}
}
