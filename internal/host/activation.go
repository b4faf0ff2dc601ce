package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
)

// Messages an activation's mailbox carries besides *Request.
type (
	activateMsg   struct{}
	deactivateMsg struct {
		reason string
		idle   bool // only deactivate if still idle when the turn runs
	}
	// registeredMsg carries the directory's answer when it came later
	// than the registration's own turn.
	registeredMsg struct {
		winner string
		err    error
	}
	// turnFunc runs a callback (a timer tick, a cancel notification, a
	// state flush) inside a turn.
	turnFunc func()
)

// activation is one live grain: a protoactor actor whose Receive is the
// turn loop. All fields except the atomics are touched only inside turns.
type activation struct {
	host  *Host
	kind  *Kind
	calls *kindCalls // the kind's call counters
	id    actor.GrainID
	gc    *actor.Context
	pid   *protoactor.PID

	core        core
	failure     error // why the activation failed, when it did
	barred      error // the host's admission refused the message being received
	refusing    bool  // the host's admission refused a message: it deactivates
	grain       any
	record      StateRecord
	current     *Request     // the request whose turn is running
	currentCall *methodCalls // its method's counters
	callStart   time.Time    // when its turn began, when the host times calls
	deferredNow *deferred    // set when the running method deferred its reply
	timers      map[*timer]struct{}

	// The one-byte fields sit together, beside the four-byte atomics, so
	// that an activation pads no word for any of them.

	deactivate bool // DeactivateOnIdle was called in this turn
	// unregistersOnClose: the deactivation left the final write to the
	// store's writers, and the record's close unregisters the grain once
	// that write has landed (deactivateNow, Host.unregisterLater).
	unregistersOnClose bool
	// asked is what a deactivation pass asked of this activation
	// (askedIdle, askedStop); the pass holds a slot for it until it leaves
	// the catalog or declines. Set by the pass holding the host's pass
	// token under the read lock, cleared under the write lock.
	asked uint8

	gone     atomic.Bool   // no more posts: the actor is stopping
	doing    atomic.Uint32 // what the latest turn runs: a method id, or one of the doing* values
	serving  atomic.Bool   // the core is active: the grain activated and has not deactivated
	claiming atomic.Bool   // the core claims the grain's registration (core.claims)
	touched  atomic.Bool   // a request ran since the collector last looked
	// collectSoon: the grain said its state is at rest (CollectSoon) and
	// no request has run since.
	collectSoon atomic.Bool
	lastActive  atomic.Int64 // unix nanos when the collector last saw activity

	pendingMu sync.Mutex
	pending   map[*deferred]struct{} // deferred replies not yet answered

	mb mailbox // the actor's protoactor mailbox; see postInline

	sameKey *activation // the next activation under the same key in the host's catalog; guarded by the host's lock
}

// post enqueues a message unless the actor is already stopping.
func (a *activation) post(msg any) bool {
	if a.gone.Load() {
		return false
	}
	a.host.system.Root.Send(a.pid, msg)
	return true
}

// postInline enqueues msg straight into the activation's mailbox. When the
// mailbox was idle, so that posting made it runnable, it returns the
// mailbox's processing for the caller to run on its own goroutine instead
// of waking a worker: the turn still runs inside the mailbox (one at a
// time, in mailbox order), it just skips the hand-off. It returns nil when
// the mailbox was already running: its runner will get to msg. The caller
// must not be a transport reader goroutine: running the returned function
// runs grain code. Only the host's catalog lookup calls it, under the
// catalog's lock, so it never posts to an activation that finish has
// removed.
func (a *activation) postInline(msg any) (run func()) {
	if a.mb.post(msg, false) {
		return a.mb.process
	}
	return nil
}

// idleFor reports how long the activation has been idle, as the collector
// sees it: requests only set a flag (no clock read on the request path), and
// the collector turns the flag into a time on its next pass, so idleness is
// measured from up to one collection quantum after the last request, never
// from before it.
func (a *activation) idleFor(now time.Time) time.Duration {
	if a.touched.Swap(false) {
		a.lastActive.Store(now.UnixNano())
		return 0
	}
	return now.Sub(time.Unix(0, a.lastActive.Load()))
}

