package limiter

import (
	"math/bits"
	"time"
)

// TokenBucket holds up to TokenLimit tokens and refills TokensPerPeriod
// tokens per ReplenishmentPeriod; each permit costs one token. Automatic
// replenishment adds exactly TokensPerPeriod per tick; manual replenishment
// adds tokens in proportion to the time elapsed, fractions included.
// Leases need no release.
//
// A TokenBucket is not safe for concurrent use: one driver calls it at a
// time. With automatic replenishment the driver calls Tick at the times
// NextTick reports.
type TokenBucket struct {
	e engine // holds every option too: a bucket is kept for each idle key
}

// NewTokenBucket returns a full token bucket, idle since now. It returns an
// [*OptionsError] when opts are invalid.
func NewTokenBucket(opts TokenBucketOptions, now time.Time) (*TokenBucket, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	t := &TokenBucket{}
	t.e.init(algorithmTokenBucket, opts.TokenLimit, opts.QueueLimit, opts.QueueOrder, now)
	t.e.initSchedule(opts.ReplenishmentPeriod, opts.ManualReplenishment, now)
	t.e.perPeriod = opts.TokensPerPeriod
	return t, nil
}

// Options returns the options the limiter was created with.
func (t *TokenBucket) Options() TokenBucketOptions {
	return TokenBucketOptions{
		TokenLimit:          t.e.limit,
		TokensPerPeriod:     t.e.perPeriod,
		QueueLimit:          t.e.queueLimit,
		QueueOrder:          t.e.order,
		ReplenishmentPeriod: t.e.period,
		ManualReplenishment: !t.e.auto,
	}
}

// ReplenishmentPeriod returns the ReplenishmentPeriod.
func (t *TokenBucket) ReplenishmentPeriod() time.Duration { return t.e.period }

// AttemptAcquire takes n tokens if they are there and no OldestFirst waiter
// is ahead; it never queues. A zero count succeeds when any fraction of a
// token is there. A failed lease carries RETRY_AFTER, the periods needed to
// cover the request and everything queued.
func (t *TokenBucket) AttemptAcquire(now time.Time, n int64) (Lease, error) {
	return t.e.attemptAcquire(now, n)
}

// Acquire takes n tokens at once when AttemptAcquire would, and otherwise
// queues the request and returns its waiter (with a zero Lease). When the
// queue has no room it returns a failed lease with RETRY_AFTER instead;
// under NewestFirst it first evicts the oldest waiters when that makes room.
func (t *TokenBucket) Acquire(now time.Time, n int64) (Lease, *Waiter, error) {
	return t.e.acquire(now, n)
}

// Tick is one automatic replenishment: it adds exactly TokensPerPeriod
// tokens, capped at TokenLimit, whatever time has passed, and grants waiters
// that fit. It does nothing with manual replenishment or after Close.
func (t *TokenBucket) Tick(now time.Time) {
	if t.e.closed || !t.e.auto {
		return
	}
	t.replenish(now, false)
	t.e.advanceSchedule(now)
}

// TryReplenish is manual replenishment. With automatic replenishment it
// returns false and does nothing. Otherwise it returns true and adds
// TokensPerPeriod tokens for every ReplenishmentPeriod elapsed since the
// last replenishment, pro rata, capped at TokenLimit (after Close it does
// nothing). A full bucket keeps its last replenishment time, so the first
// replenishment after a full spell may refill the whole gap.
func (t *TokenBucket) TryReplenish(now time.Time) bool {
	if t.e.auto {
		return false
	}
	if !t.e.closed {
		t.replenish(now, true)
	}
	return true
}

func (t *TokenBucket) replenish(now time.Time, manual bool) {
	e := &t.e
	if e.available == e.limit {
		return
	}
	if manual {
		t.addElapsed(elapsedSince(now, e.last))
		if now.After(e.last) {
			e.last = now
		}
	} else {
		t.addWhole(e.perPeriod)
		e.last = now
	}
	e.grant()
	e.markIdleIfFull(now)
}

func (t *TokenBucket) addWhole(n int64) {
	e := &t.e
	if n >= e.limit-e.available {
		e.available = e.limit
		e.fraction = 0
		return
	}
	e.available += n
}

// addElapsed adds TokensPerPeriod * elapsed / period tokens exactly, in
// 128-bit arithmetic, keeping the remainder as the new fraction.
func (t *TokenBucket) addElapsed(elapsed time.Duration) {
	e := &t.e
	hi, lo := bits.Mul64(uint64(e.perPeriod), uint64(elapsed))
	var carry uint64
	lo, carry = bits.Add64(lo, uint64(e.fraction), 0)
	hi += carry
	if hi >= uint64(e.period) { // the quotient needs more than 64 bits
		t.addWhole(e.limit)
		return
	}
	whole, rem := bits.Div64(hi, lo, uint64(e.period))
	if whole >= uint64(e.limit-e.available) {
		t.addWhole(e.limit)
		return
	}
	e.available += int64(whole)
	e.fraction = int64(rem)
}

// NextTick returns when the driver should next call Tick, and false when no
// tick is needed: with manual replenishment, after Close, or while the bucket
// is full. The time may be in the past; tick at once then.
func (t *TokenBucket) NextTick(now time.Time) (time.Time, bool) { return t.e.nextTickAt() }

// Cancel removes a pending waiter: its tokens leave the queue count and it
// completes as cancelled. It reports false, and does nothing, when the
// waiter is not pending on this limiter.
func (t *TokenBucket) Cancel(now time.Time, w *Waiter) bool { return t.e.cancel(w) }

// Close completes every pending waiter as closed, in processing order, with
// a failed lease. Later acquisitions and Statistics return ErrClosed.
// Closing twice does nothing.
func (t *TokenBucket) Close(now time.Time) { t.e.close() }

// Statistics returns a snapshot of the counters, or ErrClosed. The available
// count is the whole tokens; a fraction is not reported.
func (t *TokenBucket) Statistics() (Statistics, error) { return t.e.statistics() }

// IdleDuration returns how long the bucket has been idle, or false while it
// is in use. An immediate non-zero acquisition makes it busy; a refill that
// leaves it full makes it idle again.
func (t *TokenBucket) IdleDuration(now time.Time) (time.Duration, bool) {
	return t.e.idleDuration(now)
}

// SetCompletionHandler sets h to be called, synchronously, once for every
// waiter that completes, whatever the outcome, during whichever call
// completes it. h must not call the limiter. A nil h turns notification off.
func (t *TokenBucket) SetCompletionHandler(h func(*Waiter)) { t.e.notify = h }
