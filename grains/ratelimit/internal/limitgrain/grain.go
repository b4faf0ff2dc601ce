package limitgrain

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/grains/ratelimit/internal/contract"
	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

// core is what a grain needs of a limiter algorithm.
type core interface {
	limiter.Core
	State() limiter.State
	Restore(now time.Time, s limiter.State) error
}

// releaser is implemented by the concurrency limiter, whose permits come
// back on release.
type releaser interface {
	Release(now time.Time, n int64) error
}

// replenisher is implemented by the time-based limiters.
type replenisher interface {
	TryReplenish(now time.Time) bool
}

// acquireRequest is the request of AcquireAndCheckConfiguration: permits
// and the options of the grain's algorithm (P), as the generated getters
// give them.
type acquireRequest[P any] interface {
	GetPermits() int64
	GetOptions() P
	GetRefundable() bool
}

// refunder is implemented by the time-based limiters, which give back
// the permits of a lease its holder did not use while they can put them
// back where they were charged.
type refunder interface {
	Refund(now time.Time, l limiter.Lease) int64
	Refundable(l limiter.Lease) bool
}

// refundHorizon is how long a time-based grain keeps what a Refund needs.
// A decision over several limits refunds within its own call, so a lease
// not refunded by then never will be; the bound keeps a grain whose
// callers died mid-decision from collecting records. (Fixed and sliding
// windows drop a record sooner, once the algorithm could not refund it.)
const refundHorizon = time.Minute

// maxRefunds bounds the refund records a grain keeps, whatever its
// callers ask: a caller may mark every grant refundable, and a hot key's
// grants within the horizon would otherwise all be kept. At the bound a
// new record evicts one at random. An evicted grant cannot be refunded,
// so its decision keeps the permits spent: the limit errs towards
// granting less, never more.
const maxRefunds = 1024

// refundRecord is a refundable time-based lease not yet refunded.
type refundRecord struct {
	lease limiter.Lease
	at    time.Time
}

// grain is a limiter grain of any of the four algorithms: O is the
// algorithm's options, P their wire message and R its
// AcquireAndCheckConfiguration request. Its methods run in the
// activation's turns, so it needs no lock; the limiter core it drives is a
// deterministic state machine that takes the time on every call.
type grain[O comparable, P proto.Message, R acquireRequest[P]] struct {
	*kind[O, P] // shared by the kind's grains: a grain of an idle key is kept small

	act    runtime
	wireID *pb.GrainId // shared by the replies that carry it, never modified; nil until one does
	saved  *pb.LimiterState

	options    O
	configured bool
	// sticky: the options were installed by Configure, or restored from a
	// stored state, so only the stored state remembers them; options that
	// came with acquisitions come again with the next one.
	sticky      bool
	core        core
	releaser    releaser    // nil for the time-based algorithms
	replenisher replenisher // nil for the concurrency limiter
	refunder    refunder    // nil for the concurrency limiter

	// refunds are the refundable time-based leases not yet refunded, by
	// lease id; pruneAt is the size at which the next insertion drops the
	// records that can no longer be refunded.
	refunds map[uint64]refundRecord
	pruneAt int

	// leases are the concurrency leases not yet released or expired, by
	// lease id. Time-based grains keep nothing per lease.
	leases map[uint64]heldLease
	// leaseTimes is how the concurrency leases expire: nil for the
	// time-based grains, which keep no leases.
	*leaseTimes

	queued      int        // calls waiting in the limiter's queue
	held        []*call[O] // calls waiting behind a configuration change, in arrival order
	heldPermits int64
	completed   []*limiter.Waiter // waiters the core completed, to answer once it returns

	tick   timer // the replenishment tick, armed only while the core needs one
	tickAt time.Time
	onTick func()

	quota *leasing // leased quota's slices and fair-share claims (quota.go), nil until a slice is asked for
}

// kind is what the grains of one limiter grain type on a silo share.
type kind[O comparable, P proto.Message] struct {
	alg      *algorithm[O, P]
	defaults O
	counters *Counters // the silo's, shared by all its limiter grains
}

// newKind returns the kind of alg's grains, which count their
// acquisitions in counters (nil: counters of their own).
func newKind[O comparable, P proto.Message](alg *algorithm[O, P], defaults O, counters *Counters) *kind[O, P] {
	if counters == nil {
		counters = new(Counters)
	}
	return &kind[O, P]{alg: alg, defaults: defaults, counters: counters}
}