// Receive is the activation's turn: protoactor calls it for one message at
// a time.
func (a *activation) Receive(c protoactor.Context) {
	// One question for the whole message: a batch of requests, a
	// callback, or the requests a registration releases.
	a.barred = a.admitted()
	switch msg := c.Message().(type) {
	case *Request:
		a.onBatch(msg)
	case turnFunc:
		if a.core.active() && a.barred == nil {
			a.doing.Store(doingCallback)
			// Timer ticks, OnCancel callbacks and state snapshots are grain
			// code too: a panic in them is contained like a method's.
			if err := a.safely(func() error { msg(); return nil }); err != nil {
				a.logPanic(err, 0)
				a.apply(a.core.deactivate("panic"))
				return
			}
			a.afterTurn()
		}
	case activateMsg:
		a.apply(a.core.start())
	case registeredMsg:
		a.noteRegistration(msg)
		a.apply(a.core.registered(msg.winner, msg.err))
	case deactivateMsg:
		// An activation not yet active keeps an ask to deactivate for
		// when it is, but not the collector's: it is not idle then.
		if !msg.idle || (a.core.active() && a.idleNow()) {
			a.apply(a.core.deactivate(msg.reason))
		} else {
			a.host.declined(a)
		}
	}
}

// admitted asks the host's admission whether grain code may run now; a
// refusal also has the grain deactivate, after the messages already in
// its mailbox, whose turns are refused the same way.
func (a *activation) admitted() error {
	admit := a.host.admit
	if admit == nil {
		return nil
	}
	err := admit()
	if err != nil && !a.refusing {
		a.refusing = true
		a.post(deactivateMsg{reason: "turns refused"})
	}
	return err
}

// onBatch runs a batch, a chain of requests for this grain, one turn
// each. Should a panic escape a turn (grain code's are contained, so this
// would be the runtime's own), the requests after it go back to the front
// of the mailbox, for the actor to run once protoactor has restarted it,
// instead of unwinding with the panic.
func (a *activation) onBatch(first *Request) {
	var rest *Request
	defer func() {
		if rest != nil {
			a.mb.pushFront(rest)
		}
	}()
	for req := first; req != nil; {
		rest = req.Next
		req.Next = nil
		a.do(a.core.request(req))
		req = rest
	}
}

// apply carries out a step's effects in order. Registering and activating
// end their steps, and when their outcome is known at once the core's next
// step follows in the same turn.
func (a *activation) apply(effects []effect) {
	defer a.publishState()
	for len(effects) > 0 {
		a.publishState()
		var next []effect
		for _, e := range effects {
			switch e.kind {
			case effRegister:
				if r := a.register(); r != nil {
					next = a.core.registered(r.winner, r.err)
				}
			case effActivate:
				if a.barred != nil {
					// No state load and no OnActivate while the host's
					// admission refuses: the activation fails with it.
					a.failure = a.barred
					next = a.core.activated(a.barred)
				} else {
					next = a.core.activated(a.activate())
				}
			case effAsked:
				next = a.core.deactivateAsked()
			default:
				a.do(e)
			}
		}
		effects = next
	}
}

// publishState makes the core's state visible outside turns: to IsActive
// and Active (serving), and to Registered (claiming).
func (a *activation) publishState() {
	a.serving.Store(a.core.active())
	a.claiming.Store(a.core.claims())
}

// do carries out one effect other than registering and activating.
func (a *activation) do(e effect) {
	h := a.host
	switch e.kind {
	case 0: // the request waits in the core's queue
	case effRun:
		if !a.core.active() {
			// A request drained from the queue after an earlier turn of the
			// same step deactivated the grain: it goes where the core now
			// sends requests.
			a.do(a.core.request(e.req))
			return
		}
		a.runTurn(e.req)
	case effForward:
		h.forward(e.req, e.silo)
	case effReroute:
		h.route(e.req)
	case effFail:
		e.req.Reply.Reply(e.req, nil, a.failure)
		e.req.Release()
	case effDeactivate:
		a.deactivateNow()
	case effUnregister:
		if !a.unregistersOnClose {
			h.locator.Unregister(a.id)
		}
	case effFinish:
		a.finish()
	}
}

// register asks the directory to register the activation. It returns the
// answer when the directory gave it before Register returned; otherwise
// the answer arrives later as a registeredMsg.
func (a *activation) register() *registeredMsg {
	r := &registration{a: a}
	a.host.locator.Register(a.id, r.done)
	if r.state.CompareAndSwap(registrationWaiting, registrationLate) {
		return nil
	}
	msg := &registeredMsg{winner: r.winner, err: r.err}
	a.noteRegistration(*msg)
	return msg
}

