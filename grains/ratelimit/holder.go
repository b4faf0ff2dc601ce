package ratelimit

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/grains/ratelimit/internal/contract"
	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

// Argument errors of acquisitions: the limiter's own, which the grains send
// as *proxy.Error values with codes of their own, so errors.Is finds them
// whichever way the call went (in process, over a gateway, or relayed from
// silo to silo) and matches limiter.ErrNegativeCount too.
var (
	// ErrNegativeCount is returned for a negative permit count, before
	// anything is sent.
	ErrNegativeCount = limiter.ErrNegativeCount
	// ErrCountExceedsLimit is returned by the grain for a count above the
	// limiter's limit, which could never be granted.
	ErrCountExceedsLimit = limiter.ErrCountExceedsLimit
)

// Limiter is what every holder offers, whatever its algorithm: the group
// holder and middleware work with it.
type Limiter interface {
	// GrainID returns the identity of the limiter grain.
	GrainID() actor.GrainID
	// Acquire takes permits; see Holder.Acquire.
	Acquire(ctx context.Context, permits int64) (*Lease, error)
	// AcquireAndConfigure takes permits under the holder's bound options.
	AcquireAndConfigure(ctx context.Context, permits int64) (*Lease, error)
	// TryAcquire takes permits only if they are free now; see
	// Holder.TryAcquire.
	TryAcquire(ctx context.Context, permits int64) (*Lease, error)
	// Statistics returns the grain's counters.
	Statistics(ctx context.Context) (Statistics, error)
	// Reset gives the limiter its full quota back, keeping its options.
	Reset(ctx context.Context) error
	// DeleteState clears the grain's stored state and options.
	DeleteState(ctx context.Context) error
	// TryReplenish runs one manual replenishment.
	TryReplenish(ctx context.Context) (bool, error)
}

// methodSet holds the methods of one limiter grain type.
type methodSet struct {
	acquire, acquireWith, tryAcquire, release    *proxy.MethodDesc
	statistics                                   *proxy.MethodDesc
	refund                                       *proxy.MethodDesc // nil for the concurrency limiter
	renew                                        *proxy.MethodDesc // nil for the time-based limiters
	configure, configuration, reset, deleteState *proxy.MethodDesc
	tryReplenish                                 *proxy.MethodDesc // nil for the concurrency limiter
	leaseQuota, returnQuota                      *proxy.MethodDesc // nil for the concurrency limiter
}

// methodsOf finds the methods of a generated service by name.
func methodsOf(svc *proxy.ServiceDesc) methodSet {
	named := func(name string) *proxy.MethodDesc {
		for i := range svc.Methods {
			if svc.Methods[i].Desc.Name == name {
				return svc.Methods[i].Desc
			}
		}
		return nil
	}
	return methodSet{
		acquire: named("Acquire"), acquireWith: named("AcquireAndCheckConfiguration"), tryAcquire: named("TryAcquire"), release: named("Release"), refund: named("Refund"), renew: named("Renew"),
		statistics: named("Statistics"), configure: named("Configure"), configuration: named("Configuration"),
		reset: named("Reset"), deleteState: named("DeleteState"), tryReplenish: named("TryReplenish"),
		leaseQuota: named("LeaseQuota"), returnQuota: named("ReturnQuota"),
	}
}

// kind is what a holder knows of its algorithm: the grain type, its
// methods, and its options on the wire.
type kind[O Options] struct {
	grainType string
	methods   methodSet
	toWire    func(O) proto.Message
	fromWire  func(proto.Message) (O, bool)
	// request is AcquireAndCheckConfiguration's request for permits under
	// options encoded by toWire (nil: the grain's current ones), refundable
	// or not.
	request func(permits int64, options proto.Message, refundable bool) proto.Message
	// tryOne is the request for one permit under the grain's current
	// options, shared by every TryAcquire of an unbound holder.
	tryOne proto.Message
	// plain is the request for permits under the grain's current options.
	plain func(permits int64) proto.Message
	// refunds says whether the grain type takes refunds (the time-based
	// ones).
	refunds bool
}

// newKind describes the algorithm served by svc, whose options O travel as
// P and whose AcquireAndCheckConfiguration takes R.
func newKind[O Options, P, R proto.Message](svc *proxy.ServiceDesc, toWire func(O) P, fromWire func(P) (O, bool), request func(int64, P, bool) R) *kind[O] {
	var none P // no options: the grain's current ones
	methods := methodsOf(svc)
	return &kind[O]{
		tryOne:    request(1, none, false),
		plain:     func(n int64) proto.Message { return request(n, none, false) },
		refunds:   methods.refund != nil,
		grainType: svc.Name,
		methods:   methods,
		toWire:    func(o O) proto.Message { return toWire(o) },
		fromWire:  func(m proto.Message) (O, bool) { return fromWire(m.(P)) },
		request: func(n int64, o proto.Message, refundable bool) proto.Message {
			p, _ := o.(P) // nil: no options
			return request(n, p, refundable)
		},
	}
}

