package limitgrain

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/granary-go/granary/grains/ratelimit/internal/quota"
	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
)

// Leased quota, the grain's side (internal/quota states the contract and
// its bound): a slice is one grant of the algorithm, charged at once and
// stored before the answer leaves, which its holder may use until the end
// of the replenishment interval it was charged in. Only time-based
// limiters with automatic replenishment and nothing waiting lease: a
// manual replenishment may come at any time, and a slice handed out while
// acquisitions wait would pass them in the queue.

// intervaler is implemented by the time-based limiters.
type intervaler interface {
	IntervalEnd(now time.Time) (time.Time, bool)
	ReplenishmentPeriod() time.Duration
}

// maxSlices bounds the slices a grain remembers for returns; past it a
// slice is still handed out, but its return gives nothing back.
const maxSlices = 4096

// leasing is a grain's leased quota: the fair-share allocator and the
// slices handed out in intervals that have not ended, by slice id.
type leasing struct {
	alloc   quota.Allocator
	slices  map[uint64]issuedSlice
	pruneAt int
}

// issuedSlice is what a return of a slice needs.
type issuedSlice struct {
	holder   uint64
	lease    limiter.Lease
	interval quota.Interval
}

// reset forgets the slices and claims of a limiter being replaced: its
// leases mean nothing to the next one.
func (q *leasing) reset() {
	q.alloc.Reset()
	q.slices = nil
	q.pruneAt = 0
}

// remember keeps s for its return, dropping the slices whose intervals
// ended each time the map doubles.
func (q *leasing) remember(id uint64, s issuedSlice, now time.Time) {
	if q.slices == nil {
		q.slices = make(map[uint64]issuedSlice)
	}
	if len(q.slices) >= q.pruneAt {
		for id, old := range q.slices {
			if !now.Before(old.interval.End) {
				delete(q.slices, id)
			}
		}
		q.pruneAt = max(2*len(q.slices), 64)
	}
	if len(q.slices) < maxSlices {
		q.slices[id] = s
	}
}

// newSliceID returns a random slice id, not 0 and not in use: a slice id
// is all it takes to return a slice, so it must not be guessable.
func (q *leasing) newSliceID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		id := binary.LittleEndian.Uint64(b[:])
		if _, used := q.slices[id]; id != 0 && !used {
			return id
		}
	}
}

// exactReply tells a holder to acquire per call.
var exactReply = &pb.QuotaReply{Exact: true}

// LeaseQuota hands the holder a slice of the current interval: its fair
// share of the free permits, charged to the algorithm as one grant. The
// holder's bound options, when it sends them, are installed first when
// they differ, as AcquireAndCheckConfiguration does, and need the same
// right of the caller to change them. The state is stored
// before the answer, so that an activation after a crash or a move counts
// the slice; when the store fails, the slice is refunded and the holder
// told to acquire per call. While acquisitions wait, nothing changes and
// the holder is told to acquire per call.
func (g *grain[O, P, R]) LeaseQuota(ctx context.Context, in *pb.QuotaRequest) (*pb.QuotaReply, error) {
	if !g.idle() {
		return exactReply, nil
	}
	now := g.act.Now()
	if len(in.Options) > 0 {
		// The holder's bound options win, as in AcquireAndCheckConfiguration.
		o, ok := g.decodeOptions(in.Options)
		if !ok {
			return nil, errNoOptions
		}
		if o != g.options {
			if err := mayChangeOptions(ctx); err != nil {
				return nil, err
			}
			trial, err := g.trial(o, 0, now)
			if err != nil {
				return nil, err
			}
			g.reconfigure(o, trial, now, false)
		}
	}
	iv, ok := g.core.(intervaler)
	if !ok || g.refunder == nil {
		return exactReply, nil
	}
	if at, due := g.core.NextTick(now); due && !at.After(now) {
		// An overdue tick ends the interval first: a slice charged to
		// the old one would expire at once.
		g.core.Tick(now)
		g.act.MarkDirty()
	}
	end, ok := iv.IntervalEnd(now)
	if !ok {
		return exactReply, nil
	}
	st, err := g.core.Statistics()
	if err != nil {
		return nil, err
	}
	interval := quota.Interval{End: end, Length: iv.ReplenishmentPeriod()}
	reply := &pb.QuotaReply{
		ExpiresInNanos:       int64(end.Sub(now)),
		IntervalNanos:        int64(interval.Length),
		IntervalEndUnixNanos: end.UnixNano(),
		Queues:               g.queueLimit() > 0,
	}
	if g.quota == nil {
		g.quota = new(leasing)
	}
	n := g.quota.alloc.Size(now, interval, quota.Request{Holder: in.Holder, Rate: max(in.Rate, 0), Need: max(in.Need, 0)}, st.AvailablePermits)
	if n > 0 {
		lease, err := g.core.AttemptAcquire(now, n)
		if err != nil || !lease.Acquired() { // nothing waits and n <= A: not expected
			reply.Exhausted = st.AvailablePermits == 0
			return reply, nil
		}
		g.act.MarkDirty()
		ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
		err = g.act.WriteState(ctx)
		cancel()
		if err != nil {
			g.refunder.Refund(now, lease)
			g.rearm(now)
			return exactReply, nil
		}
		reply.SliceId = g.quota.newSliceID()
		reply.Permits = n
		g.quota.remember(reply.SliceId, issuedSlice{holder: in.Holder, lease: lease, interval: interval}, now)
		g.quota.alloc.Granted(in.Holder, interval, n)
		g.rearm(now)
	}
	reply.Exhausted = st.AvailablePermits-n <= 0
	return reply, nil
}

// ReturnQuota gives back the unused permits of a slice, once, while its
// interval lasts: they go back where the slice was charged, by the
// algorithm's refund rule, and serve the queue.
func (g *grain[O, P, R]) ReturnQuota(_ context.Context, in *pb.ReturnQuotaRequest) (*pb.ReturnQuotaReply, error) {
	if g.quota == nil {
		return &pb.ReturnQuotaReply{}, nil
	}
	s, ok := g.quota.slices[in.SliceId]
	if !ok || s.holder != in.Holder || g.refunder == nil {
		return &pb.ReturnQuotaReply{}, nil
	}
	delete(g.quota.slices, in.SliceId)
	now := g.act.Now()
	if !now.Before(s.interval.End) || in.Unused <= 0 {
		return &pb.ReturnQuotaReply{}, nil
	}
	n := g.refunder.Refund(now, s.lease.Part(in.Unused))
	if n > 0 {
		g.quota.alloc.Returned(in.Holder, s.interval, n)
		g.act.MarkDirty()
		g.settle(now)
	}
	return &pb.ReturnQuotaReply{Returned: n}, nil
}

// queueLimit is the current options' queue limit.
func (g *grain[O, P, R]) queueLimit() int64 {
	switch o := any(g.options).(type) {
	case limiter.FixedWindowOptions:
		return o.QueueLimit
	case limiter.SlidingWindowOptions:
		return o.QueueLimit
	case limiter.TokenBucketOptions:
		return o.QueueLimit
	case limiter.ConcurrencyOptions:
		return o.QueueLimit
	}
	return 0
}