// newGrain returns a grain of a kind of its own that counts its
// acquisitions in counters (nil: counters of its own).
func newGrain[O comparable, P proto.Message, R acquireRequest[P]](alg *algorithm[O, P], defaults O, counters *Counters) *grain[O, P, R] {
	return &grain[O, P, R]{kind: newKind(alg, defaults, counters)}
}

// OnActivate restores the stored state, if any, by the restore rules of the
// grain's algorithm, and starts the replenishment tick when it is due.
func (g *grain[O, P, R]) OnActivate(_ context.Context, act *actor.Context) error {
	g.start(activation{act})
	return nil
}

// start is OnActivate on any runtime.
func (g *grain[O, P, R]) start(act runtime) {
	g.act = act
	g.onTick = g.tickNow
	now := act.Now()
	g.restore(now)
	g.saved = nil
	g.rearm(now)
}

// OnDeactivate closes the limiter and answers every call still held: a
// rejected lease for acquisitions, actor.ErrDeactivated for changes. (The
// runtime answers held replies itself before it calls OnDeactivate; then
// these answers go nowhere.)
func (g *grain[O, P, R]) OnDeactivate(ctx context.Context, _ *actor.Context) error {
	now := g.act.Now()
	held := g.held
	g.held, g.heldPermits = nil, 0
	g.core.Close(now)
	for _, w := range g.completed {
		g.finish(w, now)
	}
	g.completed = nil
	for _, c := range held {
		if c.kind.acquires() {
			g.counters.rejected.Add(1)
			g.answer(c, g.notAcquiredReply(), nil)
		} else {
			g.answer(c, nil, actor.ErrDeactivated)
		}
	}
	if len(held) == 0 && g.atRest(now) && !g.sticky {
		// A fresh activation would start where this one stands: the stored
		// state is worth nothing, so it goes rather than stays for ever.
		// When the delete fails the final flush writes it instead.
		_ = g.act.ClearState(ctx)
	}
	return nil
}

// atRest reports whether the limiter is where a fresh one starts: every
// permit free (bucket full, window passed, no lease held) and nothing
// waiting.
func (g *grain[O, P, R]) atRest(now time.Time) bool {
	if g.core == nil || !g.idle() || len(g.leases) > 0 {
		return false
	}
	_, idle := g.core.IdleDuration(now)
	return idle
}

// install makes c, built for o, the grain's limiter: quota, counters and
// concurrency leases start afresh. It only runs while nobody waits in the
// old limiter's queue.
func (g *grain[O, P, R]) install(o O, c core, now time.Time) {
	if g.core != nil {
		g.core.Close(now)
	}
	g.options = o
	g.core = c
	g.releaser, _ = c.(releaser)
	g.replenisher, _ = c.(replenisher)
	g.refunder, _ = c.(refunder)
	g.refunds = nil
	if g.quota != nil {
		g.quota.reset()
	}
	c.SetCompletionHandler(g.onCompleted)
	g.leases = nil
	if g.leaseTimes != nil && g.expiry != nil {
		g.expiry.Stop()
		g.expiry = nil
	}
	if g.releaser != nil {
		g.leases = make(map[uint64]heldLease)
		if g.leaseTimes == nil {
			g.leaseTimes = new(leaseTimes)
		}
		g.ttl = g.alg.ttl(o)
	}
	// Past its refill time a stored time-based state says nothing a fresh
	// limiter would not (the restore rules give it back in full); the
	// margin covers clocks that differ between silos.
	if refill := g.alg.refill(o); refill > 0 {
		g.act.SetStateTTL(refill + stateTTLMargin)
	} else {
		g.act.SetStateTTL(0)
	}
	g.rearm(now)
}

// stateTTLMargin is added to a limiter's refill time in its stored state's
// time to live.
const stateTTLMargin = time.Minute

// onCompleted is the core's completion handler. The core calls it from
// inside its own methods, which must not be re-entered, so the waiter is
// only noted here and answered by settle.
func (g *grain[O, P, R]) onCompleted(w *limiter.Waiter) { g.completed = append(g.completed, w) }

// Acquire takes permits at once when it can, answering in the same turn
// with no timer and no deferred reply; only a call that must wait keeps
// its reply and arms its deadline.
func (g *grain[O, P, R]) Acquire(_ context.Context, in *pb.AcquireRequest) (*pb.LeaseMetadata, error) {
	return g.acquire(in.Permits, in.Refundable)
}

