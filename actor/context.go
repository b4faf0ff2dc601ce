package actor

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/clock"
)

// Context is a grain's handle on its activation: identity, state, timers
// and deferred replies. The runtime passes it to OnActivate; a grain may
// keep it for the life of the activation. Its methods must be called from
// inside the activation's turns unless they say otherwise.
type Context struct {
	a *activation
}

// ID returns the grain's identity. Safe from any goroutine.
func (c *Context) ID() GrainID { return c.a.id }

// Silo returns the value that hosts the activation: a *silo.Silo when the
// grain runs in package silo (silo.CallerOf gives its caller, to call other
// grains). Safe from any goroutine.
func (c *Context) Silo() any { return c.a.host.owner }

// Now returns the host clock's current time. Safe from any goroutine.
func (c *Context) Now() time.Time { return c.a.host.clock.Now() }

// MarkDirty records that the grain's state changed, so the next periodic
// flush writes it. It costs an atomic store.
func (c *Context) MarkDirty() {
	if c.a.record != nil {
		c.a.record.MarkDirty()
	}
}

// WriteState writes the grain's state now, inside the current turn.
func (c *Context) WriteState(ctx context.Context) error {
	if c.a.record == nil {
		return nil
	}
	return c.a.record.Flush(ctx)
}

// ClearState deletes the grain's stored state.
func (c *Context) ClearState(ctx context.Context) error {
	if c.a.record == nil {
		return nil
	}
	return c.a.record.Clear(ctx)
}

// DeactivateOnIdle deactivates the activation as soon as the current turn
// ends. The next call activates the grain again.
func (c *Context) DeactivateOnIdle() { c.a.deactivate = true }

// Defer keeps the reply of the request whose turn is running, so the grain
// can answer it from a later turn (a release, a timer, a cancel). The method
// then returns (nil, nil) and its return values are ignored. Defer returns
// ErrNotInTurn outside a request turn.
func (c *Context) Defer() (*Deferred, error) {
	a := c.a
	if a.current == nil {
		return nil, ErrNotInTurn
	}
	if a.deferredNow != nil {
		return a.deferredNow, nil
	}
	req := a.current
	d := &Deferred{a: a, req: req, ctx: req.Ctx}
	if req.Budget > 0 && req.cc != nil {
		d.deadline = req.cc.deadlineNow()
	}
	a.pendingMu.Lock()
	if a.pending == nil {
		a.pending = make(map[*Deferred]struct{})
	}
	a.pending[d] = struct{}{}
	a.pendingMu.Unlock()
	a.deferredNow = d
	a.host.stats.deferred.Add(1)
	return d, nil
}

// AfterFunc runs fn in a turn of this activation once d has elapsed.
// The timer dies with the activation. It does not keep the grain active.
func (c *Context) AfterFunc(d time.Duration, fn func()) *Timer {
	return c.RegisterTimer(d, 0, fn)
}

// RegisterTimer runs fn in a turn of this activation after due and then
// every period (period 0 means once). Ticks arrive as mailbox messages, so
// fn runs between requests, never concurrently with them. The next tick is
// armed only after fn returns, so slow ticks never pile up. Timers die with
// the activation and do not count as activity for idle collection.
func (c *Context) RegisterTimer(due, period time.Duration, fn func()) *Timer {
	a := c.a
	t := &Timer{a: a, period: period, fn: fn}
	if a.timers == nil {
		a.timers = make(map[*Timer]struct{})
	}
	a.timers[t] = struct{}{}
	t.arm(due)
	return t
}

// Timer is a grain timer.
type Timer struct {
	a      *activation
	period time.Duration
	fn     func()

	mu      sync.Mutex
	pending clock.Timer
	stopped bool
}

func (t *Timer) arm(d time.Duration) {
	t.a.host.stats.timersArmed.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.pending = t.a.host.clock.AfterFunc(d, func() { t.a.post(turnFunc(t.fire)) })
}

// fire runs inside a turn.
func (t *Timer) fire() {
	t.mu.Lock()
	stopped := t.stopped
	t.mu.Unlock()
	if stopped {
		return
	}
	if t.period <= 0 {
		t.stop()
		delete(t.a.timers, t)
	}
	t.fn()
	if t.period > 0 {
		t.arm(t.period)
	}
}

// Stop cancels the timer. A tick already queued in the mailbox is dropped.
// Call it from a turn of the activation that registered the timer.
func (t *Timer) Stop() {
	t.stop()
	delete(t.a.timers, t)
}

func (t *Timer) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	if t.pending != nil {
		t.pending.Stop()
	}
}

// Deferred is a reply a grain keeps to answer later.
type Deferred struct {
	a        *activation
	req      *Request        // until answered; then recycled
	ctx      context.Context // the caller's cancellable context, or nil
	deadline time.Time

	mu       sync.Mutex
	answered bool
	stopWait func() bool
}

// Context returns the call's context: it is cancelled when the caller
// cancels. It never has a deadline; see Deadline for the budget.
func (d *Deferred) Context() context.Context {
	if d.ctx == nil {
		return context.Background()
	}
	return d.ctx
}

// Deadline returns when the call's budget runs out (see actor.Deadline; a
// method that defers without having asked fixes it at Defer). ok is false
// when the call has no budget.
func (d *Deferred) Deadline() (deadline time.Time, ok bool) {
	return d.deadline, !d.deadline.IsZero()
}

// Cancellable reports whether the caller can cancel the call.
func (d *Deferred) Cancellable() bool { return d.ctx != nil }

// OnCancel runs fn in a turn of the activation when the caller cancels the
// call, unless the reply was sent first. Callers that cannot cancel never
// trigger it, and it sets up nothing for them.
func (d *Deferred) OnCancel(fn func()) {
	if d.ctx == nil {
		return
	}
	a := d.a
	stop := context.AfterFunc(d.ctx, func() {
		a.post(turnFunc(func() {
			if !d.Answered() {
				fn()
			}
		}))
	})
	d.mu.Lock()
	d.stopWait = stop
	d.mu.Unlock()
}

// Answered reports whether Reply was called.
func (d *Deferred) Answered() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.answered
}

// Reply sends the reply. Only the first call has an effect; it reports
// whether this call sent it. Safe from any goroutine.
func (d *Deferred) Reply(reply proto.Message, err error) bool {
	d.mu.Lock()
	if d.answered {
		d.mu.Unlock()
		return false
	}
	d.answered = true
	stop := d.stopWait
	req := d.req
	d.req = nil
	d.mu.Unlock()
	if stop != nil {
		stop()
	}
	a := d.a
	a.pendingMu.Lock()
	delete(a.pending, d)
	a.pendingMu.Unlock()
	req.Reply.Reply(req, reply, err)
	req.release()
	return true
}
