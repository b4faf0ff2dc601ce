package actor

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/internal/grainrt"
)

// What a Context, a Deferred and a Timer call: the activation host
// implements these, and binds each handle to them when it builds it
// (package grainrt says how, without an exported name).
type (
	contextRuntime = grainrt.Context[GrainID, *Deferred, *Timer]
	contextHandle  = grainrt.Handle[contextRuntime]
	deferredHandle = grainrt.Handle[grainrt.Deferred]
	timerHandle    = grainrt.Handle[grainrt.Timer]
)

// Context is a grain's handle on its activation: identity, state, timers
// and deferred replies. The runtime passes it to OnActivate; a grain may
// keep it for the life of the activation, and calls other grains through
// the caller the silo running it gives for it (silo.CallerOf). Its methods
// must be called from inside the activation's turns unless they say
// otherwise.
type Context struct {
	contextHandle
}

// rt returns what c calls.
func (c *Context) rt() contextRuntime { return grainrt.Runtime(&c.contextHandle) }

// ID returns the grain's identity. Safe from any goroutine.
func (c *Context) ID() GrainID { return c.rt().ID() }

// Now returns the host clock's current time. Safe from any goroutine.
func (c *Context) Now() time.Time { return c.rt().Now() }

// MarkDirty records that the grain's state changed, so the next periodic
// flush writes it. It costs an atomic store.
func (c *Context) MarkDirty() { c.rt().MarkDirty() }

// WriteState writes the grain's state now, inside the current turn.
func (c *Context) WriteState(ctx context.Context) error { return c.rt().WriteState(ctx) }

// ClearState deletes the grain's stored state.
func (c *Context) ClearState(ctx context.Context) error { return c.rt().ClearState(ctx) }

// DeactivateOnIdle deactivates the activation as soon as the current turn
// ends. The next call activates the grain again.
func (c *Context) DeactivateOnIdle() { c.rt().DeactivateOnIdle() }

// CollectSoon says that the grain's state is back where a fresh activation
// would start it (a rate limiter at full quota with nothing waiting), so
// the activation is worth nothing while idle: the host's collector
// deactivates it at its next pass if no call has run since, instead of
// waiting for the collection age. A call that runs afterwards withdraws
// it; the grain calls it again once its state is at rest again.
func (c *Context) CollectSoon() { c.rt().CollectSoon() }

// SetStateTTL says that the grain's stored state is worthless once d has
// passed since it was written: a store that can expire records
// (persistence/redisstore) then drops it by itself, so that a grain that
// is never activated again leaves nothing behind. It applies to every
// write from then on; 0, the default, keeps the state until it is
// cleared.
func (c *Context) SetStateTTL(d time.Duration) { c.rt().SetStateTTL(d) }

// Defer keeps the reply of the request whose turn is running, so the grain
// can answer it from a later turn (a release, a timer, a cancel). The method
// then returns (nil, nil) and its return values are ignored. Defer returns
// ErrNotInTurn outside a request turn.
func (c *Context) Defer() (*Deferred, error) { return c.rt().Defer() }

// AfterFunc runs fn in a turn of this activation once d has elapsed.
// The timer dies with the activation. It does not keep the grain active.
func (c *Context) AfterFunc(d time.Duration, fn func()) *Timer { return c.rt().RegisterTimer(d, 0, fn) }

// RegisterTimer runs fn in a turn of this activation after due and then
// every period (period 0 means once). Ticks arrive as mailbox messages, so
// fn runs between requests, never concurrently with them. The next tick is
// armed only after fn returns, so slow ticks never pile up. Timers die with
// the activation and do not count as activity for idle collection.
func (c *Context) RegisterTimer(due, period time.Duration, fn func()) *Timer {
	return c.rt().RegisterTimer(due, period, fn)
}

// Timer is a grain timer.
type Timer struct {
	timerHandle
}

// Stop cancels the timer. A tick already queued in the mailbox is dropped.
// Call it from a turn of the activation that registered the timer.
func (t *Timer) Stop() { grainrt.Runtime(&t.timerHandle).Stop() }

// Deferred is a reply a grain keeps to answer later.
type Deferred struct {
	deferredHandle
}

// rt returns what d calls.
func (d *Deferred) rt() grainrt.Deferred { return grainrt.Runtime(&d.deferredHandle) }

// Context returns the call's context: the context of the method that
// deferred, so it is cancelled when the caller cancels and tells the same
// as the method's did (IdentityOf, MetadataOf, Budget), to later turns
// that answer or make calls on the call's behalf, which inherit what is
// left of its budget. It never has a deadline; see Deadline for the
// budget.
func (d *Deferred) Context() context.Context { return d.rt().Context() }

// Deadline returns when the call's budget runs out (see actor.Deadline; a
// method that defers without having asked fixes it at Defer). A call with
// no budget still has a deadline: its caller's response timeout from
// Defer, past which nobody waits for the answer, or, when the caller sent
// none, the host's bound on waiting (30 s by default), so that no kept
// reply is held for ever. ok is false only outside an actor host.
func (d *Deferred) Deadline() (deadline time.Time, ok bool) { return d.rt().Deadline() }

// Cancellable reports whether the caller can cancel the call.
func (d *Deferred) Cancellable() bool { return d.rt().Cancellable() }

// OnCancel runs fn in a turn of the activation when the caller cancels the
// call, unless the reply was sent first. Callers that cannot cancel never
// trigger it, and it sets up nothing for them.
func (d *Deferred) OnCancel(fn func()) { d.rt().OnCancel(fn) }

// Answered reports whether Reply was called.
func (d *Deferred) Answered() bool { return d.rt().Answered() }

// Reply sends the reply. Only the first call has an effect; it reports
// whether this call sent it. Safe from any goroutine.
func (d *Deferred) Reply(reply proto.Message, err error) bool { return d.rt().Reply(reply, err) }