var (
	concurrencyKind = newKind(pb.ConcurrencyLimiterService, contract.ConcurrencyToWire, contract.ConcurrencyFromWire,
		func(n int64, o *pb.ConcurrencyOptions, refundable bool) *pb.ConcurrencyAcquireRequest {
			return &pb.ConcurrencyAcquireRequest{Permits: n, Options: o, Refundable: refundable}
		})
	fixedWindowKind = newKind(pb.FixedWindowLimiterService, contract.FixedWindowToWire, contract.FixedWindowFromWire,
		func(n int64, o *pb.FixedWindowOptions, refundable bool) *pb.FixedWindowAcquireRequest {
			return &pb.FixedWindowAcquireRequest{Permits: n, Options: o, Refundable: refundable}
		})
	slidingWindowKind = newKind(pb.SlidingWindowLimiterService, contract.SlidingWindowToWire, contract.SlidingWindowFromWire,
		func(n int64, o *pb.SlidingWindowOptions, refundable bool) *pb.SlidingWindowAcquireRequest {
			return &pb.SlidingWindowAcquireRequest{Permits: n, Options: o, Refundable: refundable}
		})
	tokenBucketKind = newKind(pb.TokenBucketLimiterService, contract.TokenBucketToWire, contract.TokenBucketFromWire,
		func(n int64, o *pb.TokenBucketOptions, refundable bool) *pb.TokenBucketAcquireRequest {
			return &pb.TokenBucketAcquireRequest{Permits: n, Options: o, Refundable: refundable}
		})
)

// grainRef is a holder's reference to its grain, shared with the leases
// it hands out so that releasing them reuses it.
type grainRef struct {
	ref     proxy.Ref
	release *proxy.MethodDesc
	refund  *proxy.MethodDesc // nil for the concurrency limiter
	renew   *proxy.MethodDesc // nil for the time-based limiters

	renewals renewals // the live concurrency leases it renews
}

// Holder is the client side of one limiter grain (an algorithm and a key):
// what users call. It caches the grain's reference, so build one per key
// and keep it. A holder may have options bound to it (see the
// constructors): every acquisition then carries them, and the grain
// reconfigures itself first when its options differ, so that the first
// caller configures a fresh limiter. Bound options win over options passed
// per call.
//
// Calls with a context that cannot be cancelled (context.Background())
// take a path with no cancellation machinery on either side; others can
// be cancelled. A Holder is safe for concurrent use.
type Holder[O Options] struct {
	grain    *grainRef
	kind     *kind[O]
	bound    O
	hasBound bool
	boundErr error         // Validate's verdict on the bound options
	boundOne proto.Message // the request for one permit under them, shared by every call
	boundP   proto.Message // the bound options, encoded once
	// boundRefundable is boundOne, refundable: what a decision over many
	// limits sends.
	boundRefundable proto.Message
	// leased answers acquisitions from leased quota while the key is hot
	// (leased.go); nil without.
	leased *leasedQuota
}

var (
	_ Limiter = (*Holder[ConcurrencyOptions])(nil)
	_ Limiter = (*Holder[TokenBucketOptions])(nil)
)

// acquireOne is the request for one permit, shared by every call: requests
// are only read, when encoded.
var acquireOne = &pb.AcquireRequest{Permits: 1}

func newHolder[O Options](c proxy.Caller, key string, k *kind[O], bound []O) *Holder[O] {
	h := &Holder[O]{grain: &grainRef{ref: proxy.NewRef(c, k.grainType, key), release: k.methods.release, refund: k.methods.refund, renew: k.methods.renew}, kind: k}
	if len(bound) > 0 {
		h.bound, h.hasBound = bound[0], true
		h.boundErr = validate(bound[0])
		h.boundP = k.toWire(bound[0])
		h.boundOne = k.request(1, h.boundP, false)
		h.boundRefundable = k.request(1, h.boundP, true)
	}
	return h
}

func validate[O Options](o O) error {
	return any(o).(interface{ Validate() error }).Validate()
}

// Concurrency returns a holder for the concurrency limiter of key, through
// caller c (a client, or a silo's own caller). bound, when given, are the
// options bound to the holder; only the first is used.
func Concurrency(c proxy.Caller, key string, bound ...ConcurrencyOptions) *Holder[ConcurrencyOptions] {
	return newHolder(c, key, concurrencyKind, bound)
}

