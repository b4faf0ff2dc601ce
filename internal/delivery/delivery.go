// Package delivery holds what carries a grain call from a connection to
// an activation and its outcome back: the Request, the Replier that
// answers it and the Caller that says who sent it. The call layer
// (internal/rpc) builds requests and replies to them; the activation host
// (internal/host) runs them. Both import this package and neither imports
// the other's side, so that a client, which only makes calls, links no
// activation host.
package delivery

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/turn"
)

// Replier receives the outcome of a request. Reply is called exactly once
// per request, from the activation's turn or, for a deferred reply, from
// wherever the grain answers.
type Replier interface {
	// Reply sends req's outcome: reply, or err when it is not nil.
	Reply(req *Request, reply proto.Message, err error)
}

// Request is one grain call delivered to an activation.
//
// A Request from NewRequest belongs to the host once delivered: the host
// recycles it after its reply has been sent, so the deliverer must not
// touch it after delivering it. A Request built as a literal is never
// recycled.
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
	// Activating is set by the Replier whose ActivationLimiter admitted
	// the new activation this request creates, for its own bookkeeping.
	Activating bool
	// Caller is who made the call, as its connection's handshake proved
	// (actor.IdentityOf); nil when unknown.
	Caller *Caller
	// Metadata are the call's metadata, key and value pairs
	// (actor.MetadataOf); nil when it carries none.
	Metadata []string

	// The host's own, while it runs the request.

	// Turn is the method's context while its turn runs, when the call has
	// a budget, can be cancelled or carries metadata.
	Turn turn.Info
	// Next is the next request of a batch posted as one mailbox message.
	Next *Request

	pooled bool // from NewRequest: recycled once answered
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
func (req *Request) Release() {
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

// ActivationLimiter is implemented by a Replier that budgets the new
// activations its requests may create (a connection does): the host asks
// it before it creates one.
type ActivationLimiter interface {
	// AdmitActivation spends one unit of the budget for req's new
	// activation, or returns the proxy.ErrOverloaded error to answer req
	// with. It may mark req (Request.Activating) to learn, when req is
	// answered, that the activation's first call is over.
	AdmitActivation(req *Request) error
}

// SpendActivation spends one unit of the budget of new activations of the
// connection req came on, if its Replier keeps one, or returns the
// proxy.ErrOverloaded error to answer req with when none is left. The host
// asks before it creates an activation; a router asks before it sends a
// request for a grain it just placed on another silo, which cannot tell
// whose request it was.
func SpendActivation(req *Request) error {
	if lim, ok := req.Reply.(ActivationLimiter); ok {
		return lim.AdmitActivation(req)
	}
	return nil
}
