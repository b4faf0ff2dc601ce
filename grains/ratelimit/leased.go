package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"

	"github.com/granary-go/granary/grains/ratelimit/internal/contract"
	"github.com/granary-go/granary/grains/ratelimit/internal/quota"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

// DefaultLeaseMinRate is the demand, in permits asked for per second by
// one holder, from which a leased holder answers from slices unless
// LeaseOptions say otherwise.
const DefaultLeaseMinRate = 200

// LeaseOptions turn on leased quota for a holder of a time-based limiter
// (docs/ratelimit.md, "Leased quota"): while the holder's demand is high,
// it answers acquisitions from a slice of the limiter's quota, locally,
// with no call.
type LeaseOptions struct {
	// MinRate is the demand, in permits asked for per second by this
	// holder, from which it leases; below half of it, every acquisition
	// is a call again. Zero means DefaultLeaseMinRate.
	MinRate int64
}

// Leased returns a holder of the same limiter, with the same bound
// options, that answers acquisitions from leased quota while its demand
// is at least o.MinRate: it holds a slice of the limiter's quota, sized
// by fair share among the limiter's leased holders, charged by the grain
// at once and good until the end of the window (fixed window), segment
// (sliding window) or period (token bucket) it was charged in, and asks
// for the next slice before this one runs out. The algorithm's bound
// holds over the grants of every holder together, with no overshoot; the
// costs are in fairness and freshness, as docs/ratelimit.md says.
//
// A cold key, a limiter whose acquisitions wait in its queue or that
// replenishes manually, and a concurrency limiter (for which Leased
// returns a holder that leases nothing) keep exact per-call semantics,
// and so do AcquireAndCheckConfiguration and decisions over many limits.
// While leasing, an Acquire the slice cannot cover and a limiter with a
// queue could grant later goes to the grain, where it may wait; an
// acquisition the exhausted interval cannot grant is rejected locally,
// with RETRY_AFTER the time left until the holder asks for the next
// interval's slice. Leases answered locally are release-optional and have
// ID 0.
//
// Close the holder when done with it, to give back what is left of its
// slice.
func (h *Holder[O]) Leased(o LeaseOptions) *Holder[O] {
	c := *h
	c.leased = nil
	if h.kind.methods.leaseQuota != nil {
		c.leased = newLeasedQuota(h, o)
	}
	return &c
}

// Close gives back what is left of the holder's slice and waits for its
// slice requests on their way (within ctx); from then on every
// acquisition is a call. A holder without leased quota has nothing to
// close. Close is safe to call twice.
func (h *Holder[O]) Close(ctx context.Context) error {
	if h.leased == nil {
		return nil
	}
	return h.leased.close(ctx, h.grain)
}

// leasedQuota is the shell around a holder's quota.Holder: a mutex, the
// wall clock, and the calls the core asks for.
type leasedQuota struct {
	mu struct {
		sync.Mutex
		core *quota.Holder
		// ready is closed when the slice request on its way is answered.
		ready  chan struct{}
		closed bool
		// rejected is the last local rejection, shared by the rejections
		// with the same RETRY_AFTER (whole milliseconds): an exhausted hot
		// key rejects at the holder's speed, and would otherwise allocate
		// a lease and its text for each.
		rejected      *Lease
		rejectedAfter time.Duration
	}
	calls sync.WaitGroup // slice requests and returns on their way

	opts    LeaseOptions
	methods methodSet
	options []byte // the holder's bound options, encoded, for the grain's check
	granted *Lease // every local grant: immutable, so that one serves all
	// afterWait is granted's twin for the grants that waited for a slice,
	// so that tests and benchmarks tell answers with no wait apart.
	afterWait *Lease
	holderID  uint64
}

func newLeasedQuota[O Options](h *Holder[O], o LeaseOptions) *leasedQuota {
	if o.MinRate <= 0 {
		o.MinRate = DefaultLeaseMinRate
	}
	var options []byte
	if h.hasBound && h.boundErr == nil {
		options, _ = proxy.AppendMessage(nil, h.boundP) // encoded by AppendMessage once already
	}
	return leasing(h.grain, h.kind.methods, o, options)
}

// forKey is a fresh leasedQuota with the same options, for the holder of
// another key.
func (q *leasedQuota) forKey(g *grainRef) *leasedQuota {
	return leasing(g, q.methods, q.opts, q.options)
}

func leasing(g *grainRef, methods methodSet, o LeaseOptions, options []byte) *leasedQuota {
	q := &leasedQuota{opts: o, methods: methods, options: options, holderID: randomID()}
	q.granted, q.afterWait = &Lease{grain: g}, &Lease{grain: g}
	q.granted.md.Acquired, q.granted.md.ReleaseOptional = true, true
	q.afterWait.md.Acquired, q.afterWait.md.ReleaseOptional = true, true
	q.mu.core = quota.NewHolder(q.holderID, quota.Options{MinRate: o.MinRate})
	return q
}

