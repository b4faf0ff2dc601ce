package proxy

import (
	"context"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/turn"
)

// A bounded method receives budgetNumerator/budgetDenominator (80%) of the
// response timeout as its budget, leaving the rest for the reply's trip back.
const (
	budgetNumerator   = 4
	budgetDenominator = 5
)

// Call is one outgoing grain call as the reference resolved it.
type Call struct {
	// Target is the grain being called.
	Target actor.GrainID
	// Method describes the method being called.
	Method *MethodDesc
	// Timeout is the response timeout for this call: the per-call option,
	// else the caller's default.
	Timeout time.Duration
	// Budget is the time the server may spend on a bounded method, measured
	// from when the method starts; zero for unbounded methods. Through
	// outgoing filters it is zero until they have run and is then resolved
	// from the timeout and context that reach the caller; a filter may set
	// it to shorten the budget further.
	Budget time.Duration
	// Cancellable reports whether the caller's context can be cancelled;
	// when false no cancellation machinery is set up on either side.
	Cancellable bool
	// PlacementHint names the silo that should host a new activation.
	PlacementHint string
}

// Caller sends grain calls. The cluster client and the silo's own caller
// implement it; generated references are built on one.
type Caller interface {
	// Call sends call with the encoded in message and decodes the reply
	// into out. It returns ctx.Err() at once when ctx is cancelled (without
	// sending anything when it already was), a
	// *TimeoutError when no reply arrives within call.Timeout, and the
	// grain's or the runtime's error otherwise.
	Call(ctx context.Context, call Call, in, out proto.Message) error
	// ResponseTimeout is the default response timeout of calls made
	// through this caller.
	ResponseTimeout() time.Duration
}

// Invoker continues an outgoing call; filters receive the next step as one.
type Invoker func(ctx context.Context, call Call, in, out proto.Message) error

// OutgoingFilter intercepts calls leaving a caller. It must call next to
// send the call, or return without sending it. The context it passes to
// next is the call's from then on: whether the call can be cancelled, and
// a bounded method's budget, follow that context, so a filter may add a
// deadline or a cancellation of its own.
type OutgoingFilter func(ctx context.Context, call Call, in, out proto.Message, next Invoker) error

// outgoingFilterer is implemented by callers that carry outgoing filters.
type outgoingFilterer interface {
	OutgoingFilters() []OutgoingFilter
}

// CallOption changes one call. Options are plain values, so passing them
// allocates nothing.
type CallOption struct {
	timeout time.Duration
	hint    string
}

// WithTimeout sets the response timeout of one call, overriding the
// caller's default. It also shapes the budget of a bounded method.
func WithTimeout(d time.Duration) CallOption { return CallOption{timeout: d} }

// WithPlacementHint asks that a new activation of the target be placed on
// the named silo when that silo is live. It has no effect on an active grain.
func WithPlacementHint(silo string) CallOption { return CallOption{hint: silo} }

// Ref is the untyped grain reference that generated references wrap. It is
// a small value: copying it is cheap and safe.
type Ref struct {
	caller   Caller
	timeout  time.Duration // the caller's response timeout, resolved once
	id       actor.GrainID
	filtered Invoker // the caller's outgoing filters chained before its Call; nil when it has none
}

// GrainID returns the identity of the referenced grain.
func (r Ref) GrainID() actor.GrainID { return r.id }

// Caller returns the caller the reference sends through.
func (r Ref) Caller() Caller { return r.caller }

// Invoke calls method m on the referenced grain. Generated methods call it;
// it resolves the response timeout and, for bounded methods, the budget:
// min(80% of the response timeout, the time left before ctx's deadline),
// from the timeout and context that reach the caller once any outgoing
// filters have run. A context whose deadline has already passed fails with
// ErrBudgetExpired before anything is sent.
func (r Ref) Invoke(ctx context.Context, m *MethodDesc, in, out proto.Message, opts ...CallOption) error {
	call := Call{Target: r.id, Method: m, Cancellable: ctx.Done() != nil}
	for _, o := range opts {
		if o.timeout > 0 {
			call.Timeout = o.timeout
		}
		if o.hint != "" {
			call.PlacementHint = o.hint
		}
	}
	if call.Timeout <= 0 {
		call.Timeout = r.timeout
	}
	if r.filtered != nil {
		// The budget is resolved once the filters have run (afterFilters),
		// from the timeout and the context that reach the caller.
		return r.filtered(ctx, call, in, out)
	}
	// The direct path when nobody filters.
	if err := resolveBudget(ctx, &call); err != nil {
		return err
	}
	return r.caller.Call(ctx, call, in, out)
}

