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

// Argument errors of acquisitions. Through a silo's own caller the
// grain's errors arrive as these values; across a gateway connection an
// error the grain returned arrives as a *proxy.RemoteError matching
// proxy.ErrApplication, carrying the text.
var (
	ErrNegativeCount     = limiter.ErrNegativeCount
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
	// Statistics returns the grain's counters.
	Statistics(ctx context.Context) (Statistics, error)
	// Reset gives the limiter its full quota back, keeping its options.
	Reset(ctx context.Context) error
	// DeleteState clears the grain's stored state and options.
	DeleteState(ctx context.Context) error
	// TryReplenish runs one manual replenishment.
	TryReplenish(ctx context.Context) (bool, error)
}

// commonRef is what the four generated references share.
type commonRef interface {
	GrainID() actor.GrainID
	Acquire(ctx context.Context, in *pb.AcquireRequest, opts ...proxy.CallOption) (*pb.LeaseMetadata, error)
	Release(ctx context.Context, in *pb.ReleaseRequest, opts ...proxy.CallOption) (*pb.ReleaseReply, error)
	Statistics(ctx context.Context, in *pb.StatisticsRequest, opts ...proxy.CallOption) (*pb.StatisticsReply, error)
	Reset(ctx context.Context, in *pb.ResetRequest, opts ...proxy.CallOption) (*pb.ResetReply, error)
	DeleteState(ctx context.Context, in *pb.DeleteStateRequest, opts ...proxy.CallOption) (*pb.DeleteStateReply, error)
}

// typedRef is a generated reference with the methods that take its
// algorithm's options (P) and acquire request (R).
type typedRef[P proto.Message, R any] interface {
	commonRef
	AcquireAndCheckConfiguration(ctx context.Context, in R, opts ...proxy.CallOption) (*pb.LeaseMetadata, error)
	Configure(ctx context.Context, in P, opts ...proxy.CallOption) (*pb.ConfigureReply, error)
	Configuration(ctx context.Context, in *pb.ConfigurationRequest, opts ...proxy.CallOption) (P, error)
}

type replenishRef interface {
	TryReplenish(ctx context.Context, in *pb.TryReplenishRequest, opts ...proxy.CallOption) (*pb.TryReplenishReply, error)
}

// typed is the part of a holder that knows its algorithm's wire types.
type typed[O Options] interface {
	acquireWith(ctx context.Context, permits int64, o O) (*pb.LeaseMetadata, error)
	acquireBound(ctx context.Context, permits int64) (*pb.LeaseMetadata, error)
	configure(ctx context.Context, o O) error
	configuration(ctx context.Context) (O, error)
}

type typedCalls[O Options, P proto.Message, R any] struct {
	ref      typedRef[P, R]
	toWire   func(O) P
	fromWire func(P) (O, bool)
	request  func(permits int64, options P) R
	bound    P // the bound options, encoded once
	boundOne R // the request for one permit under them, shared by every call
}

func (t *typedCalls[O, P, R]) acquireWith(ctx context.Context, permits int64, o O) (*pb.LeaseMetadata, error) {
	return t.ref.AcquireAndCheckConfiguration(ctx, t.request(permits, t.toWire(o)))
}

func (t *typedCalls[O, P, R]) acquireBound(ctx context.Context, permits int64) (*pb.LeaseMetadata, error) {
	if permits == 1 {
		return t.ref.AcquireAndCheckConfiguration(ctx, t.boundOne)
	}
	return t.ref.AcquireAndCheckConfiguration(ctx, t.request(permits, t.bound))
}

func (t *typedCalls[O, P, R]) configure(ctx context.Context, o O) error {
	_, err := t.ref.Configure(ctx, t.toWire(o))
	return err
}

func (t *typedCalls[O, P, R]) configuration(ctx context.Context) (O, error) {
	p, err := t.ref.Configuration(ctx, &pb.ConfigurationRequest{})
	if err != nil {
		var zero O
		return zero, err
	}
	o, _ := t.fromWire(p)
	return o, nil
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
	ref      commonRef
	typed    typed[O]
	caller   proxy.Caller
	id       actor.GrainID
	bound    O
	hasBound bool
	boundErr error // Validate's verdict on the bound options
}

var (
	_ Limiter = (*Holder[ConcurrencyOptions])(nil)
	_ Limiter = (*Holder[TokenBucketOptions])(nil)
)

// acquireOne is the request for one permit, shared by every call: requests
// are only read, when encoded.
var acquireOne = &pb.AcquireRequest{Permits: 1}