// registration takes the directory's answer to one activation's Register:
// in the turn that asked when it comes at once, else through the mailbox.
type registration struct {
	a      *activation
	state  atomic.Int32
	winner string
	err    error
}

const (
	registrationWaiting  = iota // the asking turn has not yet looked
	registrationAnswered        // answered before the asking turn looked
	registrationLate            // the asking turn looked first: the answer is posted
)

func (r *registration) done(winner string, err error) {
	r.winner, r.err = winner, err
	if r.state.CompareAndSwap(registrationWaiting, registrationAnswered) {
		return
	}
	r.a.post(registeredMsg{winner: winner, err: err})
}

// noteRegistration keeps a failed registration's error for the requests
// that waited for it.
func (a *activation) noteRegistration(r registeredMsg) {
	if r.err != nil {
		a.failure = fmt.Errorf("%w: %s: register: %w", actor.ErrUnavailable, a.id, r.err)
	}
}

func (a *activation) idleNow() bool {
	if a.touched.Load() || !a.collectible(a.host.clock.Now()) {
		return false
	}
	a.pendingMu.Lock()
	defer a.pendingMu.Unlock()
	return len(a.pending) == 0
}

// collectible reports whether the collector may deactivate the activation
// now: idle for its collection age, or, when its grain said its state is
// at rest, not touched since the collector last looked.
func (a *activation) collectible(now time.Time) bool {
	idle := a.idleFor(now)
	return idle >= a.collectionAge() || (a.collectSoon.Load() && idle > 0)
}

// collectionAge is how long the activation may stay idle: its kind's
// collection age, or the host's.
func (a *activation) collectionAge() time.Duration {
	if a.kind.CollectionAge > 0 {
		return a.kind.CollectionAge
	}
	return a.host.opts.CollectionAge
}

// activate loads the grain's state and runs OnActivate. It returns the
// failure, which the requests waiting for the activation receive.
func (a *activation) activate() error {
	a.doing.Store(doingActivate)
	h := a.host
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.ActivationTimeout)
	defer cancel()
	err := a.safely(func() error {
		a.grain = a.kind.New(a.id)
		if h.store != nil {
			if st, ok := a.grain.(actor.Stateful); ok {
				rec, data, err := h.store.OpenState(ctx, a.id, a.schedule, st.SaveState)
				if err != nil {
					return fmt.Errorf("load state: %w", err)
				}
				a.record = rec
				if n, ok := rec.(conflictNotifier); ok {
					n.OnConflict(a.onStateConflict)
				}
				if data != nil {
					if err := st.LoadState(data); err != nil {
						return fmt.Errorf("decode state: %w", err)
					}
				}
			}
		}
		if act, ok := a.grain.(actor.Activator); ok {
			return act.OnActivate(ctx, a.gc)
		}
		return nil
	})
	if err == nil {
		return nil
	}
	h.stats.activationFailures.Add(1)
	h.log.Warn("activation failed", slog.String("grain", a.id.String()), slog.Any("err", err))
	a.failure = fmt.Errorf("%w: %s: %w", actor.ErrActivation, a.id, err)
	if a.record != nil {
		// A half-built grain's SaveState may panic: contained, it must
		// not keep the failed activation from leaving the catalog.
		if cerr := a.safely(func() error { return a.record.Close(ctx) }); cerr != nil {
			h.log.Warn("closing the state of a failed activation", slog.String("grain", a.id.String()), slog.Any("err", cerr))
		}
	}
	return a.failure
}

// queuedCloser is a StateRecord that can close by taking its final
// snapshot in the turn and leaving the write to its store's writers
// (persistence.Record.CloseQueued).
type queuedCloser interface {
	CloseQueued(closed func()) error
}

// conflictNotifier is a StateRecord that tells of background write
// conflicts (persistence.Record does).
type conflictNotifier interface {
	OnConflict(fn func(error))
}

// onStateConflict is told, on the state store's goroutine, that a
// background write of the grain's state conflicted: someone else wrote
// the state since this activation read it, so what it holds is stale. As
// in Orleans, the activation deactivates; the next call activates the
// grain again with the stored state. Changes it made since its last
// successful write are lost, which is what the conflict means.
func (a *activation) onStateConflict(err error) {
	a.host.log.Warn("grain state write conflicted: deactivating to reload", slog.String("grain", a.id.String()), slog.Any("err", err))
	a.post(deactivateMsg{reason: "stale state"})
}

