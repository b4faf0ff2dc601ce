package limiter

import "time"

// SlidingWindow grants up to PermitLimit permits within any window of
// SegmentsPerWindow consecutive segments. Every grant is charged to the
// current segment; each replenishment slides the window by one segment and
// frees the permits charged to the segment that falls out. A permit
// therefore comes back exactly SegmentsPerWindow slides after it was taken,
// and A plus the segments' charges always equals PermitLimit.
//
// A SlidingWindow is not safe for concurrent use: one driver calls it at a
// time. With automatic replenishment the driver calls Tick at the times
// NextTick reports.
type SlidingWindow struct {
	e    engine
	opts SlidingWindowOptions
}

// NewSlidingWindow returns a sliding-window limiter with all permits free,
// idle since now. It returns an [*OptionsError] when opts are invalid.
func NewSlidingWindow(opts SlidingWindowOptions, now time.Time) (*SlidingWindow, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &SlidingWindow{opts: opts}
	s.e.init(algorithmSlidingWindow, opts.PermitLimit, opts.QueueLimit, opts.QueueOrder, now)
	s.e.initSchedule(segmentPeriod(opts.Window, opts.SegmentsPerWindow), opts.ManualReplenishment, now)
	s.e.segments = make([]int64, opts.SegmentsPerWindow)
	return s, nil
}

// segmentPeriod is Window / SegmentsPerWindow truncated to whole 100 ns
// ticks, as .NET computes it (Window.Ticks / SegmentsPerWindow), so that
// the slide check, the tick schedule and RETRY_AFTER agree with .NET when
// the window does not divide evenly (1 s / 3 is 333.3333 ms, not
// 333.333333 ms). For windows that divide evenly it is Window / S.
func segmentPeriod(window time.Duration, segments int64) time.Duration {
	const tick = 100 * time.Nanosecond
	return time.Duration(int64(window/tick)/segments) * tick
}

// Options returns the options the limiter was created with.
func (s *SlidingWindow) Options() SlidingWindowOptions { return s.opts }

// ReplenishmentPeriod returns the length of a segment, Window divided by
// SegmentsPerWindow in whole 100 ns ticks (the .NET TimeSpan resolution).
func (s *SlidingWindow) ReplenishmentPeriod() time.Duration { return s.e.period }

// AttemptAcquire takes n permits if they are free and no OldestFirst waiter
// is ahead; it never queues. A failed lease carries RETRY_AFTER, the time
// until enough segments slide out to cover the shortfall.
func (s *SlidingWindow) AttemptAcquire(now time.Time, n int64) (Lease, error) {
	return s.e.attemptAcquire(now, n)
}

// Acquire takes n permits at once when AttemptAcquire would, and otherwise
// queues the request and returns its waiter (with a zero Lease). When the
// queue has no room it returns a failed lease with RETRY_AFTER instead;
// under NewestFirst it first evicts the oldest waiters when that makes room.
func (s *SlidingWindow) Acquire(now time.Time, n int64) (Lease, *Waiter, error) {
	return s.e.acquire(now, n)
}

// Tick is one automatic replenishment: it slides the window by exactly one
// segment, without checking how much time has passed, and grants waiters
// that fit. It does nothing with manual replenishment or after Close.
func (s *SlidingWindow) Tick(now time.Time) {
	if s.e.closed || !s.e.auto {
		return
	}
	s.replenish(now, false)
	s.e.advanceSchedule(now)
}

// TryReplenish is manual replenishment. With automatic replenishment it
// returns false and does nothing. Otherwise it returns true and slides one
// segment if at least a segment's length has passed since the last slide
// (after Close it does nothing). However long the gap, one call slides one
// segment.
func (s *SlidingWindow) TryReplenish(now time.Time) bool {
	if s.e.auto {
		return false
	}
	if !s.e.closed {
		s.replenish(now, true)
	}
	return true
}

func (s *SlidingWindow) replenish(now time.Time, manual bool) {
	e := &s.e
	if manual && now.Sub(e.last) < e.period {
		return
	}
	e.last = now
	e.windows++
	e.current = (e.current + 1) % len(e.segments)
	freed := e.segments[e.current]
	e.segments[e.current] = 0
	if freed == 0 {
		return
	}
	e.available += freed
	e.grant()
	e.markIdleIfFull(now)
}

// NextTick returns when the driver should next call Tick, and false when no
// tick is needed: with manual replenishment, after Close, or while all
// permits are free. The time may be in the past; tick at once then.
func (s *SlidingWindow) NextTick(now time.Time) (time.Time, bool) { return s.e.nextTickAt() }

// Cancel removes a pending waiter: its permits leave the queue count and it
// completes as cancelled. It reports false, and does nothing, when the
// waiter is not pending on this limiter.
func (s *SlidingWindow) Cancel(now time.Time, w *Waiter) bool { return s.e.cancel(w) }

// Close completes every pending waiter as closed, in processing order, with
// a failed lease. Later acquisitions and Statistics return ErrClosed.
// Closing twice does nothing.
func (s *SlidingWindow) Close(now time.Time) { s.e.close() }

// Statistics returns a snapshot of the counters, or ErrClosed.
func (s *SlidingWindow) Statistics() (Statistics, error) { return s.e.statistics() }

// IdleDuration returns how long the limiter has been idle, or false while it
// is in use. An immediate non-zero acquisition makes it busy; a slide that
// frees permits and leaves all of them free makes it idle again.
func (s *SlidingWindow) IdleDuration(now time.Time) (time.Duration, bool) {
	return s.e.idleDuration(now)
}

// SetCompletionHandler sets h to be called, synchronously, once for every
// waiter that completes, whatever the outcome, during whichever call
// completes it. h must not call the limiter. A nil h turns notification off.
func (s *SlidingWindow) SetCompletionHandler(h func(*Waiter)) { s.e.notify = h }
