package host

import (
	"context"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/delivery"
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

// The request types are the call layer's too, which must not import the
// host (a client links the call layer and no activation host): they live
// in package delivery, and the host names them as its own.
type (
	// Replier receives the outcome of a request.
	Replier = delivery.Replier
	// Request is one grain call delivered to an activation.
	Request = delivery.Request
	// Caller is who sends requests.
	Caller = delivery.Caller
)

// NewRequest returns an empty Request that the host recycles once it has
// been answered.
func NewRequest() *Request { return delivery.NewRequest() }

// NewCaller returns the Caller of requests made by id.
func NewCaller(id actor.Identity) *Caller { return delivery.NewCaller(id) }

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
			return c.caller.Value(key)
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