// schedule is handed to persistence: it runs fn in a later turn.
func (a *activation) schedule(fn func()) bool { return a.post(turnFunc(fn)) }

// runTurn runs one request's method in the current turn.
func (a *activation) runTurn(req *Request) {
	h := a.host
	mc := a.calls.method(req.MethodID)
	if req.Ctx != nil && req.Ctx.Err() != nil {
		// The caller cancelled while this request waited in the mailbox:
		// it is dropped without running.
		h.stats.skippedCancelled.Add(1)
		mc.counts[OutcomeCancelled].Add(1)
		req.Reply.Reply(req, nil, req.Ctx.Err())
		req.Release()
		return
	}
	if err := a.barred; err != nil {
		mc.counts[OutcomeError].Add(1)
		req.Reply.Reply(req, nil, err)
		req.Release()
		return
	}
	if !a.touched.Load() { // a load is cheaper than a store, which fences
		a.touched.Store(true)
	}
	if a.collectSoon.Load() {
		a.collectSoon.Store(false)
	}
	a.doing.Store(req.MethodID) // so that a stop held up by this turn can name it

	var ctx context.Context = context.Background()
	switch {
	case req.Ctx != nil || req.Budget > 0 || req.Metadata != nil:
		// One small object, no timer: the budget is data. It is not part
		// of the request, which is recycled, because the grain may keep
		// its ctx.
		cc := &callContext{Context: context.Background(), budget: req.Budget, act: a, caller: req.Caller}
		if req.Ctx != nil {
			cc.Context = req.Ctx
		}
		if req.Metadata != nil {
			cc.Context = &metadataContext{Context: cc.Context, metadata: req.Metadata}
		}
		req.Turn = cc
		ctx = cc
	case req.Caller != nil:
		ctx = req.Caller // shared by the connection's calls: nothing to allocate
	}

	start := mc.start(h.clock)
	a.current, a.currentCall, a.callStart = req, mc, start
	a.deferredNow = nil
	h.stats.invocations.Add(1)
	reply, err := a.dispatch(ctx, req)
	deferred := a.deferredNow
	a.current, a.currentCall, a.deferredNow = nil, nil, nil

	switch {
	case err != nil && isPanic(err):
		a.logPanic(err, req.MethodID)
		if deferred != nil {
			deferred.Reply(nil, err) // counts the call
		} else {
			mc.done(OutcomePanic, start, h.clock)
			req.Reply.Reply(req, nil, err)
			req.Release()
		}
		a.apply(a.core.deactivate("panic"))
		return
	case deferred != nil:
		// The grain answers later through the Deferred, which counts the
		// call and releases the request then.
	default:
		mc.done(outcomeOf(err), start, h.clock)
		req.Reply.Reply(req, reply, err)
		req.Release()
	}
	a.afterTurn()
}

// What an activation's turn runs when it is not a method, for naming a
// turn that holds up a stop. Method ids are hashes, so these collide with
// one only by a chance in four billion, and then name the wrong thing.
const (
	doingNothing    uint32 = 0
	doingActivate   uint32 = 0xffff_fff0 + iota
	doingDeactivate        // OnDeactivate and the final flush
	doingCallback          // a timer, an OnCancel callback or a state snapshot
)

// doingName names what the activation's latest turn runs.
func (a *activation) doingName() string {
	switch d := a.doing.Load(); d {
	case doingNothing:
		return "nothing yet"
	case doingActivate:
		return "OnActivate"
	case doingDeactivate:
		return "OnDeactivate"
	case doingCallback:
		return "a timer or callback"
	default:
		if n, ok := a.kind.Dispatcher.(interface{ MethodName(uint32) string }); ok {
			if name := n.MethodName(d); name != "" {
				return name
			}
		}
		return fmt.Sprintf("method %#x", d)
	}
}

// logPanic counts and logs a panic of grain code; method is 0 outside a
// request turn.
func (a *activation) logPanic(err error, method uint32) {
	a.host.stats.panics.Add(1)
	var panicked *panicError
	if errors.As(err, &panicked) {
		a.host.log.Error("grain code panicked", slog.String("grain", a.id.String()),
			slog.Uint64("method", uint64(method)), slog.Any("panic", panicked.value), slog.String("stack", panicked.stack))
	}
}