func (g *grain[O, P, R]) acquire(permits int64, refundable bool) (*pb.LeaseMetadata, error) {
	if len(g.held) > 0 {
		g.hold(&call[O]{kind: acquireCall, permits: permits, refundable: refundable})
		return nil, nil
	}
	return g.acquireNow(permits, refundable)
}

// AcquireAndCheckConfiguration reconfigures the grain first when the
// options differ from the current ones (after the acquisitions already
// waiting), then acquires. Nil options acquire under the current ones.
func (g *grain[O, P, R]) AcquireAndCheckConfiguration(ctx context.Context, in R) (*pb.LeaseMetadata, error) {
	o, ok := g.alg.fromWire(in.GetOptions())
	if !ok || (o == g.options && len(g.held) == 0) {
		return g.acquire(in.GetPermits(), in.GetRefundable())
	}
	if o != g.options {
		if err := mayChangeOptions(ctx); err != nil {
			return nil, err
		}
	}
	now := g.act.Now()
	trial, err := g.trial(o, in.GetPermits(), now)
	if err != nil {
		return nil, err
	}
	if g.idle() {
		g.reconfigure(o, trial, now, false)
		return g.acquireNow(in.GetPermits(), in.GetRefundable())
	}
	// Behind an earlier change, the options are compared again when the
	// call's turn comes, with the options that change installed.
	g.hold(&call[O]{kind: reconfigureCall, permits: in.GetPermits(), options: o, refundable: in.GetRefundable()})
	return nil, nil
}

// mayChangeOptions refuses a change of the grain's options to a client
// whose credential lacks the admin right: acquisitions that name options
// (AcquireAndCheckConfiguration, TryAcquire) change them when they
// differ, which only the grain can tell, so the gateway, which guards
// Configure by its method alone, cannot guard these. Calls a silo makes
// (its HTTP API, which has credentials of its own, or another grain) are
// not asked, nor callers of no known identity.
func mayChangeOptions(ctx context.Context) error {
	id, ok := actor.IdentityOf(ctx)
	if !ok || id.Kind != actor.CallerClient || id.Rights.Has(actor.RightAdmin) {
		return nil
	}
	return fmt.Errorf("%w: changing a limiter's options requires the %v right, which the caller's credential does not grant (it grants %v); acquire under the options the limiter has, or without options",
		proxy.ErrPermissionDenied, actor.RightAdmin, id.Rights)
}

// TryAcquire takes permits only if the limiter grants them now (the
// core's AttemptAcquire): it never queues, defers its reply or arms a
// timer. Options that differ are installed first when nothing waits;
// while acquisitions wait, a change could only come after them, so the
// attempt is rejected at once instead.
//
// An attempt does not wait behind a configuration change held for the
// queue either: it runs against the limiter as it is, where an
// OldestFirst queue (which such a change implies) refuses it anyway and
// a NewestFirst one lets it through as the newest request, as .NET's
// AttemptAcquire does.
func (g *grain[O, P, R]) TryAcquire(ctx context.Context, in R) (*pb.LeaseMetadata, error) {
	now := g.act.Now()
	permits := in.GetPermits()
	if o, ok := g.alg.fromWire(in.GetOptions()); ok && o != g.options {
		if err := mayChangeOptions(ctx); err != nil {
			return nil, err
		}
		trial, err := g.trial(o, permits, now)
		if err != nil {
			return nil, err
		}
		if !g.idle() {
			g.counters.rejected.Add(1)
			return &pb.LeaseMetadata{ReleaseOptional: true}, nil
		}
		g.reconfigure(o, trial, now, false)
	}
	lease, err := g.core.AttemptAcquire(now, permits)
	if err != nil {
		return nil, argumentError(err)
	}
	g.act.MarkDirty()
	g.rearm(now)
	return g.leaseReply(lease, in.GetRefundable(), now), nil
}

// acquireNow runs an acquisition inside the method's turn.
func (g *grain[O, P, R]) acquireNow(permits int64, refundable bool) (*pb.LeaseMetadata, error) {
	now := g.act.Now()
	lease, w, err := g.core.Acquire(now, permits)
	if err != nil {
		return nil, argumentError(err)
	}
	g.act.MarkDirty()
	if w == nil {
		g.rearm(now)
		return g.leaseReply(lease, refundable, now), nil
	}
	c := &call[O]{kind: acquireCall, permits: permits, refundable: refundable}
	g.keep(c, now)
	g.enqueued(c, w)
	g.settle(now) // a NewestFirst queue may have evicted older waiters
	return nil, nil
}