func newHolder[O Options, P proto.Message, R any](c proxy.Caller, ref typedRef[P, R], toWire func(O) P, fromWire func(P) (O, bool), request func(int64, P) R, bound []O) *Holder[O] {
	t := &typedCalls[O, P, R]{ref: ref, toWire: toWire, fromWire: fromWire, request: request}
	h := &Holder[O]{ref: ref, typed: t, caller: c, id: ref.GrainID()}
	if len(bound) > 0 {
		h.bound, h.hasBound = bound[0], true
		h.boundErr = validate(bound[0])
		t.bound = toWire(bound[0])
		t.boundOne = request(1, t.bound)
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
	return newHolder(c, pb.NewConcurrencyLimiterRef(c, key), contract.ConcurrencyToWire, contract.ConcurrencyFromWire,
		func(n int64, o *pb.ConcurrencyOptions) *pb.ConcurrencyAcquireRequest {
			return &pb.ConcurrencyAcquireRequest{Permits: n, Options: o}
		}, bound)
}

// FixedWindow returns a holder for the fixed-window limiter of key, through
// caller c. bound, when given, are the options bound to the holder; only
// the first is used.
func FixedWindow(c proxy.Caller, key string, bound ...FixedWindowOptions) *Holder[FixedWindowOptions] {
	return newHolder(c, pb.NewFixedWindowLimiterRef(c, key), contract.FixedWindowToWire, contract.FixedWindowFromWire,
		func(n int64, o *pb.FixedWindowOptions) *pb.FixedWindowAcquireRequest {
			return &pb.FixedWindowAcquireRequest{Permits: n, Options: o}
		}, bound)
}

// SlidingWindow returns a holder for the sliding-window limiter of key,
// through caller c. bound, when given, are the options bound to the
// holder; only the first is used.
func SlidingWindow(c proxy.Caller, key string, bound ...SlidingWindowOptions) *Holder[SlidingWindowOptions] {
	return newHolder(c, pb.NewSlidingWindowLimiterRef(c, key), contract.SlidingWindowToWire, contract.SlidingWindowFromWire,
		func(n int64, o *pb.SlidingWindowOptions) *pb.SlidingWindowAcquireRequest {
			return &pb.SlidingWindowAcquireRequest{Permits: n, Options: o}
		}, bound)
}

// TokenBucket returns a holder for the token bucket of key, through caller
// c. bound, when given, are the options bound to the holder; only the
// first is used.
func TokenBucket(c proxy.Caller, key string, bound ...TokenBucketOptions) *Holder[TokenBucketOptions] {
	return newHolder(c, pb.NewTokenBucketLimiterRef(c, key), contract.TokenBucketToWire, contract.TokenBucketFromWire,
		func(n int64, o *pb.TokenBucketOptions) *pb.TokenBucketAcquireRequest {
			return &pb.TokenBucketAcquireRequest{Permits: n, Options: o}
		}, bound)
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

// GrainID returns the identity of the limiter grain.
func (h *Holder[O]) GrainID() actor.GrainID { return h.id }

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
	in := acquireOne
	if permits != 1 {
		in = &pb.AcquireRequest{Permits: permits}
	}
	md, err := h.ref.Acquire(ctx, in)
	return h.lease(ctx, md, err)
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
	md, err := h.typed.acquireBound(ctx, permits)
	return h.lease(ctx, md, err)
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
	md, err := h.typed.acquireWith(ctx, permits, o)
	return h.lease(ctx, md, err)
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

// lease turns an acquisition's outcome into what Acquire returns.
func (h *Holder[O]) lease(ctx context.Context, md *pb.LeaseMetadata, err error) (*Lease, error) {
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		if errors.Is(err, proxy.ErrTimeout) {
			// No answer within the response timeout (a slow activation, an
			// overloaded silo): a rejection, as for a budget that ran out.
			return timedOutLease(h), nil
		}
		return nil, err
	}
	l := &Lease{md: md, holder: h.ref, caller: h.caller}
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
	return h.typed.configure(ctx, o)
}

// Configuration returns the grain's current options: the last configured
// ones, or the silo's defaults.
func (h *Holder[O]) Configuration(ctx context.Context) (O, error) {
	return h.typed.configuration(ctx)
}

// Statistics returns the grain's counters. The totals survive
// reactivation once a snapshot has been stored.
func (h *Holder[O]) Statistics(ctx context.Context) (Statistics, error) {
	st, err := h.ref.Statistics(ctx, &pb.StatisticsRequest{})
	if err != nil {
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
	_, err := h.ref.Reset(ctx, &pb.ResetRequest{})
	return err
}

// DeleteState clears the grain's stored state and returns it to the silo's
// defaults; it waits for the acquisitions already queued, within its
// budget. When the store fails, nothing changes.
func (h *Holder[O]) DeleteState(ctx context.Context) error {
	_, err := h.ref.DeleteState(ctx, &pb.DeleteStateRequest{})
	return err
}

// TryReplenish runs one manual replenishment and reports whether the
// limiter replenishes manually (with automatic replenishment it does
// nothing and reports false). A concurrency limiter has nothing to
// replenish: it reports false without calling the grain.
func (h *Holder[O]) TryReplenish(ctx context.Context) (bool, error) {
	r, ok := h.ref.(replenishRef)
	if !ok {
		return false, nil
	}
	reply, err := r.TryReplenish(ctx, &pb.TryReplenishRequest{})
	if err != nil {
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
