package limiter

import (
	"context"
	"sync"
	"time"

	"github.com/granary-go/granary/clock"
)

// Timer is a scheduled callback that can be stopped; *time.Timer is one.
type Timer = clock.Timer

// Clock tells the time (Now) and schedules callbacks (AfterFunc, each in
// its own goroutine) for a [Limiter]. A fake clock in tests makes
// replenishment deterministic.
type Clock = clock.Clock

// Core is the method set shared by the four algorithms, which is all a
// [Limiter] needs to drive one.
type Core interface {
	// AttemptAcquire takes n permits now or fails; it never queues.
	AttemptAcquire(now time.Time, n int64) (Lease, error)
	// Acquire takes n permits now, or queues and returns a waiter, or
	// fails when the queue has no room.
	Acquire(now time.Time, n int64) (Lease, *Waiter, error)
	// Cancel removes a pending waiter.
	Cancel(now time.Time, w *Waiter) bool
	// Tick is one automatic replenishment.
	Tick(now time.Time)
	// NextTick reports when Tick is next needed, if at all.
	NextTick(now time.Time) (time.Time, bool)
	// Close fails every waiter and refuses later acquisitions.
	Close(now time.Time)
	// Statistics returns a snapshot of the counters.
	Statistics() (Statistics, error)
	// IdleDuration reports how long the limiter has been unused.
	IdleDuration(now time.Time) (time.Duration, bool)
	// SetCompletionHandler sets the function told of every completed
	// waiter.
	SetCompletionHandler(h func(*Waiter))
}

var (
	_ Core = (*Concurrency)(nil)
	_ Core = (*FixedWindow)(nil)
	_ Core = (*SlidingWindow)(nil)
	_ Core = (*TokenBucket)(nil)
)

// Option configures a [Limiter].
type Option func(*Limiter)

// WithClock makes the Limiter read the time from c and schedule its
// replenishment timer on c. The default is the wall clock.
func WithClock(c Clock) Option {
	return func(l *Limiter) { l.clock = c }
}

// Limiter makes one algorithm safe for concurrent in-process use. It adds a
// mutex, a clock, a blocking Acquire, tracking of concurrency leases so
// that Release is idempotent, and a single timer that drives automatic
// replenishment, armed only while a tick is needed.
//
// All methods are safe for concurrent use. Close stops the timer and
// completes every blocked Acquire with a failed lease.
type Limiter struct {
	clock Clock
	mu    struct {
		sync.Mutex
		core     Core
		timer    Timer
		timerAt  time.Time
		timerGen uint64 // tells a superseded timer's callback to do nothing
		closed   bool
		held     map[uint64]int64 // concurrency leases by ID: their permits
	}
}

// New wraps core, which from then on belongs to the Limiter: nothing else
// may call it. The core's completion handler is replaced.
func New(core Core, opts ...Option) *Limiter {
	l := &Limiter{clock: clock.Real{}}
	for _, o := range opts {
		o(l)
	}
	l.mu.core = core
	l.mu.held = make(map[uint64]int64)
	core.SetCompletionHandler(l.completed)
	l.mu.Lock()
	l.rearmLocked(l.clock.Now())
	l.mu.Unlock()
	return l
}

// AttemptAcquire takes n permits if they are available now, without
// waiting. A rejection is a lease whose Acquired reports false.
func (l *Limiter) AttemptAcquire(n int64) (Lease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	lease, err := l.mu.core.AttemptAcquire(now, n)
	if err == nil && lease.Acquired() {
		l.trackLocked(lease)
		l.rearmLocked(now)
	}
	return lease, err
}