func (g *grain[O, P, R]) enqueued(c *call[O], w *limiter.Waiter) {
	c.waiter = w
	w.Value = c
	g.queued++
}

// Release returns a concurrency lease's permits; time-based grains keep
// nothing to release.
func (g *grain[O, P, R]) Release(_ context.Context, in *pb.ReleaseRequest) (*pb.ReleaseReply, error) {
	held, ok := g.leases[in.LeaseId]
	if !ok {
		return &pb.ReleaseReply{}, nil
	}
	delete(g.leases, in.LeaseId)
	now := g.act.Now()
	if err := g.releaser.Release(now, held.permits); err != nil {
		return nil, err
	}
	g.act.MarkDirty()
	g.settle(now)
	return &pb.ReleaseReply{Released: true}, nil
}

// Refund gives back the permits of a refundable time-based lease, once,
// as far as the algorithm can (see limiter's Refund methods); the permits
// serve the queue. A lease the grain does not know (never refundable,
// refunded already, older than the refund horizon, or from before a
// configuration change, reset or reactivation) refunds nothing.
func (g *grain[O, P, R]) Refund(_ context.Context, in *pb.RefundRequest) (*pb.RefundReply, error) {
	r, ok := g.refunds[in.LeaseId]
	if !ok || g.refunder == nil {
		return &pb.RefundReply{}, nil
	}
	delete(g.refunds, in.LeaseId)
	now := g.act.Now()
	n := g.refunder.Refund(now, r.lease)
	if n > 0 {
		g.act.MarkDirty()
		g.settle(now)
	}
	return &pb.RefundReply{Refunded: n}, nil
}

// keepRefund records a refundable time-based lease. Every time the map
// doubles, the records that can no longer be refunded go, so it holds at
// most about twice the leases still refundable, and never more than
// maxRefunds.
func (g *grain[O, P, R]) keepRefund(id uint64, l limiter.Lease, now time.Time) {
	if g.refunds == nil {
		g.refunds = make(map[uint64]refundRecord)
	}
	if len(g.refunds) >= g.pruneAt {
		for id, r := range g.refunds {
			if !g.refunder.Refundable(r.lease) || now.Sub(r.at) >= refundHorizon {
				delete(g.refunds, id)
			}
		}
		g.pruneAt = max(2*len(g.refunds), 64)
	}
	if len(g.refunds) >= maxRefunds {
		for id := range g.refunds { // a map's iteration starts at random
			delete(g.refunds, id)
			break
		}
	}
	g.refunds[id] = refundRecord{lease: l, at: now}
}

// Statistics reports the limiter's counters and what the grain holds.
func (g *grain[O, P, R]) Statistics(context.Context, *pb.StatisticsRequest) (*pb.StatisticsReply, error) {
	st, err := g.core.Statistics()
	if err != nil {
		return nil, err
	}
	return &pb.StatisticsReply{
		AvailablePermits:      st.AvailablePermits,
		QueuedPermits:         st.QueuedPermits + g.heldPermits,
		TotalFailedLeases:     st.TotalFailedLeases,
		TotalSuccessfulLeases: st.TotalSuccessfulLeases,
		ActiveLeases:          int64(len(g.leases)),
		WaitingCalls:          int64(g.queued + len(g.held)),
	}, nil
}

// Configure validates the options on a trial limiter, then, once the
// acquisitions already waiting are answered, replaces the limiter and
// stores the state at once.
func (g *grain[O, P, R]) Configure(ctx context.Context, in P) (*pb.ConfigureReply, error) {
	o, ok := g.alg.fromWire(in)
	if !ok {
		return nil, errNoOptions
	}
	now := g.act.Now()
	trial, err := g.trial(o, 0, now)
	if err != nil {
		return nil, err
	}
	if g.idle() {
		g.reconfigure(o, trial, now, true)
		return &pb.ConfigureReply{}, nil
	}
	g.hold(&call[O]{kind: configureCall, options: o})
	return nil, nil
}

// Configuration returns the current options.
func (g *grain[O, P, R]) Configuration(context.Context, *pb.ConfigurationRequest) (P, error) {
	return g.alg.toWire(g.options), nil
}

// Reset gives the limiter its full quota back and forgets concurrency
// leases, keeping the options.
func (g *grain[O, P, R]) Reset(context.Context, *pb.ResetRequest) (*pb.ResetReply, error) {
	if !g.idle() {
		g.hold(&call[O]{kind: resetCall})
		return nil, nil
	}
	g.reset(g.act.Now())
	return &pb.ResetReply{}, nil
}

