package limiter

import "time"

// Concurrency limits how many permits are held at once. Permits come back
// only when the driver releases them; there is no replenishment and no
// tick.
//
// A Concurrency is not safe for concurrent use: one driver (a grain turn, or
// the [Limiter] wrapper under its mutex) calls it at a time.
type Concurrency struct {
	e    engine
	opts ConcurrencyOptions
}

// NewConcurrency returns a concurrency limiter with all permits free, idle
// since now. It returns an [*OptionsError] when opts are invalid.
func NewConcurrency(opts ConcurrencyOptions, now time.Time) (*Concurrency, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c := &Concurrency{opts: opts}
	c.e.init(algorithmConcurrency, opts.PermitLimit, opts.QueueLimit, opts.QueueOrder, now)
	return c, nil
}

// Options returns the options the limiter was created with.
func (c *Concurrency) Options() ConcurrencyOptions { return c.opts }

// AttemptAcquire takes n permits if they are free and no OldestFirst waiter
// is ahead; it never queues. A rejection is a failed lease; errors are
// reserved for bad counts and a closed limiter. A zero count succeeds when
// any permit is free and takes nothing.
func (c *Concurrency) AttemptAcquire(now time.Time, n int64) (Lease, error) {
	return c.e.attemptAcquire(now, n)
}

// Acquire takes n permits at once when AttemptAcquire would, and otherwise
// queues the request and returns its waiter (with a zero Lease). When the
// queue has no room it returns a failed lease with the reason
// "Queue limit reached" instead; under NewestFirst it first evicts the
// oldest waiters when that makes room, completing them as evicted.
func (c *Concurrency) Acquire(now time.Time, n int64) (Lease, *Waiter, error) {
	return c.e.acquire(now, n)
}

// Release returns n permits, typically a lease's Permits, and grants queued
// waiters that now fit. Releasing after Close does nothing. Releasing more
// than is held returns [ErrOverRelease] and changes nothing.
func (c *Concurrency) Release(now time.Time, n int64) error {
	e := &c.e
	switch {
	case e.closed:
		return nil
	case n < 0:
		return ErrNegativeCount
	case n > e.limit-e.available:
		return ErrOverRelease
	case n == 0:
		return nil
	}
	e.available += n
	e.grant()
	e.markIdleIfFull(now)
	return nil
}

// Cancel removes a pending waiter: its permits leave the queue count and it
// completes as cancelled. It reports false, and does nothing, when the
// waiter is not pending on this limiter.
func (c *Concurrency) Cancel(now time.Time, w *Waiter) bool { return c.e.cancel(w) }

// Tick does nothing: a concurrency limiter has no replenishment. It exists
// so that every limiter satisfies [Core].
func (c *Concurrency) Tick(now time.Time) {}

// NextTick always reports false: a concurrency limiter never needs a tick.
func (c *Concurrency) NextTick(now time.Time) (time.Time, bool) { return time.Time{}, false }

// Close completes every pending waiter as closed, in processing order, with
// a failed lease. Later acquisitions and Statistics return ErrClosed.
// Closing twice does nothing.
func (c *Concurrency) Close(now time.Time) { c.e.close() }

// Statistics returns a snapshot of the counters, or ErrClosed.
func (c *Concurrency) Statistics() (Statistics, error) { return c.e.statistics() }

// IdleDuration returns how long all permits have been free, or false while
// any permit is held. Zero-permit acquisitions do not count as use.
func (c *Concurrency) IdleDuration(now time.Time) (time.Duration, bool) {
	return c.e.idleDuration(now)
}

// SetCompletionHandler sets h to be called, synchronously, once for every
// waiter that completes, whatever the outcome, during whichever call
// completes it. h must not call the limiter. A nil h turns notification off;
// the waiter's Outcome and Lease still tell.
func (c *Concurrency) SetCompletionHandler(h func(*Waiter)) { c.e.notify = h }