// FixedWindow returns a holder for the fixed-window limiter of key, through
// caller c. bound, when given, are the options bound to the holder; only
// the first is used.
func FixedWindow(c proxy.Caller, key string, bound ...FixedWindowOptions) *Holder[FixedWindowOptions] {
	return newHolder(c, key, fixedWindowKind, bound)
}

// SlidingWindow returns a holder for the sliding-window limiter of key,
// through caller c. bound, when given, are the options bound to the
// holder; only the first is used.
func SlidingWindow(c proxy.Caller, key string, bound ...SlidingWindowOptions) *Holder[SlidingWindowOptions] {
	return newHolder(c, key, slidingWindowKind, bound)
}

// TokenBucket returns a holder for the token bucket of key, through caller
// c. bound, when given, are the options bound to the holder; only the
// first is used.
func TokenBucket(c proxy.Caller, key string, bound ...TokenBucketOptions) *Holder[TokenBucketOptions] {
	return newHolder(c, key, tokenBucketKind, bound)
}

// holderFor returns the holder of O's algorithm for key, bound to o.
func holderFor[O Options](c proxy.Caller, key string, o O) *Holder[O] {
	var h any
	switch o := any(o).(type) {
	case ConcurrencyOptions:
		h = Concurrency(c, key, o)
	case FixedWindowOptions:
		h = FixedWindow(c, key, o)
	case SlidingWindowOptions:
		h = SlidingWindow(c, key, o)
	case TokenBucketOptions:
		h = TokenBucket(c, key, o)
	}
	return h.(*Holder[O])
}

// ForKey returns a holder of the same algorithm for another key, through
// the same caller, with the same bound options. The options are validated
// and encoded once, when h is built, and shared: ForKey allocates only the
// new holder, which is what code that makes a holder per request (HTTP
// middleware, one limiter per client) wants.
func (h *Holder[O]) ForKey(key string) *Holder[O] {
	both := &struct {
		holder Holder[O]
		grain  grainRef
	}{holder: *h}
	both.grain = grainRef{ref: proxy.NewRef(h.grain.ref.Caller(), h.kind.grainType, key), release: h.kind.methods.release, refund: h.kind.methods.refund, renew: h.kind.methods.renew}
	both.holder.grain = &both.grain
	if h.leased != nil {
		both.holder.leased = h.leased.forKey(&both.grain)
	}
	return &both.holder
}

// GrainID returns the identity of the limiter grain.
func (h *Holder[O]) GrainID() actor.GrainID { return h.grain.ref.GrainID() }

// Bound returns the options bound to the holder, if any.
func (h *Holder[O]) Bound() (O, bool) { return h.bound, h.hasBound }

// Acquire takes permits. It returns a lease whether or not they were
// granted: a rejection (the limit is reached, the queue is full or
// disabled, or the call's budget ran out while it waited in the queue) is
// a lease whose Acquired reports false, not an error. The grain answers at
// once when it can; otherwise the call waits in the limiter's queue for at
// most its budget, 80% of the response timeout or the time left before
// ctx's deadline. A cancelled ctx returns ctx.Err() (context.Canceled), and
// a lease granted as it was cancelled is released.
//
// With options bound to the holder, Acquire is AcquireAndConfigure.
func (h *Holder[O]) Acquire(ctx context.Context, permits int64) (*Lease, error) {
	if h.hasBound {
		return h.AcquireAndConfigure(ctx, permits)
	}
	if err := precheck(ctx, permits); err != nil {
		return nil, err
	}
	if h.leased != nil {
		if l, handled, err := h.leased.acquire(ctx, h.grain, permits, false); handled {
			return l, err
		}
	}
	in := acquireOne
	if permits != 1 {
		in = &pb.AcquireRequest{Permits: permits}
	}
	return h.acquire(ctx, h.kind.methods.acquire, in)
}

// AcquireAndConfigure takes permits under the holder's bound options: the
// grain first replaces its options with them when they differ (after the
// acquisitions already waiting there), then acquires. Without bound
// options it is a plain Acquire.
func (h *Holder[O]) AcquireAndConfigure(ctx context.Context, permits int64) (*Lease, error) {
	if !h.hasBound {
		return h.Acquire(ctx, permits)
	}
	if err := precheck(ctx, permits); err != nil {
		return nil, err
	}
	if h.boundErr != nil {
		return nil, h.boundErr
	}
	if h.leased != nil {
		if l, handled, err := h.leased.acquire(ctx, h.grain, permits, false); handled {
			return l, err
		}
	}
	in := h.boundOne
	if permits != 1 {
		in = h.kind.request(permits, h.boundP, false)
	}
	return h.acquire(ctx, h.kind.methods.acquireWith, in)
}

