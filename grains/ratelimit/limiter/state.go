package limiter

import (
	"fmt"
	"time"
)

// State is the part of a limiter worth persisting between activations: the
// permits, the counters and the replenishment clock. Queued waiters are not
// part of it; they belong to callers that are gone once the state is
// restored.
type State struct {
	// AvailablePermits is A (whole tokens for the bucket; a fractional token
	// is not kept).
	AvailablePermits int64
	// TotalSuccessfulLeases and TotalFailedLeases are the statistics
	// counters.
	TotalSuccessfulLeases, TotalFailedLeases int64
	// LastReplenishment is when the window, segment or bucket was last
	// replenished (zero for the concurrency limiter). With automatic
	// replenishment the tick schedule continues from it.
	LastReplenishment time.Time
	// Segments holds a sliding window's per-segment charges, oldest first:
	// Segments[0] is freed by the next slide and the last element is the
	// current segment. It is nil for the other limiters.
	Segments []int64
}

func (e *engine) state() State {
	s := State{
		AvailablePermits:      e.available,
		TotalSuccessfulLeases: e.succeeded,
		TotalFailedLeases:     e.failed,
	}
	if e.algorithm != algorithmConcurrency {
		s.LastReplenishment = e.last
	}
	if n := len(e.segments); n > 0 {
		s.Segments = make([]int64, n)
		for i := range s.Segments {
			s.Segments[i] = e.segments[(e.current+1+i)%n]
		}
	}
	return s
}

func (e *engine) restore(now time.Time, s State) error {
	if e.closed {
		return ErrClosed
	}
	if e.queued > 0 || e.waiters.len() > e.stale {
		return fmt.Errorf("%w: waiters are queued", ErrInvalidState)
	}
	if err := e.checkState(s); err != nil {
		return err
	}
	e.available = s.AvailablePermits
	e.succeeded = s.TotalSuccessfulLeases
	e.failed = s.TotalFailedLeases
	e.fraction = 0
	e.idle = e.available == e.limit
	e.idleSince = now
	if n := len(e.segments); n > 0 {
		copy(e.segments, s.Segments)
		e.current = n - 1
	}
	if e.algorithm == algorithmConcurrency {
		return nil
	}
	e.last = s.LastReplenishment
	if e.last.IsZero() || e.last.After(now) {
		e.last = now
	}
	if e.auto {
		// Continue the schedule of the saved limiter. A missed tick is due at
		// once (NextTick reports a past time) when permits are missing.
		e.nextTick = e.last.Add(e.period)
	}
	return nil
}

func (e *engine) checkState(s State) error {
	if s.AvailablePermits < 0 || s.AvailablePermits > e.limit {
		return fmt.Errorf("%w: AvailablePermits %d outside [0, %d]", ErrInvalidState, s.AvailablePermits, e.limit)
	}
	if s.TotalSuccessfulLeases < 0 || s.TotalFailedLeases < 0 {
		return fmt.Errorf("%w: negative totals", ErrInvalidState)
	}
	if e.segments == nil {
		if s.Segments != nil {
			return fmt.Errorf("%w: Segments given to a limiter without segments", ErrInvalidState)
		}
		return nil
	}
	if len(s.Segments) != len(e.segments) {
		return fmt.Errorf("%w: %d segments, want %d", ErrInvalidState, len(s.Segments), len(e.segments))
	}
	missing := e.limit - s.AvailablePermits
	for _, c := range s.Segments {
		if c < 0 || c > missing {
			return fmt.Errorf("%w: segments do not add up to %d", ErrInvalidState, e.limit-s.AvailablePermits)
		}
		missing -= c
	}
	if missing != 0 {
		return fmt.Errorf("%w: segments do not add up to %d", ErrInvalidState, e.limit-s.AvailablePermits)
	}
	return nil
}

// State returns the limiter's persistent state.
func (c *Concurrency) State() State { return c.e.state() }

// Restore replaces the permits and counters with s, for a limiter that has
// no queued waiters (typically one just created). The released permits of a
// restored concurrency limiter are the driver's to track.
func (c *Concurrency) Restore(now time.Time, s State) error { return c.e.restore(now, s) }

// State returns the limiter's persistent state.
func (f *FixedWindow) State() State { return f.e.state() }

// Restore replaces the permits, counters and last replenishment time with
// s, for a limiter that has no queued waiters (typically one just created).
// It returns an error wrapping ErrInvalidState when s does not fit the
// options.
func (f *FixedWindow) Restore(now time.Time, s State) error { return f.e.restore(now, s) }

// State returns the limiter's persistent state.
func (s *SlidingWindow) State() State { return s.e.state() }

// Restore replaces the permits, segments, counters and last replenishment
// time with st, for a limiter that has no queued waiters (typically one just
// created). It returns an error wrapping ErrInvalidState when st does not
// fit the options, including when the segments do not add up to the missing
// permits.
func (s *SlidingWindow) Restore(now time.Time, st State) error { return s.e.restore(now, st) }

// State returns the limiter's persistent state.
func (t *TokenBucket) State() State { return t.e.state() }

// Restore replaces the tokens, counters and last replenishment time with s,
// for a limiter that has no queued waiters (typically one just created). It
// returns an error wrapping ErrInvalidState when s does not fit the options.
func (t *TokenBucket) Restore(now time.Time, s State) error { return t.e.restore(now, s) }
