package limiter

import "time"

// FixedWindow grants up to PermitLimit permits per window. Each replenishment
// resets the available permits to the limit; unused permits do not carry
// over, and leases need no release.
//
// A FixedWindow is not safe for concurrent use: one driver calls it at a
// time. With automatic replenishment the driver calls Tick at the times
// NextTick reports.
type FixedWindow struct {
	e    engine
	opts FixedWindowOptions
}

// NewFixedWindow returns a fixed-window limiter with all permits free, idle
// since now, whose first window starts at now. It returns an
// [*OptionsError] when opts are invalid.
func NewFixedWindow(opts FixedWindowOptions, now time.Time) (*FixedWindow, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	f := &FixedWindow{opts: opts}
	f.e.init(algorithmFixedWindow, opts.PermitLimit, opts.QueueLimit, opts.QueueOrder, now)
	f.e.initSchedule(opts.Window, opts.ManualReplenishment, now)
	return f, nil
}

// Options returns the options the limiter was created with.
func (f *FixedWindow) Options() FixedWindowOptions { return f.opts }

// ReplenishmentPeriod returns the Window.
func (f *FixedWindow) ReplenishmentPeriod() time.Duration { return f.e.period }

// AttemptAcquire takes n permits if they are free and no OldestFirst waiter
// is ahead; it never queues. A failed lease carries RETRY_AFTER, the time
// left in the current window.
func (f *FixedWindow) AttemptAcquire(now time.Time, n int64) (Lease, error) {
	return f.e.attemptAcquire(now, n)
}

// Acquire takes n permits at once when AttemptAcquire would, and otherwise
// queues the request and returns its waiter (with a zero Lease). When the
// queue has no room it returns a failed lease with RETRY_AFTER instead;
// under NewestFirst it first evicts the oldest waiters when that makes room.
func (f *FixedWindow) Acquire(now time.Time, n int64) (Lease, *Waiter, error) {
	return f.e.acquire(now, n)
}

// Tick is one automatic replenishment: it starts a new window at now without
// checking how much time has passed (the schedule is trusted) and grants
// waiters that fit. It does nothing with manual replenishment or after
// Close.
func (f *FixedWindow) Tick(now time.Time) {
	if f.e.closed || !f.e.auto {
		return
	}
	f.replenish(now, false)
	f.e.advanceSchedule(now)
}

// TryReplenish is manual replenishment. With automatic replenishment it
// returns false and does nothing. Otherwise it returns true and starts a new
// window if at least Window has passed since the last one began (after
// Close it does nothing).
func (f *FixedWindow) TryReplenish(now time.Time) bool {
	if f.e.auto {
		return false
	}
	if !f.e.closed {
		f.replenish(now, true)
	}
	return true
}

func (f *FixedWindow) replenish(now time.Time, manual bool) {
	e := &f.e
	if manual && now.Sub(e.last) < e.period {
		return
	}
	e.last = now
	e.windows++
	if e.available >= e.limit {
		return
	}
	e.available = e.limit
	e.grant()
	e.markIdleIfFull(now)
}

// NextTick returns when the driver should next call Tick, and false when no
// tick is needed: with manual replenishment, after Close, or while all
// permits are free. The time may be in the past; tick at once then.
func (f *FixedWindow) NextTick(now time.Time) (time.Time, bool) { return f.e.nextTickAt() }

// Cancel removes a pending waiter: its permits leave the queue count and it
// completes as cancelled. It reports false, and does nothing, when the
// waiter is not pending on this limiter.
func (f *FixedWindow) Cancel(now time.Time, w *Waiter) bool { return f.e.cancel(w) }

// Close completes every pending waiter as closed, in processing order, with
// a failed lease. Later acquisitions and Statistics return ErrClosed.
// Closing twice does nothing.
func (f *FixedWindow) Close(now time.Time) { f.e.close() }

// Statistics returns a snapshot of the counters, or ErrClosed.
func (f *FixedWindow) Statistics() (Statistics, error) { return f.e.statistics() }

// IdleDuration returns how long the limiter has been idle, or false while it
// is in use. An immediate non-zero acquisition makes it busy; a replenishment
// that leaves all permits free makes it idle again.
func (f *FixedWindow) IdleDuration(now time.Time) (time.Duration, bool) {
	return f.e.idleDuration(now)
}

// SetCompletionHandler sets h to be called, synchronously, once for every
// waiter that completes, whatever the outcome, during whichever call
// completes it. h must not call the limiter. A nil h turns notification off.
func (f *FixedWindow) SetCompletionHandler(h func(*Waiter)) { f.e.notify = h }
