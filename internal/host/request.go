package host

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/turn"
)

// Dispatcher decodes a request payload, calls the grain's method and
// returns its reply. Generated service descriptors provide one.
type Dispatcher interface {
	// Dispatch runs the method methodID of grain with the encoded request
	// payload.
	Dispatch(ctx context.Context, grain any, methodID uint32, payload []byte) (proto.Message, error)
}

// Kind is a registered grain type.
type Kind struct {
	// Type is the grain type name.
	Type string
	// New creates the grain value of a new activation.
	New func(id actor.GrainID) any
	// Dispatcher runs the grain's methods.
	Dispatcher Dispatcher
	// CollectionAge overrides the host's idle age for this type when > 0.
	CollectionAge time.Duration
}

// Replier receives the outcome of a request. Reply is called exactly once
// per request, from the activation's turn or, for a deferred reply, from
// wherever the grain answers.
type Replier interface {
	// Reply sends req's outcome: reply, or err when it is not nil.
	Reply(req *Request, reply proto.Message, err error)
}

// Request is one grain call delivered to an activation.
//
// A Request from NewRequest belongs to the Host once delivered: the host
// recycles it after its reply has been sent, so the deliverer must not
// touch it after Deliver. A Request built as a literal is never recycled.
type Request struct {
	// Target is the grain being called.
	Target actor.GrainID
	// CallID identifies the call to its Replier.
	CallID uint64
	// MethodID selects the method.
	MethodID uint32
	// Payload is the encoded request message.
	Payload []byte
	// Budget is the time a bounded method may take, measured from when the
	// method starts; zero means none.
	Budget time.Duration
	// Ctx is the call's cancellable context, or nil when the caller cannot
	// cancel (then no cancellation machinery exists for this call).
	Ctx context.Context
	// Reply receives the outcome.
	Reply Replier

	// What a silo that forwards the request passes on, end to end.

	// Hint names the silo that should host a new activation.
	Hint string
	// Timeout is the caller's response timeout; zero means none.
	Timeout time.Duration
	// Hops counts the silos that have forwarded the request so far.
	Hops uint32
	// FromSilo is set when the request came from a silo: this one's own
	// caller, or another over a link (as its handshake proved), never a
	// client. Only such a request may address the silo's system services.
	FromSilo bool
	// Registered is set by the Replier that registered the call in a
	// cancellation registry of its own, for its own bookkeeping.
	Registered bool
	// Waiting, when set, is called when the request's method is about to
	// wait for a call of its own: the deliverer that runs turns on a
	// goroutine shared with other grains hands its other work on.
	Waiting func()
	// Caller is who made the call, as its connection's handshake proved
	// (actor.IdentityOf); nil when unknown.
	Caller *Caller
	// Metadata are the call's metadata, key and value pairs
	// (actor.MetadataOf); nil when it carries none.
	Metadata []string

	cc     *callContext // the method's context while its turn runs, when it has a budget or can be cancelled
	next   *Request     // the next request of a batch posted as one mailbox message
	pooled bool         // from NewRequest: recycled once answered
}

var requestPool = sync.Pool{New: func() any { return &Request{pooled: true} }}

// NewRequest returns an empty Request that the host recycles once it has
// been answered. Requests arrive at a silo at the rate of calls, and
// recycling them takes a sixth of a call's allocated bytes off the garbage
// collector.
func NewRequest() *Request { return requestPool.Get().(*Request) }

// Release recycles req if it came from NewRequest. The host calls it once
// the reply has been handed to req.Reply; whoever answers a request
// instead of the host (a silo that forwarded it) calls it once it has
// answered. Nothing may refer to req afterwards. The method's context is a
// separate object, so a grain that kept its ctx keeps nothing of the
// request.
func (req *Request) Release() { req.release() }

func (req *Request) release() {
	if req.pooled {
		*req = Request{pooled: true}
		requestPool.Put(req)
	}
}

// Caller is who sends requests: one for each connection (and for each
// identity a relaying silo names), shared by all their requests. It is
// also the context of a method whose call has neither budget, nor
// cancellation, nor metadata, so telling a grain who calls allocates
// nothing per call.
type Caller struct {
	identity actor.Identity
}

var _ context.Context = (*Caller)(nil)

// NewCaller returns the Caller of requests made by id.
func NewCaller(id actor.Identity) *Caller { return &Caller{identity: id} }

// Identity returns who the caller is.
func (c *Caller) Identity() actor.Identity { return c.identity }

// Deadline implements context.Context: none.
func (c *Caller) Deadline() (time.Time, bool) { return time.Time{}, false }

// Done implements context.Context: never cancelled.
func (c *Caller) Done() <-chan struct{} { return nil }

// Err implements context.Context.
func (c *Caller) Err() error { return nil }

// Value implements context.Context: it answers actor.IdentityOf.
func (c *Caller) Value(key any) any {
	if key == (turn.CallerKey{}) {
		return &c.identity
	}
	return nil
}

// callContext is the context a grain method runs with when the call has a
// budget or can be cancelled. It never arms a timer: the budget is data,
// and only code that waits turns it into a deadline.
//
// The deadline is fixed the first time anything asks for it (Deadline or
// Context.Defer), not when the turn starts: reading the clock costs about
// 50 ns on the machines we measure, a few percent of a whole call, and a
// method that answers at once never needs it. A bounded method asks first
// thing when it is going to wait, so for it the deadline is its start plus
// the budget.
type callContext struct {
	context.Context
	budget   time.Duration
	act      *activation
	waiting  func()                    // the request's Waiting hook
	deadline atomic.Pointer[time.Time] // nil until asked for
	// The request's Caller. Its metadata, rarer, are in a context of
	// their own between this one and its parent (metadataContext): one
	// more field would move the object up a size class.
	caller *Caller
}

func (c *callContext) Value(key any) any {
	switch key {
	case turn.Key{}:
		return c
	case turn.CallerKey{}:
		if c.caller != nil {
			return &c.caller.identity
		}
		return nil
	}
	return c.Context.Value(key)
}

// metadataContext answers actor.MetadataOf for a call that carries
// metadata.
type metadataContext struct {
	context.Context
	metadata []string
}

func (c *metadataContext) Value(key any) any {
	if key == (turn.MetadataKey{}) {
		return c.metadata
	}
	return c.Context.Value(key)
}

// CallBudget implements turn.Info.
func (c *callContext) CallBudget() (time.Duration, bool) {
	if c.budget <= 0 {
		return 0, false
	}
	return c.budget, true
}

// BudgetDeadline implements turn.Info.
func (c *callContext) BudgetDeadline() (time.Time, bool) {
	if c.budget <= 0 {
		return time.Time{}, false
	}
	return c.deadlineNow(), true
}

// TimeLeft implements turn.Info.
func (c *callContext) TimeLeft() (time.Duration, bool) {
	if c.budget <= 0 {
		return 0, false
	}
	return c.deadlineNow().Sub(c.act.host.clock.Now()), true
}

// WillWait implements turn.Info.
func (c *callContext) WillWait() {
	if c.waiting != nil {
		c.waiting()
	}
}

// deadlineNow returns the call's deadline, fixing it on first use. It is
// safe from any goroutine, should the grain hand its context to one.
func (c *callContext) deadlineNow() time.Time {
	if d := c.deadline.Load(); d != nil {
		return *d
	}
	d := c.act.host.clock.Now().Add(c.budget)
	if c.deadline.CompareAndSwap(nil, &d) {
		return d
	}
	return *c.deadline.Load()
}
