package cancel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// invocationContext is the fresh context of one cancellable invocation, as
// the Registry hands it out.
//
// It exists because context.WithCancel costs two allocations (the context
// and its cancel closure) and a mutex on every Err, and every cancellable
// call pays for it although almost none is ever cancelled. This context is
// one allocation; Err is an atomic load; the Done channel is made only when
// somebody asks for it (context.AfterFunc and select do, a method that
// never waits does not). It has no parent, deadline or values, and it
// implements the AfterFunc method that context.AfterFunc and
// context.WithCancel look for, so waiting on it never starts a goroutine.
type invocationContext struct {
	cancelled atomic.Bool
	done      atomic.Value // chan struct{}, set once by the first Done or by cancel

	mu     sync.Mutex // serialises cancel with Done's creation and AfterFunc
	afters *afterFunc // functions to run on cancel, newest first
}

type afterFunc struct {
	f    func()
	next *afterFunc
}

// closedChan is the Done channel of a context cancelled before anybody asked
// for its Done channel, as in package context.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

var _ context.Context = (*invocationContext)(nil)

// Deadline implements context.Context: an invocation context has none; a
// bounded method's budget travels separately.
func (c *invocationContext) Deadline() (time.Time, bool) { return time.Time{}, false }

// Value implements context.Context: an invocation context carries no values.
func (c *invocationContext) Value(any) any { return nil }

// Err implements context.Context.
func (c *invocationContext) Err() error {
	if c.cancelled.Load() {
		return context.Canceled
	}
	return nil
}

// Done implements context.Context. The channel is created on first use.
func (c *invocationContext) Done() <-chan struct{} {
	if d := c.done.Load(); d != nil {
		return d.(chan struct{})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.done.Load(); d != nil {
		return d.(chan struct{})
	}
	d := make(chan struct{})
	if c.cancelled.Load() {
		d = closedChan
	}
	c.done.Store(d)
	return d
}

// String names the context in the way package context names its own.
func (c *invocationContext) String() string { return "proxy.invocationContext" }

// AfterFunc runs f in its own goroutine once c is cancelled, like
// context.AfterFunc, which calls it. stop reports whether it kept f from
// running.
func (c *invocationContext) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.cancelled.Load() {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{f: f, next: c.afters}
	c.afters = a
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for p := &c.afters; *p != nil; p = &(*p).next {
			if *p == a {
				*p = a.next
				return true
			}
		}
		return false
	}
}

// cancel cancels c; it is a no-op when c is already cancelled.
func (c *invocationContext) cancel() {
	c.mu.Lock()
	if c.cancelled.Load() {
		c.mu.Unlock()
		return
	}
	c.cancelled.Store(true)
	afters := c.afters
	c.afters = nil
	if d := c.done.Load(); d != nil {
		close(d.(chan struct{}))
	}
	c.mu.Unlock()
	for ; afters != nil; afters = afters.next {
		go afters.f()
	}
}
