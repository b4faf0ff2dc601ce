package limiter

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const maxDuration = time.Duration(math.MaxInt64)

func TestOverflow_HugeLimitsAllAlgorithms(t *testing.T) {
	for _, order := range []QueueOrder{OldestFirst, NewestFirst} {
		forEachKind(t, spec{limit: math.MaxInt64, queueLimit: math.MaxInt64, order: order}, func(t *testing.T, h *harness) {
			require.True(t, h.attempt(math.MaxInt64-1).Acquired())
			require.True(t, h.attempt(1).Acquired())
			l := h.attempt(math.MaxInt64)
			require.False(t, l.Acquired())
			if d, ok := l.RetryAfter(); ok {
				require.GreaterOrEqual(t, d, time.Duration(0))
			}
			w1 := h.queue(math.MaxInt64 - 1)
			w2 := h.queue(0)
			l, w := h.acquire(math.MaxInt64) // no room: rejected or evicting
			if order == OldestFirst {
				require.Nil(t, w)
				require.False(t, l.Acquired())
			} else {
				require.Equal(t, OutcomeEvicted, w1.Outcome())
				require.Equal(t, OutcomePending, w2.Outcome(), "a zero waiter takes no queue room")
			}
			h.refill()
			require.Equal(t, OutcomeGranted, w2.Outcome())
			s := h.stats()
			require.GreaterOrEqual(t, s.AvailablePermits, int64(0))
			require.GreaterOrEqual(t, s.QueuedPermits, int64(0))
		})
	}
}

func TestOverflow_TokenBucketLongGaps(t *testing.T) {
	tests := []struct {
		name   string
		tpp    int64
		period time.Duration
		gap    time.Duration
	}{
		{"max gap, 1 token", 1, time.Millisecond, maxDuration},
		{"max gap, max tokens", math.MaxInt64, time.Millisecond, maxDuration},
		{"max period", math.MaxInt64, maxDuration, maxDuration},
		{"one ns past the period", 1, maxDuration, maxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := newBucket(t, TokenBucketOptions{TokenLimit: math.MaxInt64, TokensPerPeriod: tt.tpp, QueueLimit: math.MaxInt64,
				ReplenishmentPeriod: tt.period})
			mustAcquire(t, tb, t0, math.MaxInt64)
			_, w, err := tb.Acquire(t0, math.MaxInt64)
			require.NoError(t, err)
			l, _ := tb.AttemptAcquire(t0, math.MaxInt64)
			d, ok := l.RetryAfter()
			require.True(t, ok)
			require.Positive(t, d)
			tb.TryReplenish(t0.Add(tt.gap))
			tb.TryReplenish(t0.Add(tt.gap).Add(tt.gap)) // now.Sub saturates beyond 292 years
			s, _ := tb.Statistics()
			require.GreaterOrEqual(t, s.AvailablePermits, int64(0))
			require.LessOrEqual(t, s.AvailablePermits, int64(math.MaxInt64))
			require.Equal(t, tt.tpp == math.MaxInt64, w.Outcome() == OutcomeGranted)
			if tt.name == "max gap, 1 token" {
				require.Equal(t, int64(18446744073709), s.AvailablePermits, "floor(2 x (2^63-1) ns / 1 ms): both gaps counted exactly")
			}
		})
	}

	// Exactness in the middle of the range: 3 tokens per 7ns over 10^18 ns.
	tb := newBucket(t, TokenBucketOptions{TokenLimit: math.MaxInt64, TokensPerPeriod: 3, ReplenishmentPeriod: time.Millisecond})
	tb.e.period = 7 // white-box: a period below MinPeriod to hit odd remainders
	mustAcquire(t, tb, t0, math.MaxInt64)
	const gap, added = int64(1e18), int64(3e18)
	tb.TryReplenish(t0.Add(time.Duration(gap)))
	requireAvailable(t, tb, added/7)
	require.Equal(t, added%7, tb.e.fraction, "the remainder is kept exactly")
}

func TestOverflow_LongIdleAutoSchedule(t *testing.T) {
	for _, window := range []time.Duration{time.Millisecond, time.Hour, maxDuration} {
		fw, err := NewFixedWindow(FixedWindowOptions{PermitLimit: 1, Window: window}, t0)
		require.NoError(t, err)
		later := t0.Add(maxDuration).Add(maxDuration).Add(12345) // ~584 years idle
		mustAcquire(t, fw, later, 1)
		next, need := fw.NextTick(later)
		require.True(t, need)
		require.True(t, next.After(later), "window %v: next tick %v is not after %v", window, next, later)
		require.False(t, next.After(later.Add(window)))
		l, _ := fw.AttemptAcquire(later, 1)
		d, _ := l.RetryAfter()
		require.Equal(t, next.Sub(later), d, "the retry hint points at the next tick")
		fw.Tick(next)
		requireAvailable(t, fw, 1)
	}

	sw, err := NewSlidingWindow(SlidingWindowOptions{PermitLimit: 3, SegmentsPerWindow: 3, Window: maxDuration}, t0)
	require.NoError(t, err)
	mustAcquire(t, sw, t0, 3)
	l, _ := sw.AttemptAcquire(t0, 1)
	d, _ := l.RetryAfter()
	require.Equal(t, 3*sw.ReplenishmentPeriod(), d)
	require.Equal(t, 3*(maxDuration/3/100*100), d, "the period is whole 100 ns ticks (§1)")
	for range 3 {
		next, need := sw.NextTick(t0)
		require.True(t, need)
		sw.Tick(next)
	}
	requireAvailable(t, sw, 3)
}

func TestOverflow_RetryAfterSaturates(t *testing.T) {
	tb := newBucket(t, TokenBucketOptions{TokenLimit: math.MaxInt64, TokensPerPeriod: 1, QueueLimit: math.MaxInt64,
		ReplenishmentPeriod: time.Hour})
	mustAcquire(t, tb, t0, math.MaxInt64)
	_, _, _ = tb.Acquire(t0, math.MaxInt64)
	l, _ := tb.AttemptAcquire(t0, math.MaxInt64)
	requireRetry(t, l, maxDuration)
}
