package limiter

import "time"

// Leased quota (see the grains' docs) hands a holder permits charged now
// that it answers with later, locally. A grant moved later within the
// replenishment interval it was charged in is one the limiter could have
// made at that later time: nothing replenishes inside an interval, so the
// limiter's state at the later time would have been at least as rich.
// IntervalEnd tells a driver how long such a grant may wait, and Part
// lets it refund what was not used.

// intervalEnd is the first point of the tick schedule after now: the end
// of the window (fixed), segment (sliding) or period (bucket) that holds
// now, as the schedule would have it after the catch-up an acquisition at
// now runs. Manual replenishment has no schedule: a replenishment may come
// at any time, so it reports false, as after Close.
func (e *engine) intervalEnd(now time.Time) (time.Time, bool) {
	if !e.auto || e.closed {
		return time.Time{}, false
	}
	next := e.nextTick
	for !next.After(now) {
		behind := now.Sub(next) // saturates, so this may take two rounds
		next = next.Add(behind - behind%e.period).Add(e.period)
	}
	return next, true
}

// IntervalEnd reports when the window that holds now ends, the next tick
// of the schedule: permits granted now may be used until then without
// the window granting more than its limit. It reports false under manual
// replenishment and after Close.
func (f *FixedWindow) IntervalEnd(now time.Time) (time.Time, bool) { return f.e.intervalEnd(now) }

// IntervalEnd reports when the segment that holds now ends, the next
// slide: permits charged to it may be used until then without any window
// of SegmentsPerWindow segments granting more than the limit. It reports
// false under manual replenishment and after Close.
func (s *SlidingWindow) IntervalEnd(now time.Time) (time.Time, bool) { return s.e.intervalEnd(now) }

// IntervalEnd reports when the replenishment period that holds now ends,
// the next tick: tokens taken now may be used until then, before any
// refill they could have prevented. It reports false under manual
// replenishment, whose refills may come at any time, and after Close.
func (t *TokenBucket) IntervalEnd(now time.Time) (time.Time, bool) { return t.e.intervalEnd(now) }

// Part returns l holding n of its permits (no more than it holds, and
// none for a negative n), charged where l was: the lease to refund when
// only part of l went unused.
func (l Lease) Part(n int64) Lease {
	l.permits = min(max(n, 0), l.permits)
	return l
}