// DeleteState clears the stored state and returns to the silo defaults.
// When the store fails, nothing changes.
func (g *grain[O, P, R]) DeleteState(context.Context, *pb.DeleteStateRequest) (*pb.DeleteStateReply, error) {
	if !g.idle() {
		g.hold(&call[O]{kind: deleteCall})
		return nil, nil
	}
	if err := g.deleteState(g.act.Now()); err != nil {
		return nil, err
	}
	return &pb.DeleteStateReply{}, nil
}

// TryReplenish runs one manual replenishment of a time-based limiter.
func (g *grain[O, P, R]) TryReplenish(context.Context, *pb.TryReplenishRequest) (*pb.TryReplenishReply, error) {
	if g.replenisher == nil {
		return &pb.TryReplenishReply{}, nil
	}
	now := g.act.Now()
	done := g.replenisher.TryReplenish(now)
	if done {
		g.act.MarkDirty()
	}
	g.settle(now)
	return &pb.TryReplenishReply{Replenished: done}, nil
}

// idle reports whether a configuration change may run now: nothing waits
// in the limiter's queue or behind an earlier change.
func (g *grain[O, P, R]) idle() bool { return g.queued == 0 && len(g.held) == 0 }

// trial validates o, and permits against it, on a limiter of its own; the
// grain's limiter is untouched whatever the outcome.
func (g *grain[O, P, R]) trial(o O, permits int64, now time.Time) (core, error) {
	c, err := g.alg.newCore(o, now)
	if err != nil {
		return nil, err
	}
	switch {
	case permits < 0:
		return nil, contract.ErrNegativeCount
	case permits > g.alg.limit(o):
		return nil, contract.ErrCountExceedsLimit
	}
	return c, nil
}

// argumentError gives the limiter's argument errors the codes callers
// test for on every path; other errors pass as they are.
func argumentError(err error) error {
	switch {
	case errors.Is(err, limiter.ErrNegativeCount):
		return contract.ErrNegativeCount
	case errors.Is(err, limiter.ErrCountExceedsLimit):
		return contract.ErrCountExceedsLimit
	}
	return err
}

// reconfigure installs a limiter for o and stores the new state at once.
// sticky says whether the options came from Configure rather than with
// an acquisition.
func (g *grain[O, P, R]) reconfigure(o O, c core, now time.Time, sticky bool) {
	g.install(o, c, now)
	g.configured = true
	g.sticky = sticky
	g.writeState()
}

// reset installs a fresh limiter for the current options and stores the
// state at once.
func (g *grain[O, P, R]) reset(now time.Time) {
	c, err := g.alg.newCore(g.options, now)
	if err != nil { // the options were valid when they were installed
		panic(err)
	}
	g.install(g.options, c, now)
	g.writeState()
}

// deleteState clears the stored state first, so that a store that fails
// leaves the grain as it was, then goes back to the silo defaults.
func (g *grain[O, P, R]) deleteState(now time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	if err := g.act.ClearState(ctx); err != nil {
		return err
	}
	c, err := g.alg.newCore(g.defaults, now)
	if err != nil { // the defaults were validated at registration
		panic(err)
	}
	g.install(g.defaults, c, now)
	g.configured, g.sticky = false, false
	return nil
}

// writeState stores the state within the current turn. A write that fails
// leaves the state dirty for the flusher to retry, so the change is
// applied in memory either way: the snapshot is best effort.
func (g *grain[O, P, R]) writeState() {
	g.act.MarkDirty()
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	_ = g.act.WriteState(ctx)
}

// stateTimeout bounds a write or delete made inside a turn.
const stateTimeout = 10 * time.Second

// rearm keeps one replenishment tick armed for the time the core reports,
// and none while it needs none (a full limiter, manual replenishment, the
// concurrency limiter).
func (g *grain[O, P, R]) rearm(now time.Time) {
	at, ok := g.core.NextTick(now)
	if !ok {
		if g.tick != nil {
			g.tick.Stop()
			g.tick = nil
		}
		// No tick due: a limiter at rest stays so until the next call,
		// which the host's collector need not wait for.
		if g.atRest(now) {
			g.act.CollectSoon()
		}
		return
	}
	if g.tick != nil {
		if at.Equal(g.tickAt) {
			return
		}
		g.tick.Stop()
	}
	g.tickAt = at
	g.tick = g.act.AfterFunc(max(at.Sub(now), 0), g.onTick)
}

