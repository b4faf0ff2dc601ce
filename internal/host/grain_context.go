package host

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/grainrt"
	"github.com/granary-go/granary/proxy"
)

// contextRuntime is what an actor.Context calls, as the host implements it
// (grainContext); a deferred is what an actor.Deferred calls, a timer what
// an actor.Timer calls.
type contextRuntime = grainrt.Context[actor.GrainID, *actor.Deferred, *actor.Timer]

var (
	_ contextRuntime   = (*grainContext)(nil)
	_ grainrt.Deferred = (*deferred)(nil)
	_ grainrt.Timer    = (*timer)(nil)
)

// grainContext is what an actor.Context of an activation calls: the
// runtime behind the grain's handle on its activation. actor.Context
// documents each method.
type grainContext struct {
	pub actor.Context // the grain's handle
	a   *activation
}

// newGrainContext returns the grain's handle on a: one object, which is
// also what the handle calls.
func newGrainContext(a *activation) *actor.Context {
	c := &grainContext{a: a}
	grainrt.Bind[contextRuntime](&c.pub, c)
	return &c.pub
}

// CallerOf returns the caller of the owner of the host running the
// activation whose handle c is (silo.CallerOf): nil when c is not an
// activation's or its host has no owner.
func CallerOf(c *actor.Context) proxy.Caller {
	gc, ok := grainrt.RuntimeOf[contextRuntime](c).(*grainContext)
	if !ok || gc.a.host.owner == nil {
		return nil
	}
	return gc.a.host.owner.Caller()
}

func (c *grainContext) ID() actor.GrainID { return c.a.id }

func (c *grainContext) Now() time.Time { return c.a.host.clock.Now() }

func (c *grainContext) MarkDirty() {
	if c.a.record != nil {
		c.a.record.MarkDirty()
	}
}

func (c *grainContext) WriteState(ctx context.Context) error {
	if c.a.record == nil {
		return nil
	}
	return c.a.record.Flush(ctx)
}

func (c *grainContext) ClearState(ctx context.Context) error {
	if c.a.record == nil {
		return nil
	}
	return c.a.record.Clear(ctx)
}

func (c *grainContext) DeactivateOnIdle() { c.a.deactivate = true }

func (c *grainContext) CollectSoon() { c.a.collectSoon.Store(true) }

// ttlSetter is a StateRecord whose writes can carry a time to live
// (persistence.Record).
type ttlSetter interface {
	SetTTL(d time.Duration)
}

func (c *grainContext) SetStateTTL(d time.Duration) {
	if r, ok := c.a.record.(ttlSetter); ok {
		r.SetTTL(d)
	}
}

func (c *grainContext) Defer() (*actor.Deferred, error) {
	a := c.a
	if a.current == nil {
		return nil, actor.ErrNotInTurn
	}
	if a.deferredNow != nil {
		return &a.deferredNow.pub, nil
	}
	req := a.current
	d := &deferred{a: a, req: req, ctx: turnContext(req), cancellable: req.Ctx != nil, call: a.currentCall, start: a.callStart}
	grainrt.Bind[grainrt.Deferred](&d.pub, d)
	switch {
	case req.Budget > 0 && req.Turn != nil:
		d.deadline, _ = req.Turn.BudgetDeadline()
	case req.Timeout > 0:
		// The caller stops waiting then; a reply kept longer reaches nobody.
		d.deadline = a.host.clock.Now().Add(req.Timeout)
	default:
		d.deadline = a.host.clock.Now().Add(a.host.opts.MaxWait)
	}
	a.pendingMu.Lock()
	if a.pending == nil {
		a.pending = make(map[*deferred]struct{})
	}
	a.pending[d] = struct{}{}
	a.pendingMu.Unlock()
	a.deferredNow = d
	a.host.stats.deferred.Add(1)
	return &d.pub, nil
}

func (c *grainContext) RegisterTimer(due, period time.Duration, fn func()) *actor.Timer {
	a := c.a
	t := &timer{a: a, period: period, fn: fn}
	grainrt.Bind[grainrt.Timer](&t.pub, t)
	if a.timers == nil {
		a.timers = make(map[*timer]struct{})
	}
	a.timers[t] = struct{}{}
	t.arm(due)
	return &t.pub
}

// timer is what an actor.Timer calls.
type timer struct {
	pub    actor.Timer // the grain's handle
	a      *activation
	period time.Duration
	fn     func()

	mu      sync.Mutex
	pending clock.Timer
	stopped bool
}

func (t *timer) arm(d time.Duration) {
	t.a.host.stats.timersArmed.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.pending = t.a.host.clock.AfterFunc(d, func() { t.a.post(turnFunc(t.fire)) })
}

// fire runs inside a turn.
func (t *timer) fire() {
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

// Stop implements actor.Timer.Stop.
func (t *timer) Stop() {
	t.stop()
	delete(t.a.timers, t)
}

func (t *timer) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	if t.pending != nil {
		t.pending.Stop()
	}
}

// turnContext returns the context that runTurn gave the method of req,
// which is running: the callContext it made, or the context it used
// without making one.
func turnContext(req *Request) context.Context {
	if cc, ok := req.Turn.(*callContext); ok {
		return cc
	}
	if req.Caller != nil {
		return req.Caller
	}
	return context.Background()
}

// deferred is what an actor.Deferred calls: a reply a grain keeps to
// answer later. actor.Deferred documents each method.
type deferred struct {
	pub      actor.Deferred // the grain's handle
	a        *activation
	req      *Request        // until answered; then recycled
	ctx      context.Context // the method's context (Context)
	deadline time.Time
	call     *methodCalls // the method's counters
	start    time.Time    // when the method's turn began, when the host times calls

	mu          sync.Mutex
	answered    bool
	cancellable bool // the request has a context its caller cancels
	stopWait    func() bool
}

func (d *deferred) Context() context.Context { return d.ctx }

func (d *deferred) Deadline() (deadline time.Time, ok bool) {
	return d.deadline, !d.deadline.IsZero()
}

func (d *deferred) Cancellable() bool { return d.cancellable }

func (d *deferred) OnCancel(fn func()) {
	if !d.cancellable {
		return
	}
	// The request's own context, not the method's, which wraps it: a
	// context that has an AfterFunc method of its own (the call layer's)
	// is asked directly, not watched from a goroutine.
	var ctx context.Context
	d.mu.Lock()
	if d.req != nil { // not answered: a reply recycles the request
		ctx = d.req.Ctx
	}
	d.mu.Unlock()
	if ctx == nil {
		return
	}
	a := d.a
	stop := context.AfterFunc(ctx, func() {
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

func (d *deferred) Answered() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.answered
}

func (d *deferred) Reply(reply proto.Message, err error) bool {
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
	if d.call != nil { // nil only in tests that make a deferred by hand
		d.call.done(outcomeOf(err), d.start, a.host.clock)
	}
	req.Reply.Reply(req, reply, err)
	req.Release()
	return true
}