// Acquire takes n permits, waiting in the limiter's queue when they are not
// available and the queue has room. It returns a failed lease, not an
// error, when the queue is full, when the waiter is evicted by a newer one
// (NewestFirst), or when the Limiter is closed while it waits. A context
// that is already done returns its error without touching the limiter; one
// that ends while waiting removes the waiter and returns ctx.Err(), unless
// the waiter completed first, in which case its lease is returned.
func (l *Limiter) Acquire(ctx context.Context, n int64) (Lease, error) {
	if n < 0 {
		return Lease{}, ErrNegativeCount
	}
	if err := ctx.Err(); err != nil {
		return Lease{}, err
	}
	l.mu.Lock()
	now := l.clock.Now()
	lease, w, err := l.mu.core.Acquire(now, n)
	if err != nil {
		l.mu.Unlock()
		return Lease{}, err
	}
	var done chan struct{}
	if w != nil {
		done = make(chan struct{})
		w.Value = done
	} else if lease.Acquired() {
		l.trackLocked(lease)
	}
	l.rearmLocked(now)
	l.mu.Unlock()
	if w == nil {
		return lease, nil
	}

	select {
	case <-done:
		return w.Lease(), nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	canceled := l.mu.core.Cancel(l.clock.Now(), w)
	l.mu.Unlock()
	if canceled {
		return Lease{}, ctx.Err()
	}
	return w.Lease(), nil
}

// Release gives back the permits of a concurrency lease obtained from this
// Limiter. Releasing a lease twice, a failed lease, a lease of a time-based
// limiter (which never takes permits back) or any lease after Close does
// nothing.
func (l *Limiter) Release(lease Lease) {
	if lease.ID() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n, ok := l.mu.held[lease.ID()]
	if !ok {
		return
	}
	delete(l.mu.held, lease.ID())
	if r, ok := l.mu.core.(interface {
		Release(time.Time, int64) error
	}); ok {
		now := l.clock.Now()
		_ = r.Release(now, n) // n came from the core: it cannot exceed what is held
		l.rearmLocked(now)
	}
}

// TryReplenish runs one manual replenishment and reports whether the
// limiter uses manual replenishment (see the algorithms' TryReplenish). It
// returns false for a concurrency limiter.
func (l *Limiter) TryReplenish() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.mu.core.(interface{ TryReplenish(time.Time) bool })
	if !ok {
		return false
	}
	now := l.clock.Now()
	done := r.TryReplenish(now)
	l.rearmLocked(now)
	return done
}

// Statistics returns a snapshot of the counters, or ErrClosed.
func (l *Limiter) Statistics() (Statistics, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.core.Statistics()
}

// IdleDuration returns how long the limiter has been idle, or false while it
// is in use.
func (l *Limiter) IdleDuration() (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.core.IdleDuration(l.clock.Now())
}

// Close closes the limiter: it stops the timer and fails every waiting
// Acquire. Later acquisitions return ErrClosed. Closing twice does nothing.
func (l *Limiter) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return
	}
	l.mu.closed = true
	l.mu.core.Close(l.clock.Now())
	l.stopTimerLocked()
	l.mu.held = nil
}

// completed is the core's completion handler; the core calls it only from
// methods the Limiter calls under its mutex.
func (l *Limiter) completed(w *Waiter) {
	l.trackLocked(w.Lease())
	close(w.Value.(chan struct{}))
}

func (l *Limiter) trackLocked(lease Lease) {
	if id := lease.ID(); id != 0 && l.mu.held != nil {
		l.mu.held[id] = lease.Permits()
	}
}

// rearmLocked keeps exactly one timer armed for the core's next tick, and
// none while the core needs no tick.
func (l *Limiter) rearmLocked(now time.Time) {
	at, ok := l.mu.core.NextTick(now)
	if ok && l.mu.timer != nil && at.Equal(l.mu.timerAt) {
		return
	}
	l.stopTimerLocked()
	if !ok {
		return
	}
	gen := l.mu.timerGen
	l.mu.timerAt = at
	l.mu.timer = l.clock.AfterFunc(max(at.Sub(now), 0), func() { l.tick(gen) })
}

func (l *Limiter) stopTimerLocked() {
	if l.mu.timer != nil {
		l.mu.timer.Stop()
		l.mu.timer = nil
	}
	l.mu.timerGen++
}

func (l *Limiter) tick(gen uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed || gen != l.mu.timerGen {
		return
	}
	l.mu.timer = nil
	now := l.clock.Now()
	l.mu.core.Tick(now)
	l.rearmLocked(now)
}