// TryAcquire takes permits only if the limiter grants them now, as .NET's
// AttemptAcquire does: it never waits in the limiter's queue, whatever the
// queue's room, so the answer comes in the grain's turn and the call arms
// no timer there. A rejection is a lease whose Acquired reports false,
// with the metadata of an attempt: RETRY_AFTER for the time-based
// limiters, no reason phrase for the concurrency limiter. A zero-permit
// attempt takes nothing and succeeds when any permit is free. Under
// OldestFirst an attempt fails while anything is queued, even with
// permits free; under NewestFirst it is served as the newest request.
//
// With bound options, the grain installs them first when they differ and
// nothing waits; when they differ while acquisitions wait, the attempt is
// rejected at once rather than wait for the change. An acquired
// concurrency lease needs Release as any other.
func (h *Holder[O]) TryAcquire(ctx context.Context, permits int64) (*Lease, error) {
	if err := precheck(ctx, permits); err != nil {
		return nil, err
	}
	if h.leased != nil && (!h.hasBound || h.boundErr == nil) {
		if l, handled, err := h.leased.acquire(ctx, h.grain, permits, true); handled {
			return l, err
		}
	}
	var in proto.Message
	switch {
	case h.hasBound && h.boundErr != nil:
		return nil, h.boundErr
	case h.hasBound && permits == 1:
		in = h.boundOne
	case h.hasBound:
		in = h.kind.request(permits, h.boundP, false)
	case permits == 1:
		in = h.kind.tryOne
	default:
		in = h.kind.plain(permits)
	}
	return h.acquire(ctx, h.kind.methods.tryAcquire, in)
}

// AcquireAndCheckConfiguration takes permits under options o, or under the
// holder's bound options when it has some: they win. The grain
// reconfigures first when the options differ from its current ones.
// Invalid options return an error and change nothing.
func (h *Holder[O]) AcquireAndCheckConfiguration(ctx context.Context, permits int64, o O) (*Lease, error) {
	if h.hasBound {
		return h.AcquireAndConfigure(ctx, permits)
	}
	if err := precheck(ctx, permits); err != nil {
		return nil, err
	}
	if err := validate(o); err != nil {
		return nil, err
	}
	return h.acquire(ctx, h.kind.methods.acquireWith, h.kind.request(permits, h.kind.toWire(o), false))
}

// acquireForDecision is AcquireAndConfigure (try false) or TryAcquire (try
// true) as part of a decision over many limits: a time-based grant is
// refundable, so that the decision can give it back when another limit
// refuses.
func (h *Holder[O]) acquireForDecision(ctx context.Context, permits int64, try bool) (*Lease, error) {
	if !h.kind.refunds {
		if try {
			return h.TryAcquire(ctx, permits)
		}
		return h.AcquireAndConfigure(ctx, permits)
	}
	if err := precheck(ctx, permits); err != nil {
		return nil, err
	}
	var in proto.Message
	switch {
	case h.hasBound && h.boundErr != nil:
		return nil, h.boundErr
	case h.hasBound && permits == 1:
		in = h.boundRefundable
	case h.hasBound:
		in = h.kind.request(permits, h.boundP, true)
	default:
		in = h.kind.request(permits, nil, true)
	}
	m := h.kind.methods.acquireWith
	if try {
		m = h.kind.methods.tryAcquire
	}
	l, err := h.acquire(ctx, m, in)
	if l != nil {
		l.refundable = true
	}
	return l, err
}

// precheck refuses what would never reach the grain: a context that is
// already done, a negative count.
func precheck(ctx context.Context, permits int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if permits < 0 {
		return ErrNegativeCount
	}
	return nil
}

// acquire calls the grain and turns the outcome into what Acquire returns.
// The reply is decoded straight into the lease.
func (h *Holder[O]) acquire(ctx context.Context, m *proxy.MethodDesc, in proto.Message) (*Lease, error) {
	l := &Lease{grain: h.grain}
	if err := h.grain.ref.Invoke(ctx, m, in, &l.md); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		if errors.Is(err, proxy.ErrTimeout) {
			// No answer within the response timeout (a slow activation, an
			// overloaded silo): a rejection, as for a budget that ran out.
			return timedOutLease(h.grain), nil
		}
		return nil, err
	}
	if l.md.Acquired && !l.md.ReleaseOptional {
		h.grain.track(l)
	}
	if ctx.Err() != nil {
		// Cancelled as the reply arrived: the caller will not use the
		// lease, so its permits go back now.
		_ = l.Release(context.WithoutCancel(ctx))
		return nil, ctx.Err()
	}
	return l, nil
}

