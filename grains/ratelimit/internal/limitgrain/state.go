package limitgrain

import (
	"fmt"
	"slices"
	"time"

	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

// LoadState keeps the stored snapshot for OnActivate, which restores it
// once the grain has its context and clock.
func (g *grain[O, P, R]) LoadState(data []byte) error {
	s := new(pb.LimiterState)
	if err := s.MergeGranaryWire(data); err != nil {
		return fmt.Errorf("ratelimit: decode stored limiter state: %w", err)
	}
	g.saved = s
	return nil
}

// SaveState encodes the snapshot: whether the grain was configured, its
// options, permits, totals, replenishment time and segments, and the
// concurrency leases not yet released.
func (g *grain[O, P, R]) SaveState() ([]byte, error) {
	options, err := proxy.AppendMessage(nil, g.alg.toWire(g.options))
	if err != nil {
		return nil, err
	}
	st := g.core.State()
	s := &pb.LimiterState{
		Configured:                 g.configured,
		Options:                    options,
		AvailablePermits:           st.AvailablePermits,
		TotalSuccessfulLeases:      st.TotalSuccessfulLeases,
		TotalFailedLeases:          st.TotalFailedLeases,
		UpdatedAtUnixNanos:         g.act.Now().UnixNano(),
		LastReplenishmentUnixNanos: unixNanos(st.LastReplenishment),
		Segments:                   st.Segments,
	}
	if len(g.leases) > 0 {
		s.Leases = make([]*pb.LeaseRecord, 0, len(g.leases))
		for id, l := range g.leases {
			s.Leases = append(s.Leases, &pb.LeaseRecord{LeaseId: id, Permits: l.permits, ExpiresAtUnixNanos: unixNanos(l.expires)})
		}
		slices.SortFunc(s.Leases, func(a, b *pb.LeaseRecord) int { return compare(a.LeaseId, b.LeaseId) })
	}
	return s.AppendGranaryWire(nil)
}

func compare(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// restore installs the grain's limiter: the stored options when the grain
// was configured (the defaults otherwise, or when they no longer
// validate), with the stored snapshot applied by the algorithm's restore
// rules. The totals always carry over, so statistics survive
// reactivation.
func (g *grain[O, P, R]) restore(now time.Time) {
	s := g.saved
	o, configured := g.defaults, false
	if s != nil && s.Configured {
		if stored, ok := g.decodeOptions(s.Options); ok {
			o, configured = stored, true
		}
	}
	c, err := g.alg.newCore(o, now)
	if err != nil { // stored options that this build rejects
		o, configured = g.defaults, false
		if c, err = g.alg.newCore(o, now); err != nil { // defaults are validated at registration
			panic(err)
		}
	}
	g.install(o, c, now)
	g.configured = configured
	// Stored options may have come from Configure, which only the stored
	// state remembers.
	g.sticky = configured
	if s == nil {
		return
	}
	limit := g.alg.limit(o)
	saved := limiter.State{
		AvailablePermits:      s.AvailablePermits,
		TotalSuccessfulLeases: max(s.TotalSuccessfulLeases, 0),
		TotalFailedLeases:     max(s.TotalFailedLeases, 0),
		LastReplenishment:     fromUnixNanos(s.LastReplenishmentUnixNanos),
		Segments:              s.Segments,
	}
	if g.releaser != nil {
		// Each saved lease is taken again under its original id, for as
		// long as they fit the limit.
		held := int64(0)
		for _, l := range s.Leases {
			expires := fromUnixNanos(l.ExpiresAtUnixNanos)
			if expires.IsZero() { // stored before leases expired
				expires = now.Add(g.ttl)
			}
			if l.LeaseId == 0 || l.Permits <= 0 || l.Permits > limit-held || !expires.After(now) {
				continue
			}
			g.holdLease(l.LeaseId, l.Permits, expires)
			held += l.Permits
		}
		saved.AvailablePermits = limit - held
	}
	st := g.alg.restored(o, saved, fromUnixNanos(s.UpdatedAtUnixNanos), now)
	if err := c.Restore(now, st); err != nil {
		panic(fmt.Sprintf("ratelimit: restore rules produced an invalid state: %v", err))
	}
}

func (g *grain[O, P, R]) decodeOptions(data []byte) (O, bool) {
	p := g.alg.newWire()
	if err := proxy.UnmarshalFresh(data, p); err != nil {
		var zero O
		return zero, false
	}
	return g.alg.fromWire(p)
}

// totals starts a restored state with the saved counters.
func totals(saved limiter.State) limiter.State {
	return limiter.State{TotalSuccessfulLeases: saved.TotalSuccessfulLeases, TotalFailedLeases: saved.TotalFailedLeases}
}

func clampPermits(n, limit int64) int64 { return min(max(n, 0), limit) }

// restoreConcurrency keeps the permits of the leases taken again.
func restoreConcurrency(o limiter.ConcurrencyOptions, saved limiter.State, _, _ time.Time) limiter.State {
	st := totals(saved)
	st.AvailablePermits = clampPermits(saved.AvailablePermits, o.PermitLimit)
	return st
}

// restoreWindow is the fixed and sliding windows' rule: the full limit
// once a whole window has passed since the snapshot under automatic
// replenishment, else the saved count clamped to the limit, with the
// saved replenishment time (so that a window that ended meanwhile is
// replenished by the first tick, due at once).
func restoreWindow(limit int64, window time.Duration, manual bool, saved limiter.State, updatedAt, now time.Time) limiter.State {
	st := totals(saved)
	if !manual && now.Sub(updatedAt) >= window {
		st.AvailablePermits = limit
		return st
	}
	st.AvailablePermits = clampPermits(saved.AvailablePermits, limit)
	st.LastReplenishment = saved.LastReplenishment
	return st
}

func restoreFixedWindow(o limiter.FixedWindowOptions, saved limiter.State, updatedAt, now time.Time) limiter.State {
	return restoreWindow(o.PermitLimit, o.Window, o.ManualReplenishment, saved, updatedAt, now)
}

// restoreSlidingWindow applies the window rule and keeps the saved
// segments when they account for the missing permits; otherwise the
// missing permits are charged to the current segment, so they come back
// no sooner than a whole window later.
func restoreSlidingWindow(o limiter.SlidingWindowOptions, saved limiter.State, updatedAt, now time.Time) limiter.State {
	st := restoreWindow(o.PermitLimit, o.Window, o.ManualReplenishment, saved, updatedAt, now)
	missing := o.PermitLimit - st.AvailablePermits
	if len(saved.Segments) == int(o.SegmentsPerWindow) && missing > 0 && sum(saved.Segments) == missing && !slices.ContainsFunc(saved.Segments, func(n int64) bool { return n < 0 }) {
		st.Segments = slices.Clone(saved.Segments)
		return st
	}
	st.Segments = make([]int64, o.SegmentsPerWindow)
	st.Segments[len(st.Segments)-1] = missing
	return st
}

func sum(ns []int64) int64 {
	var s int64
	for _, n := range ns {
		if n < 0 || s > 1<<62 {
			return -1
		}
		s += n
	}
	return s
}

// restoreTokenBucket is the bucket's rule: under automatic replenishment
// the saved tokens plus TokensPerPeriod for every whole period since the
// snapshot, capped at the limit without overflowing; the saved count when
// replenishment is manual or the clock went backwards. The tick schedule
// restarts at the last period boundary counted.
func restoreTokenBucket(o limiter.TokenBucketOptions, saved limiter.State, updatedAt, now time.Time) limiter.State {
	st := totals(saved)
	st.AvailablePermits = clampPermits(saved.AvailablePermits, o.TokenLimit)
	st.LastReplenishment = saved.LastReplenishment
	elapsed := now.Sub(updatedAt)
	if o.ManualReplenishment || updatedAt.IsZero() || elapsed < 0 {
		return st
	}
	periods := int64(elapsed / o.ReplenishmentPeriod)
	if missing := o.TokenLimit - st.AvailablePermits; periods > missing/o.TokensPerPeriod {
		st.AvailablePermits = o.TokenLimit
		st.LastReplenishment = time.Time{}
		return st
	}
	st.AvailablePermits += periods * o.TokensPerPeriod
	st.LastReplenishment = updatedAt.Add(time.Duration(periods) * o.ReplenishmentPeriod)
	return st
}
