package limiter

import (
	"math"
	"time"
)

// engine is the state machine shared by the four algorithms: permits, the
// waiter queue, statistics, the idle mark, closing, and the tick schedule.
// The algorithm types wrap it and add their replenishment rules. All counts
// are int64 and every sum is arranged so that it cannot overflow: Q <= QL,
// A <= L, and the queue test is written as QL - Q < n.
type engine struct {
	algorithm  algorithm
	limit      int64 // L: PermitLimit or TokenLimit
	queueLimit int64 // QL
	order      QueueOrder

	available int64 // A: free permits (whole tokens for the bucket)
	queued    int64 // Q: sum of the live waiters' permits
	waiters   waiterQueue
	stale     int // cancelled waiters still in waiters, skipped when reached

	succeeded int64
	failed    int64

	idle      bool
	idleSince time.Time

	closed bool
	notify func(*Waiter)

	// Replenishing limiters only.
	auto     bool          // ticks drive replenishment
	period   time.Duration // time between ticks (a segment for the sliding window)
	last     time.Time     // last replenishment
	nextTick time.Time     // next point of the tick schedule (auto only)

	// Sliding window only: permits charged to each segment, and the index of
	// the current one. A + sum(segments) == L.
	segments []int64
	current  int

	// Token bucket only: tokens added per period, and the fractional token
	// as fraction/period tokens, with 0 <= fraction < period (nanoseconds).
	// Exact integer arithmetic keeps huge limits and long gaps precise,
	// where a float64 would round.
	perPeriod int64
	fraction  int64

	// Concurrency only: the last lease id handed out.
	lastID uint64

	// Windows and slides only: how many windows have begun (fixed) or
	// slides have happened (sliding) since the limiter was created. A
	// lease remembers the count it was charged at, so that a refund knows
	// whether its window, or segment, is still there.
	windows uint64
}

func (e *engine) init(alg algorithm, limit, queueLimit int64, order QueueOrder, now time.Time) {
	e.algorithm = alg
	e.limit = limit
	e.queueLimit = queueLimit
	e.order = order
	e.available = limit
	e.idle = true
	e.idleSince = now
	e.last = now
}

func (e *engine) initSchedule(period time.Duration, manual bool, now time.Time) {
	e.period = period
	e.auto = !manual
	if e.auto {
		e.nextTick = now.Add(period)
	}
}

// check runs the argument and closed checks, in that order.
func (e *engine) check(n int64) error {
	switch {
	case n < 0:
		return ErrNegativeCount
	case n > e.limit:
		return ErrCountExceedsLimit
	case e.closed:
		return ErrClosed
	}
	return nil
}

// tryImmediate takes n permits if they can be granted without queueing.
// A zero-permit request only needs something to be free and takes nothing.
func (e *engine) tryImmediate(now time.Time, n int64) bool {
	if n == 0 {
		return e.available > 0 || e.fraction > 0
	}
	if e.available < n || (e.queued > 0 && e.order == OldestFirst) {
		return false
	}
	if e.auto && e.available == e.limit {
		// Ticks stop while the limiter is full; resume the schedule.
		e.catchUp(now)
	}
	e.charge(n)
	e.idle = false
	return true
}

// charge removes n granted permits.
func (e *engine) charge(n int64) {
	e.available -= n
	if e.segments != nil {
		e.segments[e.current] += n
	}
}

func (e *engine) countSuccess() {
	if e.succeeded < math.MaxInt64 {
		e.succeeded++
	}
}

func (e *engine) countFailure() {
	if e.failed < math.MaxInt64 {
		e.failed++
	}
}

func (e *engine) successLease(n int64) Lease {
	l := Lease{algorithm: e.algorithm, permits: n, flags: leaseAcquired}
	if n > 0 {
		l.window = e.windows // what a refund checks; a zero-permit lease has nothing to refund
	}
	if e.algorithm == algorithmConcurrency && n > 0 {
		e.lastID++
		l.id = e.lastID
	}
	return l
}

// rejectedLease is the failed lease of an attempt or of a queue-limit
// rejection; evicted and closed waiters get a plain failed lease instead.
func (e *engine) rejectedLease(now time.Time, n int64, queueFull bool) Lease {
	l := Lease{algorithm: e.algorithm}
	switch e.algorithm {
	case algorithmConcurrency:
		if queueFull {
			l.flags |= leaseQueueLimitReached
		}
		return l
	case algorithmFixedWindow:
		l.retryAfter = max(e.period-elapsedSince(now, e.last), 0)
	case algorithmSlidingWindow:
		l.retryAfter = e.slidingRetryAfter(now, n)
	case algorithmTokenBucket:
		l.retryAfter = e.bucketRetryAfter(n)
	}
	l.flags |= leaseHasRetryAfter
	return l
}