// callBudget computes the budget of a bounded call: 80% of timeout, or the time
// left before ctx's deadline when that is shorter, or, for a call a grain
// makes with its method's context, the time left of that method's own
// budget when that is shorter still. It fails with ErrBudgetExpired when
// the deadline or the calling method's budget has already passed.
func callBudget(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	var budget time.Duration
	switch {
	case timeout <= 0:
	case timeout <= math.MaxInt64/budgetNumerator:
		// Multiplying first keeps tiny timeouts from rounding to no
		// budget, which the callee would read as an unbounded call.
		budget = max(timeout*budgetNumerator/budgetDenominator, 1)
	default:
		budget = timeout / budgetDenominator * budgetNumerator
	}
	if deadline, ok := ctx.Deadline(); ok {
		left := time.Until(deadline)
		if left <= 0 {
			return 0, fmt.Errorf("%w: deadline passed %v ago", ErrBudgetExpired, -left)
		}
		if left < budget {
			budget = left
		}
	}
	if left, ok := callerBudget(ctx); ok {
		if left <= 0 {
			return 0, fmt.Errorf("%w: the calling grain's budget ran out %v ago", ErrBudgetExpired, -left)
		}
		if left < budget {
			budget = left
		}
	}
	return budget, nil
}

// callerBudget returns what is left of the budget of the grain method
// whose context ctx is, if any: a call it makes inherits it.
func callerBudget(ctx context.Context) (time.Duration, bool) {
	if info := turn.Of(ctx); info != nil {
		return info.TimeLeft()
	}
	return 0, false
}

// afterFilters is the last step of a filtered call, before c sends it. A
// filter may pass on a context of its own (one with a deadline, or one
// detached from the caller's) or change the call's timeout, so what depends
// on them is derived from the context and timeout that reach the caller:
// whether the call can be cancelled, and for a bounded method its budget.
// A budget a filter set lower is kept; a context whose deadline has passed
// fails with ErrBudgetExpired before anything is sent.
func afterFilters(c Caller) Invoker {
	return func(ctx context.Context, call Call, in, out proto.Message) error {
		call.Cancellable = ctx.Done() != nil
		if err := resolveBudget(ctx, &call); err != nil {
			return err
		}
		return c.Call(ctx, call, in, out)
	}
}

// resolveBudget sets a bounded call's budget from ctx and call.Timeout
// (see callBudget), keeping a lower one a filter already set. A call that a
// grain method makes with its context while it has a budget also waits no
// longer than that budget: the method's own caller will not wait for it.
func resolveBudget(ctx context.Context, call *Call) error {
	left, inherited := callerBudget(ctx)
	if call.Method.Bounded {
		budget, err := callBudget(ctx, call.Timeout)
		if err != nil {
			return err
		}
		if call.Budget <= 0 || budget < call.Budget {
			call.Budget = budget
		}
	} else if inherited && left <= 0 {
		return fmt.Errorf("%w: the calling grain's budget ran out %v ago", ErrBudgetExpired, -left)
	}
	if inherited && call.Timeout > left {
		call.Timeout = left
	}
	return nil
}

func chainOutgoing(filters []OutgoingFilter, last Invoker) Invoker {
	next := last
	for i := len(filters) - 1; i >= 0; i-- {
		f, n := filters[i], next
		next = func(ctx context.Context, call Call, in, out proto.Message) error {
			return f(ctx, call, in, out, n)
		}
	}
	return next
}

// DefaultResponseTimeout is the response timeout of callers that do not set
// one, as in Orleans.
const DefaultResponseTimeout = 30 * time.Second