// tickNow is the replenishment tick.
func (g *grain[O, P, R]) tickNow() {
	g.tick = nil
	now := g.act.Now()
	if at, ok := g.core.NextTick(now); ok && !at.After(now) {
		g.core.Tick(now)
		g.act.MarkDirty()
	}
	g.settle(now)
}

// leaseReply is the reply for a lease the core returned. A concurrency
// lease that holds permits is kept until released, and names the grain the
// release must go to; every other lease is dropped at once and marked
// release-optional, and names no grain: nobody needs to reach it about
// the lease, and leaving the name out saves encoding and decoding it on
// every time-based acquisition.
func (g *grain[O, P, R]) leaseReply(l limiter.Lease, refundable bool, now time.Time) *pb.LeaseMetadata {
	if !l.Acquired() {
		return g.rejectedReply(l, now)
	}
	g.counters.granted.Add(1)
	md := &pb.LeaseMetadata{Acquired: true, LeaseId: g.newLeaseID()}
	if g.releaser != nil && l.Permits() > 0 {
		g.holdLease(md.LeaseId, l.Permits(), now.Add(g.ttl))
		if g.wireID == nil {
			id := g.act.ID()
			g.wireID = &pb.GrainId{Type: id.Type, Key: id.Key}
		}
		md.GrainId = g.wireID // where the release must go
		md.TtlNanos = int64(g.ttl)
	} else {
		md.ReleaseOptional = true
		if refundable && g.refunder != nil && l.Permits() > 0 {
			g.keepRefund(md.LeaseId, l, now)
		}
	}
	g.describe(md, now)
	return md
}

// describe tells the caller what the limiter has left after the decision,
// and when it comes back in full when the algorithm can say, so that a
// caller that reports them (Envoy's limit_remaining and
// duration_until_reset, RateLimit headers) needs no second call.
func (g *grain[O, P, R]) describe(md *pb.LeaseMetadata, now time.Time) {
	if st, err := g.core.Statistics(); err == nil {
		md.Remaining, md.HasRemaining = st.AvailablePermits, true
	}
	if g.alg.resetIn != nil {
		md.ResetInNanos = int64(g.alg.resetIn(g.core, now))
	}
}

// Metadata shared by the replies that carry it; replies only read it.
var (
	queueLimitMetadata  = []*pb.MetadataEntry{{Name: contract.MetadataReasonPhrase, Value: contract.ReasonQueueLimitReached}}
	notAcquiredMetadata = []*pb.MetadataEntry{{Name: contract.MetadataReasonPhrase, Value: contract.ReasonLeaseNotAcquired}}
)

// rejectedReply carries a failed lease's metadata: RETRY_AFTER for the
// time-based limiters, the reason for a full concurrency queue.
func (g *grain[O, P, R]) rejectedReply(l limiter.Lease, now time.Time) *pb.LeaseMetadata {
	g.counters.rejected.Add(1)
	md := &pb.LeaseMetadata{ReleaseOptional: true}
	if d, ok := l.RetryAfter(); ok {
		md.Metadata = []*pb.MetadataEntry{{Name: contract.MetadataRetryAfter, Value: d.String()}}
	} else if _, ok := l.ReasonPhrase(); ok {
		md.Metadata = queueLimitMetadata
	}
	g.describe(md, now)
	return md
}

// notAcquiredReply answers a call whose budget ran out, or that the grain
// gave up on, with a rejected lease.
func (g *grain[O, P, R]) notAcquiredReply() *pb.LeaseMetadata {
	return &pb.LeaseMetadata{ReleaseOptional: true, Metadata: notAcquiredMetadata}
}

// newLeaseID returns a lease id that is not 0 and not held. A lease id is
// all it takes to release a lease, so it is drawn at random from the
// whole range, from crypto/rand: ids that counted up would let a caller
// who holds one lease release its neighbours', other callers' leases, and
// so get past the limit; random ones also keep a grain that lost
// unflushed state in a crash from repeating ids its callers still hold.
func (g *grain[O, P, R]) newLeaseID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // never fails: crypto/rand.Read panics rather than return short
		id := binary.LittleEndian.Uint64(b[:])
		_, held := g.leases[id]
		_, kept := g.refunds[id]
		if id != 0 && !held && !kept {
			return id
		}
	}
}