// slidingRetryAfter finds the first future slide k whose freed segments
// cover the deficit and answers k*P - e, where e is the time since the last
// slide.
func (e *engine) slidingRetryAfter(now time.Time, n int64) time.Duration {
	s := len(e.segments)
	deficit := max(n, 1) - e.available
	k := 1
	if deficit > 0 {
		var freed int64
		for k = 1; k <= s; k++ {
			freed += e.segments[(e.current+k)%s] // sum <= L: no overflow
			if freed >= deficit {
				break
			}
		}
		k = min(k, s)
	}
	return max(time.Duration(k)*e.period-elapsedSince(now, e.last), 0)
}

// bucketRetryAfter is P * max((n - tokens + Q) div TokensPerPeriod, 1). The
// need is computed in uint64, where n + Q cannot overflow, so the answer
// stays exact at the int64 limits.
func (e *engine) bucketRetryAfter(n int64) time.Duration {
	periods := uint64(1)
	if total := uint64(n) + uint64(e.queued); total > uint64(e.available) {
		periods = max((total-uint64(e.available))/uint64(e.perPeriod), 1)
	}
	if periods > uint64(math.MaxInt64/e.period) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(periods) * e.period
}

func (e *engine) attemptAcquire(now time.Time, n int64) (Lease, error) {
	if err := e.check(n); err != nil {
		return Lease{}, err
	}
	if e.tryImmediate(now, n) {
		e.countSuccess()
		return e.successLease(n), nil
	}
	e.countFailure()
	return e.rejectedLease(now, n, false), nil
}

func (e *engine) acquire(now time.Time, n int64) (Lease, *Waiter, error) {
	if err := e.check(n); err != nil {
		return Lease{}, nil, err
	}
	if e.tryImmediate(now, n) {
		e.countSuccess()
		return e.successLease(n), nil, nil
	}
	if e.queueLimit-e.queued < n {
		if e.order == OldestFirst || n > e.queueLimit {
			e.countFailure()
			return e.rejectedLease(now, n, true), nil, nil
		}
		for e.queueLimit-e.queued < n {
			w := e.waiters.popFront()
			if w.outcome != OutcomePending {
				e.stale--
				continue
			}
			e.queued -= w.permits
			e.countFailure()
			e.complete(w, OutcomeEvicted, Lease{algorithm: e.algorithm})
		}
	}
	w := &Waiter{owner: e, permits: n}
	e.waiters.pushBack(w)
	e.queued += n
	return Lease{}, w, nil
}

// grant serves the queue in processing order after permits came back. It
// stops at the first live waiter that does not fit (head-of-line blocking).
func (e *engine) grant() {
	for e.waiters.len() > 0 {
		var w *Waiter
		if e.order == OldestFirst {
			w = e.waiters.front()
		} else {
			w = e.waiters.back()
		}
		if w.outcome == OutcomePending && e.available < w.permits {
			return
		}
		if e.order == OldestFirst {
			e.waiters.popFront()
		} else {
			e.waiters.popBack()
		}
		if w.outcome != OutcomePending {
			e.stale--
			continue
		}
		e.queued -= w.permits
		e.charge(w.permits)
		e.countSuccess()
		e.complete(w, OutcomeGranted, e.successLease(w.permits))
	}
}

// markIdleIfFull sets the idle mark after a replenishment or release that
// reached queue processing.
func (e *engine) markIdleIfFull(now time.Time) {
	if e.available == e.limit {
		e.idle = true
		e.idleSince = now
	}
}

func (e *engine) complete(w *Waiter, o Outcome, l Lease) {
	w.outcome = o
	w.lease = l
	if e.notify != nil {
		e.notify(w)
	}
}

func (e *engine) cancel(w *Waiter) bool {
	if w == nil || w.owner != e || w.outcome != OutcomePending {
		return false
	}
	e.queued -= w.permits
	e.stale++
	e.complete(w, OutcomeCanceled, Lease{algorithm: e.algorithm})
	// Cancelled waiters stay queued until reached, which keeps Cancel O(1).
	// Compact when they dominate so that a queue that is never served (all
	// permits held, callers timing out) cannot grow without bound.
	if e.stale > 32 && e.stale*2 > e.waiters.len() {
		e.waiters.removeDone()
		e.stale = 0
	}
	return true
}

func (e *engine) close() {
	if e.closed {
		return
	}
	e.closed = true
	for e.waiters.len() > 0 {
		var w *Waiter
		if e.order == OldestFirst {
			w = e.waiters.popFront()
		} else {
			w = e.waiters.popBack()
		}
		if w.outcome != OutcomePending {
			continue
		}
		e.queued -= w.permits
		e.complete(w, OutcomeClosed, Lease{algorithm: e.algorithm})
	}
	e.stale = 0
	e.waiters = waiterQueue{}
}

