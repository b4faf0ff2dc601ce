package limiter

import "time"

// Refunds give a time-based lease's permits back when its holder did not
// use them, as a decision over several limits does when another limit
// refused: the permits go back where they were charged, and only while
// that place still exists, so a refund never grants more than the limit
// would have without the lease. Each algorithm's rule:
//
//   - fixed window: back into the window the lease was granted in, and
//     only while that window lasts; once a new window began, the lease's
//     permits were replenished with it and nothing is refunded;
//   - sliding window: back into the segment the lease was charged to,
//     while that segment is still in the window, and no more than the
//     segment still holds; once it slid out, its permits came back by
//     themselves and nothing is refunded;
//   - token bucket: the tokens are added back, capped at TokenLimit: a
//     bucket that refilled meanwhile keeps only what fits (the refill the
//     tokens would have prevented cannot be undone).
//
// The refunded permits serve the queue, as a replenishment's do.

// refundable reports whether l is a granted, non-zero lease of this
// engine's algorithm, taken under the current options.
func (e *engine) refundable(l Lease) bool {
	return !e.closed && l.Acquired() && l.permits > 0 && l.algorithm == e.algorithm
}

// giveBack adds n refunded permits and serves the queue with them.
func (e *engine) giveBack(now time.Time, n int64) int64 {
	n = min(n, e.limit-e.available)
	if n <= 0 {
		return 0
	}
	e.available += n
	e.grant()
	e.markIdleIfFull(now)
	return n
}

// Refundable reports whether Refund would give l's permits back now: l
// is a granted lease of this limiter whose window has not ended.
func (f *FixedWindow) Refundable(l Lease) bool {
	return f.e.refundable(l) && l.window == f.e.windows
}

// Refund gives back the permits of l, a lease this limiter granted, if
// the window it was granted in is still the current one, and returns how
// many it gave back: l's permits, or 0 when the window ended, l holds
// nothing, or the limiter is closed. A lease must be refunded at most
// once; the driver keeps track.
func (f *FixedWindow) Refund(now time.Time, l Lease) int64 {
	if !f.Refundable(l) {
		return 0
	}
	return f.e.giveBack(now, l.permits)
}

// Refundable reports whether Refund would give any of l's permits back
// now: l is a granted lease of this limiter whose segment is still in
// the window.
func (s *SlidingWindow) Refundable(l Lease) bool {
	return s.e.refundable(l) && s.e.windows-l.window < uint64(len(s.e.segments))
}

// Refund gives back the permits of l, a lease this limiter granted, into
// the segment they were charged to, if that segment is still in the
// window, and returns how many it gave back: at most what the segment
// still holds, 0 once it slid out, for a lease that holds nothing, or
// after Close. A lease must be refunded at most once; the driver keeps
// track.
func (s *SlidingWindow) Refund(now time.Time, l Lease) int64 {
	if !s.Refundable(l) {
		return 0
	}
	e := &s.e
	n := uint64(len(e.segments))
	back := int((e.windows - l.window) % n)
	i := (e.current - back + len(e.segments)) % len(e.segments)
	r := min(l.permits, e.segments[i])
	e.segments[i] -= r
	return e.giveBack(now, r)
}

// Refundable reports whether l is a granted lease of this bucket that
// holds tokens: a bucket takes refunds whenever they come.
func (t *TokenBucket) Refundable(l Lease) bool { return t.e.refundable(l) }

// Refund adds l's tokens back, capped at TokenLimit, and returns how many
// it added: fewer than l's when the bucket refilled meanwhile, 0 for a
// lease that holds nothing or after Close. A lease must be refunded at
// most once; the driver keeps track.
func (t *TokenBucket) Refund(now time.Time, l Lease) int64 {
	if !t.Refundable(l) {
		return 0
	}
	e := &t.e
	r := min(l.permits, e.limit-e.available)
	if r <= 0 {
		return 0
	}
	t.addWhole(r)
	e.grant()
	e.markIdleIfFull(now)
	return r
}
