package transport

import (
	"fmt"
	"sync"
	"time"

	"github.com/granary-go/granary/clock"
)

// Idler is implemented by a Handler that knows whether its connection has
// work in flight, such as calls awaiting replies. With
// ListenerOptions.IdleTimeout set, a connection is closed only when no frame
// has moved for that long and Idle returns true; a handler that does not
// implement Idler counts as idle. Idle is called from a timer goroutine,
// concurrently with the handler's other methods, so it must be safe for
// that, quick, and must not call the connection's Close.
type Idler interface {
	Idle() bool
}

// ticksPerRule is how often, per shortest enabled duration, the watchdog
// looks at a connection: each rule fires at most a quarter of its duration
// late.
const ticksPerRule = 4

// watchdog enforces a connection's time rules (keepalive, idle timeout,
// minimum read rate) by looking at its counters on a timer; the fast path
// only bumps the counters it bumps anyway, plus the reader's progress once
// per read from the socket. Ticks run one at a time: each arms the next.
type watchdog struct {
	c      *Conn
	clock  clock.Clock
	period time.Duration
	idle   time.Duration // ListenerOptions.IdleTimeout, zero for a dialled connection

	running sync.WaitGroup // one per armed or running tick
	mu      struct {
		sync.Mutex
		timer   clock.Timer
		stopped bool
	}

	// Owned by the running tick.
	lastReceived uint64    // bytes read from the socket at the last change seen
	quietSince   time.Time // since when nothing arrived while the reader waited
	lastQueued   uint64    // frames and heartbeats queued at the last change seen
	queuedAt     time.Time
	lastMoved    uint64 // frames read and queued at the last change seen
	movedAt      time.Time
	trickling    bool // the reader waited inside a frame at the last tick
	trickleSince time.Time
	trickleFrom  uint64
}

// newWatchdog returns the watchdog for c's rules, or nil when none is on.
func newWatchdog(c *Conn, clk clock.Clock, idle time.Duration) *watchdog {
	o := &c.opts
	var shortest time.Duration
	for _, d := range []time.Duration{o.KeepaliveInterval, o.KeepaliveTimeout, idle, readRateWindow(o)} {
		if d > 0 && (shortest == 0 || d < shortest) {
			shortest = d
		}
	}
	if shortest == 0 {
		return nil
	}
	return &watchdog{c: c, clock: clk, period: max(shortest/ticksPerRule, time.Millisecond), idle: idle}
}

func readRateWindow(o *Options) time.Duration {
	if o.MinReadRate <= 0 {
		return 0
	}
	return o.ReadRateWindow
}

func (w *watchdog) start() {
	now := w.clock.Now()
	w.quietSince, w.queuedAt, w.movedAt = now, now, now
	w.arm()
}

func (w *watchdog) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.stopped {
		return
	}
	w.running.Add(1)
	w.mu.timer = w.clock.AfterFunc(w.period, w.tick)
}

func (w *watchdog) tick() {
	defer w.running.Done()
	w.mu.Lock()
	stopped := w.mu.stopped
	w.mu.Unlock()
	if stopped {
		return
	}
	if err := w.check(w.clock.Now()); err != nil {
		w.c.shutdown(err)
		return
	}
	w.arm()
}

// stop disarms the watchdog and waits for a tick in progress.
func (w *watchdog) stop() {
	w.mu.Lock()
	w.mu.stopped = true
	t := w.mu.timer
	w.mu.Unlock()
	if t != nil && t.Stop() {
		w.running.Done() // that tick will never run
	}
	w.running.Wait()
}

// check applies every rule at now and returns the error to close the
// connection with, or nil.
func (w *watchdog) check(now time.Time) error {
	c, o := w.c, &w.c.opts
	received, state := c.fr.progress.load()

	// Silence counts only while the reader waits for the peer: a handler that
	// holds the reader up is not the peer's fault. (The reader publishes
	// every read only when KeepaliveTimeout is set, see readProgress.)
	if received != w.lastReceived || state == readerBusy {
		w.lastReceived, w.quietSince = received, now
	} else if o.KeepaliveTimeout > 0 && now.Sub(w.quietSince) >= o.KeepaliveTimeout {
		return fmt.Errorf("%w: nothing arrived for %v", ErrKeepaliveTimeout, now.Sub(w.quietSince))
	}

	if state == readerInFrame && o.MinReadRate > 0 {
		if !w.trickling {
			w.trickling, w.trickleSince, w.trickleFrom = true, now, received
		} else if elapsed := now.Sub(w.trickleSince); elapsed >= o.ReadRateWindow {
			got := received - w.trickleFrom
			if float64(got) < float64(o.MinReadRate)*elapsed.Seconds() {
				return fmt.Errorf("%w: %d bytes of a frame in %v, minimum %d bytes/s", ErrReadTooSlow, got, elapsed, o.MinReadRate)
			}
			w.trickleSince, w.trickleFrom = now, received
		}
	} else {
		w.trickling = false
	}

	if o.KeepaliveInterval > 0 {
		if q := c.queued.Load() + c.heartbeatsSent.Load(); q != w.lastQueued {
			w.lastQueued, w.queuedAt = q, now
		} else if now.Sub(w.queuedAt) >= o.KeepaliveInterval {
			c.sendHeartbeat()
			w.lastQueued, w.queuedAt = q+1, now
		}
	}

	if w.idle > 0 {
		read := c.framesRead.Load()
		if u, ok := c.handler.(UsefulCounter); ok {
			read = u.UsefulFrames()
		}
		if moved := read + c.queued.Load(); moved != w.lastMoved {
			w.lastMoved, w.movedAt = moved, now
		} else if quiet := now.Sub(w.movedAt); quiet >= w.idle && handlerIdle(c.handler) {
			return fmt.Errorf("%w: no frame for %v", ErrIdleTimeout, quiet)
		}
	}
	return nil
}

// UsefulCounter is implemented by a Handler that tells the frames that
// carry work (calls and their replies) from the rest (cancels): with
// ListenerOptions.IdleTimeout set, only those and the frames sent reset
// the idle time, so that a peer that sends nothing but cancels (or
// nothing but heartbeats, which are never frames) does not keep its
// connection for ever. UsefulFrames is called from a timer goroutine.
type UsefulCounter interface {
	UsefulFrames() uint64
}

func handlerIdle(h Handler) bool {
	if i, ok := h.(Idler); ok {
		return i.Idle()
	}
	return true
}