func (e *engine) statistics() (Statistics, error) {
	if e.closed {
		return Statistics{}, ErrClosed
	}
	return Statistics{
		AvailablePermits:      e.available,
		QueuedPermits:         e.queued,
		TotalFailedLeases:     e.failed,
		TotalSuccessfulLeases: e.succeeded,
	}, nil
}

func (e *engine) idleDuration(now time.Time) (time.Duration, bool) {
	if !e.idle {
		return 0, false
	}
	return elapsedSince(now, e.idleSince), true
}

// nextTickAt reports the next tick of the schedule while a tick could change
// anything, that is while permits are missing. A full limiter has no live
// waiters (every count is <= L), so its ticks would be no-ops.
func (e *engine) nextTickAt() (time.Time, bool) {
	if !e.auto || e.closed || e.available >= e.limit {
		return time.Time{}, false
	}
	return e.nextTick, true
}

// advanceSchedule moves the schedule past a tick just taken at now. A driver
// that fell more than a period behind skips the missed points, as a periodic
// timer that missed them would.
func (e *engine) advanceSchedule(now time.Time) {
	e.nextTick = e.nextTick.Add(e.period)
	if !e.nextTick.After(now) {
		e.skipTo(now)
	}
}

// catchUp realigns the schedule when a full limiter starts to need ticks
// again. The ticks skipped while it was full would only have moved the last
// replenishment time, so that is what catching up does.
func (e *engine) catchUp(now time.Time) {
	if e.nextTick.After(now) {
		return
	}
	from := e.nextTick
	e.skipTo(now)
	if e.algorithm == algorithmTokenBucket {
		return
	}
	e.last = e.nextTick.Add(-e.period)
	// Each skipped tick would have begun a window (fixed) or slid an empty
	// segment (sliding): count them, so that a lease's window stamp is
	// what it would have been had every tick run.
	skipped := uint64(e.nextTick.Sub(from) / e.period)
	e.windows += skipped
	if n := len(e.segments); n > 0 {
		e.current = int((uint64(e.current) + skipped) % uint64(n))
	}
}

// skipTo moves nextTick to the first schedule point after now.
func (e *engine) skipTo(now time.Time) {
	for !e.nextTick.After(now) {
		behind := now.Sub(e.nextTick) // saturates, so this may take two rounds
		e.nextTick = e.nextTick.Add(behind - behind%e.period).Add(e.period)
	}
}

// elapsedSince is now - then, never negative: a clock that went backwards
// counts as no time passing.
func elapsedSince(now, then time.Time) time.Duration {
	return max(now.Sub(then), 0)
}

// waiterQueue is a growable ring buffer of waiters.
type waiterQueue struct {
	buf  []*Waiter
	head int
	n    int
}

func (q *waiterQueue) len() int { return q.n }

func (q *waiterQueue) front() *Waiter { return q.buf[q.head] }

func (q *waiterQueue) back() *Waiter { return q.buf[(q.head+q.n-1)%len(q.buf)] }

func (q *waiterQueue) pushBack(w *Waiter) {
	if q.n == len(q.buf) {
		q.resize(max(8, 2*len(q.buf)))
	}
	q.buf[(q.head+q.n)%len(q.buf)] = w
	q.n++
}

func (q *waiterQueue) popFront() *Waiter {
	w := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	q.shrink()
	return w
}

func (q *waiterQueue) popBack() *Waiter {
	i := (q.head + q.n - 1) % len(q.buf)
	w := q.buf[i]
	q.buf[i] = nil
	q.n--
	q.shrink()
	return w
}

// shrink gives back a large buffer once the queue is nearly empty again.
func (q *waiterQueue) shrink() {
	if len(q.buf) > 64 && q.n < len(q.buf)/8 {
		q.resize(len(q.buf) / 4)
	}
}

func (q *waiterQueue) resize(size int) {
	buf := make([]*Waiter, size)
	for i := 0; i < q.n; i++ {
		buf[i] = q.buf[(q.head+i)%len(q.buf)]
	}
	q.buf = buf
	q.head = 0
}

// removeDone drops completed (cancelled) waiters, keeping the order.
func (q *waiterQueue) removeDone() {
	kept := 0
	for i := 0; i < q.n; i++ {
		j := (q.head + i) % len(q.buf)
		w := q.buf[j]
		q.buf[j] = nil
		if w.outcome == OutcomePending {
			q.buf[(q.head+kept)%len(q.buf)] = w
			kept++
		}
	}
	q.n = kept
	q.shrink()
}