func randomID() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// acquire answers an acquisition of n permits from the slice when the core
// says so; handled false sends it to the grain, per call.
func (q *leasedQuota) acquire(ctx context.Context, g *grainRef, n int64, try bool) (l *Lease, handled bool, err error) {
	waited := false
	for {
		q.mu.Lock()
		if q.mu.closed {
			q.mu.Unlock()
			return nil, false, nil
		}
		now := time.Now()
		answer, retryAfter := q.mu.core.Take(now, n, try, waited)
		if r, send := q.mu.core.Refill(now, n); send {
			q.mu.ready = make(chan struct{})
			q.calls.Add(1)
			go q.refill(g, r, q.mu.ready)
		}
		if id, unused, ok := q.mu.core.Unused(now, false); ok {
			q.calls.Add(1)
			go q.giveBack(g, id, unused)
		}
		ready := q.mu.ready
		var rejected *Lease
		if answer == quota.Rejected {
			rejected = q.rejectedLocked(g, retryAfter)
		}
		q.mu.Unlock()
		switch answer {
		case quota.Granted:
			if waited {
				return q.afterWait, true, nil
			}
			return q.granted, true, nil
		case quota.Rejected:
			return rejected, true, nil
		case quota.Wait:
			if ready == nil {
				return nil, false, nil
			}
			select {
			case <-ready:
			case <-ctx.Done():
				return nil, true, ctx.Err()
			}
			waited = true
		default:
			return nil, false, nil
		}
	}
}

// rejectedLocked returns the local rejection for retryAfter, rounded up to
// whole milliseconds so that a retry never comes early.
func (q *leasedQuota) rejectedLocked(g *grainRef, retryAfter time.Duration) *Lease {
	d := (retryAfter + time.Millisecond - 1).Truncate(time.Millisecond)
	if q.mu.rejected == nil || q.mu.rejectedAfter != d {
		q.mu.rejected, q.mu.rejectedAfter = exhaustedLease(g, d), d
	}
	return q.mu.rejected
}

// exhaustedLease is a local rejection: the interval's quota is gone until
// retryAfter, when the holder asks for the next interval's slice.
func exhaustedLease(g *grainRef, retryAfter time.Duration) *Lease {
	l := &Lease{grain: g}
	l.md.ReleaseOptional = true
	l.md.Metadata = []*pb.MetadataEntry{{Name: contract.MetadataRetryAfter, Value: retryAfter.String()}}
	return l
}

// refill asks the grain for a slice, and hands the answer to the core.
func (q *leasedQuota) refill(g *grainRef, r quota.Request, ready chan struct{}) {
	defer q.calls.Done()
	ctx, cancel := context.WithTimeout(context.Background(), g.ref.Caller().ResponseTimeout())
	defer cancel()
	out := new(pb.QuotaReply)
	err := g.ref.Invoke(ctx, q.methods.leaseQuota, &pb.QuotaRequest{Holder: r.Holder, Rate: r.Rate, Need: r.Need, Options: q.options}, out)
	now := time.Now()
	q.mu.Lock()
	if err != nil {
		q.mu.core.Failed(now)
	} else {
		q.mu.core.Sliced(now, quota.Slice{
			ID: out.SliceId, Permits: out.Permits, ExpiresIn: time.Duration(out.ExpiresInNanos),
			Interval: time.Duration(out.IntervalNanos), IntervalID: out.IntervalEndUnixNanos,
			Exhausted: out.Exhausted, Queues: out.Queues, Exact: out.Exact,
		})
	}
	if q.mu.ready == ready {
		q.mu.ready = nil
	}
	q.mu.Unlock()
	close(ready)
}

// giveBack returns the unused permits of a slice; a return that fails
// leaves them to lapse with their interval.
func (q *leasedQuota) giveBack(g *grainRef, id uint64, unused int64) {
	defer q.calls.Done()
	ctx, cancel := context.WithTimeout(context.Background(), g.ref.Caller().ResponseTimeout())
	defer cancel()
	q.returnQuota(ctx, g, id, unused)
}

func (q *leasedQuota) returnQuota(ctx context.Context, g *grainRef, id uint64, unused int64) {
	_ = g.ref.Invoke(ctx, q.methods.returnQuota, &pb.ReturnQuotaRequest{Holder: q.holderID, SliceId: id, Unused: unused}, new(pb.ReturnQuotaReply))
}

func (q *leasedQuota) close(ctx context.Context, g *grainRef) error {
	q.mu.Lock()
	if q.mu.closed {
		q.mu.Unlock()
		return nil
	}
	q.mu.closed = true
	id, unused, give := q.mu.core.Unused(time.Now(), true)
	q.mu.Unlock()
	if give {
		q.returnQuota(ctx, g, id, unused)
	}
	done := make(chan struct{})
	go func() {
		q.calls.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stats returns the core's counters and interval grants, for tests and
// benchmarks.
func (q *leasedQuota) stats() (quota.Stats, []quota.IntervalCount) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.core.Stats(), q.mu.core.Intervals()
}