// Configure replaces the grain's options, once the acquisitions already
// waiting there are answered; quota, counters and concurrency leases start
// afresh, and the new state is stored at once. Invalid options return an
// error (an *limiter.OptionsError naming every bad field) and change
// nothing. When the call's budget runs out before its turn comes, it
// fails with an error matching proxy.ErrTimeout, and nothing changes.
func (h *Holder[O]) Configure(ctx context.Context, o O) error {
	if err := validate(o); err != nil {
		return err
	}
	return h.grain.ref.Invoke(ctx, h.kind.methods.configure, h.kind.toWire(o), new(pb.ConfigureReply))
}

// Configuration returns the grain's current options: the last configured
// ones, or the silo's defaults.
func (h *Holder[O]) Configuration(ctx context.Context) (O, error) {
	var zero O
	out := h.kind.toWire(zero) // an empty message of the right type
	if err := h.grain.ref.Invoke(ctx, h.kind.methods.configuration, &pb.ConfigurationRequest{}, out); err != nil {
		return zero, err
	}
	o, _ := h.kind.fromWire(out)
	return o, nil
}

// Statistics returns the grain's counters. The totals survive
// reactivation once a snapshot has been stored.
func (h *Holder[O]) Statistics(ctx context.Context) (Statistics, error) {
	st := new(pb.StatisticsReply)
	if err := h.grain.ref.Invoke(ctx, h.kind.methods.statistics, &pb.StatisticsRequest{}, st); err != nil {
		return Statistics{}, err
	}
	return Statistics{
		AvailablePermits:      st.AvailablePermits,
		QueuedPermits:         st.QueuedPermits,
		TotalFailedLeases:     st.TotalFailedLeases,
		TotalSuccessfulLeases: st.TotalSuccessfulLeases,
		ActiveLeases:          st.ActiveLeases,
		WaitingCalls:          st.WaitingCalls,
	}, nil
}

// Reset gives the limiter its full quota back and forgets its concurrency
// leases, keeping its options; it waits for the acquisitions already
// queued, within its budget.
func (h *Holder[O]) Reset(ctx context.Context) error {
	return h.grain.ref.Invoke(ctx, h.kind.methods.reset, &pb.ResetRequest{}, new(pb.ResetReply))
}

// DeleteState clears the grain's stored state and returns it to the silo's
// defaults; it waits for the acquisitions already queued, within its
// budget. When the store fails, nothing changes.
func (h *Holder[O]) DeleteState(ctx context.Context) error {
	return h.grain.ref.Invoke(ctx, h.kind.methods.deleteState, &pb.DeleteStateRequest{}, new(pb.DeleteStateReply))
}

// TryReplenish runs one manual replenishment and reports whether the
// limiter replenishes manually (with automatic replenishment it does
// nothing and reports false). A concurrency limiter has nothing to
// replenish: it reports false without calling the grain.
func (h *Holder[O]) TryReplenish(ctx context.Context) (bool, error) {
	if h.kind.methods.tryReplenish == nil {
		return false, nil
	}
	reply := new(pb.TryReplenishReply)
	if err := h.grain.ref.Invoke(ctx, h.kind.methods.tryReplenish, &pb.TryReplenishRequest{}, reply); err != nil {
		return false, err
	}
	return reply.Replenished, nil
}

// Statistics is a snapshot of a limiter grain's counters.
type Statistics struct {
	// AvailablePermits is the number of permits (whole tokens) free now.
	AvailablePermits int64
	// QueuedPermits counts the permits of waiting acquisitions.
	QueuedPermits int64
	// TotalFailedLeases counts rejections and evicted waiters.
	TotalFailedLeases int64
	// TotalSuccessfulLeases counts granted acquisitions.
	TotalSuccessfulLeases int64
	// ActiveLeases is the number of concurrency leases the grain holds
	// until they are released; always 0 for the time-based limiters.
	ActiveLeases int64
	// WaitingCalls is the number of calls the grain holds: queued
	// acquisitions and configuration changes waiting their turn.
	WaitingCalls int64
}

// String summarises the statistics for logs and test failures.
func (s Statistics) String() string {
	return fmt.Sprintf("available %d, queued %d, succeeded %d, failed %d, leases %d, waiting %d",
		s.AvailablePermits, s.QueuedPermits, s.TotalSuccessfulLeases, s.TotalFailedLeases, s.ActiveLeases, s.WaitingCalls)
}