// afterTurn runs what a turn asked for once it ends.
func (a *activation) afterTurn() {
	if a.deactivate {
		a.deactivate = false
		a.apply(a.core.deactivate("requested by grain"))
	}
}

// deactivateNow runs the deactivation sequence inside the current turn:
// timers stop, deferred replies still open fail, OnDeactivate runs and the
// state is flushed. The core then unregisters and finishes.
func (a *activation) deactivateNow() {
	a.doing.Store(doingDeactivate)
	h := a.host
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.DeactivationTimeout)
	defer cancel()
	for t := range a.timers {
		t.stop()
	}
	a.timers = nil
	a.pendingMu.Lock()
	pending := a.pending
	a.pending = nil
	a.pendingMu.Unlock()
	for d := range pending {
		// A Replier is runtime code, but a panic here would abort the
		// deactivation halfway, with the grain gone from nowhere.
		if err := a.safely(func() error { d.Reply(nil, actor.ErrDeactivated); return nil }); err != nil {
			a.logPanic(err, 0)
		}
	}
	if d, ok := a.grain.(actor.Deactivator); ok {
		if err := a.safely(func() error { return d.OnDeactivate(ctx, a.gc) }); err != nil {
			h.log.Warn("OnDeactivate failed", slog.String("grain", a.id.String()), slog.Any("err", err))
		}
	}
	if a.record != nil {
		// Close snapshots the state through the grain's SaveState, which may
		// panic; the activation must still finish. While the host stops,
		// the write is left to the store's writers when it can be, and
		// the flusher reports what it could not write.
		closeRecord := a.record.Close
		var unregister func()
		if q, ok := a.record.(queuedCloser); ok && h.draining.Load() {
			// The entry must outlive the queued write: once the directory
			// forgets the grain, its next activation elsewhere loads the
			// state, and a write landing after that load fails that
			// activation's first write on the ETag, losing what it
			// acknowledged. So the activation unregisters when the record
			// closes, not as its deactivation ends. (A stopping host takes
			// no new activation, so no later one of this grain here can be
			// unregistered by it.)
			unregister = h.unregisterLater(a.id)
			a.unregistersOnClose = true
			closeRecord = func(context.Context) error { return q.CloseQueued(unregister) }
		}
		if err := a.safely(func() error { return closeRecord(ctx) }); err != nil {
			h.log.Warn("final state flush failed", slog.String("grain", a.id.String()), slog.Any("err", err))
			if unregister != nil {
				unregister() // nothing more will be written
			}
		}
	}
	h.stats.deactivations.Add(1)
	h.log.Debug("deactivated", slog.String("grain", a.id.String()), slog.String("reason", a.core.reason))
}

// finish removes the activation from the catalog and stops its actor after
// every message already in its mailbox: the core sends those where the
// grain now lives, since nothing new can reach a removed activation.
func (a *activation) finish() {
	a.host.remove(a)
	a.gone.Store(true)
	a.host.system.Root.Poison(a.pid)
}

// isPanic reports whether err is a contained panic. It is a function of its
// own so that the target errors.As needs escapes only on this path, not on
// every turn.
func isPanic(err error) bool {
	var panicked *panicError
	return errors.As(err, &panicked)
}

type panicError struct {
	value any
	stack string
}

// newPanicError records a recovered panic with the stack of the goroutine
// that panicked; call it from the deferred function that recovered.
func newPanicError(r any) error { return &panicError{value: r, stack: string(debug.Stack())} }

func (p *panicError) Error() string { return fmt.Sprintf("%v: %v", actor.ErrPanic, p.value) }
func (p *panicError) Unwrap() error { return actor.ErrPanic }

// dispatch runs req's method, turning a panic into an error as safely
// does; it is safely without the closure, for the path every call takes.
func (a *activation) dispatch(ctx context.Context, req *Request) (reply proto.Message, err error) {
	defer func() {
		if r := recover(); r != nil {
			reply, err = nil, newPanicError(r)
		}
	}()
	return a.kind.Dispatcher.Dispatch(ctx, a.grain, req.MethodID, req.Payload)
}

// safely runs grain code, turning a panic into an error.
func (a *activation) safely(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = newPanicError(r)
		}
	}()
	return fn()
}
