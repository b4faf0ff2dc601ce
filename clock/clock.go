package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock reads the time and schedules callbacks. Implementations are safe for
// concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a scheduled callback.
type Timer interface {
	// Stop prevents the callback from running and reports whether it did so.
	Stop() bool
}

// Real is the wall clock.
type Real struct{}

var _ Clock = Real{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a manually advanced clock for tests. Callbacks due at or before the
// new time run synchronously, in due order, inside Advance and Set, without
// the Fake's lock held, so a callback may schedule more callbacks.
type Fake struct {
	mu struct {
		sync.Mutex
		now    time.Time
		seq    uint64
		timers []*fakeTimer
	}
}

var _ Clock = (*Fake)(nil)

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake {
	f := &Fake{}
	f.mu.now = start
	return f
}

type fakeTimer struct {
	owner *Fake
	when  time.Time
	seq   uint64
	f     func()
}

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.now
}

// AfterFunc schedules f to run when the fake time reaches Now()+d. A d <= 0
// is due at once but still runs only on the next Advance or Set, so that
// callers never run callbacks re-entrantly.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.seq++
	t := &fakeTimer{owner: c, when: c.mu.now.Add(d), seq: c.mu.seq, f: f}
	c.mu.timers = append(c.mu.timers, t)
	return t
}

// Stop removes the timer and reports whether it was still pending.
func (t *fakeTimer) Stop() bool {
	c := t.owner
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.mu.timers {
		if p == t {
			c.mu.timers = append(c.mu.timers[:i], c.mu.timers[i+1:]...)
			return true
		}
	}
	return false
}

// Pending reports how many callbacks are scheduled and not yet run.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.timers)
}

// Advance moves the fake time forward by d and runs every callback that
// became due.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.mu.now.Add(d)
	c.mu.Unlock()
	c.Set(target)
}

// Set moves the fake time to t (never backwards for due callbacks: callbacks
// run for every deadline up to t) and runs every callback that became due.
func (c *Fake) Set(t time.Time) {
	for {
		c.mu.Lock()
		sort.Slice(c.mu.timers, func(i, j int) bool {
			a, b := c.mu.timers[i], c.mu.timers[j]
			if a.when.Equal(b.when) {
				return a.seq < b.seq
			}
			return a.when.Before(b.when)
		})
		if len(c.mu.timers) == 0 || c.mu.timers[0].when.After(t) {
			c.mu.now = t
			c.mu.Unlock()
			return
		}
		next := c.mu.timers[0]
		c.mu.timers = c.mu.timers[1:]
		if next.when.After(c.mu.now) {
			c.mu.now = next.when
		}
		c.mu.Unlock()
		next.f()
	}
}
