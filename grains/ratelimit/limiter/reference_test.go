package limiter

// Tests named TestRefNN follow limiter-semantics.md §10, case NN, written
// against this package's API: exceptions there are errors or failed leases
// here, Dispose is Close, and "Repl" is a manual TryReplenish or Tick.

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRef01_InvalidOptions(t *testing.T) {
	negative := []time.Duration{math.MinInt64, -time.Millisecond, 0}
	type check struct {
		name  string
		err   error
		field string
	}
	var checks []check
	for _, d := range negative {
		checks = append(checks,
			check{"fixed Window " + d.String(), FixedWindowOptions{PermitLimit: 1, Window: d}.Validate(), "Window"},
			check{"sliding Window " + d.String(), SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 1, Window: d}.Validate(), "Window"},
			check{"bucket period " + d.String(), TokenBucketOptions{TokenLimit: 1, TokensPerPeriod: 1, ReplenishmentPeriod: d}.Validate(), "ReplenishmentPeriod"},
		)
	}
	checks = append(checks,
		check{"concurrency PermitLimit", ConcurrencyOptions{PermitLimit: -1}.Validate(), "PermitLimit"},
		check{"concurrency QueueLimit", ConcurrencyOptions{PermitLimit: 1, QueueLimit: -1}.Validate(), "QueueLimit"},
		check{"fixed PermitLimit", FixedWindowOptions{PermitLimit: -1, Window: time.Second}.Validate(), "PermitLimit"},
		check{"fixed QueueLimit", FixedWindowOptions{PermitLimit: 1, QueueLimit: -1, Window: time.Second}.Validate(), "QueueLimit"},
		check{"sliding PermitLimit", SlidingWindowOptions{PermitLimit: -1, SegmentsPerWindow: 1, Window: time.Second}.Validate(), "PermitLimit"},
		check{"sliding SegmentsPerWindow", SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: -1, Window: time.Second}.Validate(), "SegmentsPerWindow"},
		check{"sliding QueueLimit", SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 1, QueueLimit: -1, Window: time.Second}.Validate(), "QueueLimit"},
		check{"bucket TokenLimit", TokenBucketOptions{TokenLimit: -1, TokensPerPeriod: 1, ReplenishmentPeriod: time.Second}.Validate(), "TokenLimit"},
		check{"bucket TokensPerPeriod", TokenBucketOptions{TokenLimit: 1, TokensPerPeriod: -1, ReplenishmentPeriod: time.Second}.Validate(), "TokensPerPeriod"},
		check{"bucket QueueLimit", TokenBucketOptions{TokenLimit: 1, TokensPerPeriod: 1, QueueLimit: -1, ReplenishmentPeriod: time.Second}.Validate(), "QueueLimit"},
	)
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			require.ErrorIs(t, c.err, ErrInvalidOptions)
			var oe *OptionsError
			require.ErrorAs(t, c.err, &oe)
			assert.True(t, oe.Has(c.field), "%v should name %s", c.err, c.field)
			assert.Len(t, oe.Fields, 1, "only %s is wrong: %v", c.field, c.err)
		})
	}

	// The constructors refuse the same options.
	_, err := NewConcurrency(ConcurrencyOptions{}, t0)
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = NewFixedWindow(FixedWindowOptions{}, t0)
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = NewSlidingWindow(SlidingWindowOptions{}, t0)
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = NewTokenBucket(TokenBucketOptions{}, t0)
	require.ErrorIs(t, err, ErrInvalidOptions)
}

func TestRef02_AcquiringMoreThanLimit(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 5}, func(t *testing.T, h *harness) {
		_, err := h.core.AttemptAcquire(h.now, 2)
		require.ErrorIs(t, err, ErrCountExceedsLimit)
		_, w, err := h.core.Acquire(h.now, 2)
		require.ErrorIs(t, err, ErrCountExceedsLimit)
		require.Nil(t, w)
		h.requireStats(1, 0, 0, 0) // errors are not counted
	})
}

func TestRef03_AcquiringLessThanZero(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 5}, func(t *testing.T, h *harness) {
		_, err := h.core.AttemptAcquire(h.now, -1)
		require.ErrorIs(t, err, ErrNegativeCount)
		_, _, err = h.core.Acquire(h.now, -1)
		require.ErrorIs(t, err, ErrNegativeCount)
		h.requireStats(1, 0, 0, 0)
	})
}

func TestRef04_AcquireZero(t *testing.T) {
	forEachKind(t, spec{limit: 1}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(0).Acquired(), "with availability")
		require.True(t, h.attempt(1).Acquired())
		require.False(t, h.attempt(0).Acquired(), "without availability")
	})
}

func TestRef05_AcquireZeroWithoutAvailabilityWaits(t *testing.T) {
	forEachKind(t, spec{limit: 1}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(1).Acquired())
		w := h.queue(0) // queue limit 0 still queues a zero request
		h.requireStats(0, 0, 0, 1)
		h.refill()
		require.Equal(t, OutcomeGranted, w.Outcome())
		require.True(t, w.Lease().Acquired())
		require.Zero(t, w.Lease().Permits())
		require.Zero(t, w.Lease().ID())
		h.requireStats(1, 0, 0, 2)
	})
}

func TestRef06_TokenBucketCanAcquireResource(t *testing.T) {
	tb, err := NewTokenBucket(TokenBucketOptions{TokenLimit: 1, TokensPerPeriod: 1, ReplenishmentPeriod: time.Millisecond,
		ManualReplenishment: true}, t0)
	require.NoError(t, err)
	l, err := tb.AttemptAcquire(t0, 1)
	require.NoError(t, err)
	require.True(t, l.Acquired())
	l, err = tb.AttemptAcquire(t0, 1)
	require.NoError(t, err)
	require.False(t, l.Acquired())
	require.True(t, tb.TryReplenish(ms(1)))
	l, err = tb.AttemptAcquire(ms(1), 1)
	require.NoError(t, err)
	require.True(t, l.Acquired())
}

func TestRef07_SlidingWindowCanAcquireResource(t *testing.T) {
	sw, err := NewSlidingWindow(SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 2, Window: 2 * time.Millisecond,
		ManualReplenishment: true}, t0)
	require.NoError(t, err)
	l, _ := sw.AttemptAcquire(t0, 1)
	require.True(t, l.Acquired())
	require.True(t, sw.TryReplenish(ms(1)))
	l, _ = sw.AttemptAcquire(ms(1), 1)
	require.False(t, l.Acquired(), "one slide frees nothing")
	require.True(t, sw.TryReplenish(ms(2)))
	l, _ = sw.AttemptAcquire(ms(2), 1)
	require.True(t, l.Acquired(), "the second slide frees the permit")
}

func TestRef08_ConcurrencyCanAcquireResource(t *testing.T) {
	c, err := NewConcurrency(ConcurrencyOptions{PermitLimit: 1}, t0)
	require.NoError(t, err)
	l, _ := c.AttemptAcquire(t0, 1)
	require.True(t, l.Acquired())
	l2, _ := c.AttemptAcquire(t0, 1)
	require.False(t, l2.Acquired())
	require.NoError(t, c.Release(t0, l.Permits()))
	l, _ = c.AttemptAcquire(t0, 1)
	require.True(t, l.Acquired())
}

func TestRef09_QueuesAndGrabsOldest(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 2, order: OldestFirst}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(1).Acquired())
		w1, w2 := h.queue(1), h.queue(1)
		h.refill()
		require.Equal(t, OutcomeGranted, w1.Outcome())
		require.Equal(t, OutcomePending, w2.Outcome())
		h.refill()
		require.Equal(t, OutcomeGranted, w2.Outcome())
	})
}

func TestRef10_QueuesAndGrabsNewest(t *testing.T) {
	forEachKind(t, spec{limit: 2, queueLimit: 3, order: NewestFirst}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(2).Acquired())
		w2, w1 := h.queue(2), h.queue(1)
		h.refill()
		require.Equal(t, OutcomeGranted, w1.Outcome(), "the newest is served first")
		require.Equal(t, OutcomePending, w2.Outcome(), "the 2 does not fit in what is left")
		h.refill()
		require.Equal(t, OutcomeGranted, w2.Outcome())
	})

	// The token bucket with one token per period needs two more periods.
	tb, err := NewTokenBucket(TokenBucketOptions{TokenLimit: 2, TokensPerPeriod: 1, QueueLimit: 3, QueueOrder: NewestFirst,
		ReplenishmentPeriod: time.Millisecond, ManualReplenishment: true}, t0)
	require.NoError(t, err)
	h := newHarness(t, tb)
	require.True(t, h.attempt(2).Acquired())
	w2, w1 := h.queue(2), h.queue(1)
	tb.TryReplenish(ms(1))
	require.Equal(t, OutcomeGranted, w1.Outcome())
	tb.TryReplenish(ms(2))
	require.Equal(t, OutcomePending, w2.Outcome())
	tb.TryReplenish(ms(3))
	require.Equal(t, OutcomeGranted, w2.Outcome())
}

func TestRef11_FailsWhenQueuingMoreThanLimitOldestFirst(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 1, order: OldestFirst}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(1).Acquired())
		h.queue(1)
		l, w := h.acquire(1)
		require.Nil(t, w)
		require.False(t, l.Acquired())
		retry, hasRetry := l.RetryAfter()
		reason, hasReason := l.ReasonPhrase()
		switch h.core.(type) {
		case *Concurrency:
			require.False(t, hasRetry)
			require.True(t, hasReason)
			require.Equal(t, ReasonQueueLimitReached, reason)
		case *TokenBucket:
			require.True(t, hasRetry)
			require.Equal(t, 2*period, retry, "(1 - 0 + 1 queued) / 1 = 2 periods")
		default:
			require.True(t, hasRetry)
			require.Equal(t, period, retry, "the whole window is left")
			require.False(t, hasReason)
		}
		h.requireStats(0, 1, 1, 1)
	})
}

func TestRef12_DropsOldestWhenQueuingMoreThanLimitNewestFirst(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 1, order: NewestFirst}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(1).Acquired())
		w1 := h.queue(1)
		w2 := h.queue(1)
		require.Equal(t, OutcomeEvicted, w1.Outcome())
		require.False(t, w1.Lease().Acquired())
		_, hasRetry := w1.Lease().RetryAfter()
		_, hasReason := w1.Lease().ReasonPhrase()
		require.False(t, hasRetry || hasReason, "an evicted lease carries no metadata")
		require.Equal(t, []*Waiter{w1}, h.completed)
		h.requireStats(0, 1, 1, 1)
		h.refill()
		require.Equal(t, OutcomeGranted, w2.Outcome())
		h.requireStats(0, 0, 1, 2)
	})
}

func TestRef13_DropsMultipleOldestWhenQueuingMoreThanLimitNewestFirst(t *testing.T) {
	forEachKind(t, spec{limit: 2, queueLimit: 2, order: NewestFirst}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(2).Acquired())
		w1, w2 := h.queue(1), h.queue(1)
		w3 := h.queue(2)
		require.Equal(t, OutcomeEvicted, w1.Outcome())
		require.Equal(t, OutcomeEvicted, w2.Outcome())
		require.Equal(t, []*Waiter{w1, w2}, h.completed, "evicted from the head, oldest first")
		h.refill()
		require.Equal(t, OutcomeGranted, w3.Outcome())
		h.requireStats(0, 0, 2, 2)
	})
}

func TestRef14_DropsRequestLargerThanQueueLimitNewestFirst(t *testing.T) {
	forEachKind(t, spec{limit: 2, queueLimit: 1, order: NewestFirst}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(2).Acquired())
		w1 := h.queue(1)
		l, w := h.acquire(2)
		require.Nil(t, w)
		require.False(t, l.Acquired())
		require.Equal(t, OutcomePending, w1.Outcome(), "the existing waiter is untouched")
		if h.isConcurrency() {
			reason, ok := l.ReasonPhrase()
			require.True(t, ok)
			require.Equal(t, ReasonQueueLimitReached, reason)
		} else {
			_, ok := l.RetryAfter()
			require.True(t, ok)
		}
		h.requireStats(0, 1, 1, 1)
	})
}

func TestRef15_QueueAvailableAfterQueueLimitHitAndResourcesBecomeAvailable(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 1}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(1).Acquired())
		w1 := h.queue(1)
		l, w := h.acquire(1)
		require.Nil(t, w)
		require.False(t, l.Acquired())
		h.refill()
		require.Equal(t, OutcomeGranted, w1.Outcome())
		w2 := h.queue(1)
		h.refill()
		require.Equal(t, OutcomeGranted, w2.Outcome())
	})
}

func TestRef16_LargeAcquiresAndQueuesDoNotOverflow(t *testing.T) {
	forEachKind(t, spec{limit: math.MaxInt64, queueLimit: math.MaxInt64, order: NewestFirst}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(math.MaxInt64).Acquired())
		w1 := h.queue(3)
		w2 := h.queue(math.MaxInt64)
		require.Equal(t, OutcomeEvicted, w1.Outcome())
		h.requireStats(0, math.MaxInt64, 1, 1)
		h.refill()
		require.Equal(t, OutcomeGranted, w2.Outcome())
		require.Equal(t, int64(math.MaxInt64), w2.Lease().Permits())
		h.requireStats(0, 0, 1, 2)
	})
}

func TestRef17_CanDequeueMultipleResourcesAtOnce(t *testing.T) {
	forEachKind(t, spec{limit: 2, queueLimit: 4}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(2).Acquired())
		w1, w2 := h.queue(1), h.queue(1)
		h.refill()
		require.Equal(t, OutcomeGranted, w1.Outcome())
		require.Equal(t, OutcomeGranted, w2.Outcome())
		require.Equal(t, []*Waiter{w1, w2}, h.completed)
	})
}

func TestRef18_CanCancelAfterQueuing(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 1}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(1).Acquired())
		w := h.queue(1)
		require.True(t, h.core.Cancel(h.now, w))
		require.Equal(t, OutcomeCanceled, w.Outcome())
		require.False(t, w.Lease().Acquired())
		require.Equal(t, []*Waiter{w}, h.completed, "the handler learns of the cancellation")
		require.False(t, h.core.Cancel(h.now, w), "a second cancel does nothing")
		h.requireStats(0, 0, 0, 1)
		h.refill()
		h.requireStats(1, 0, 0, 1) // nothing leaked to the cancelled waiter
	})
}

// TestRef19 (cancelled before queuing) is about the blocking Acquire and is
// in limiter_test.go.

func TestRef20_CancelUpdatesQueueLimit(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 1}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(1).Acquired())
		w1 := h.queue(1)
		require.True(t, h.core.Cancel(h.now, w1))
		w2 := h.queue(1)
		h.refill()
		require.Equal(t, OutcomeGranted, w2.Outcome())
		h.requireStats(0, 0, 0, 2)
	})
}

func TestRef21_CanFillQueueOldestFirstAfterCancelingFirstQueuedRequest(t *testing.T) {
	forEachKind(t, spec{limit: 3, queueLimit: 2}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(3).Acquired())
		w2 := h.queue(2)
		require.True(t, h.core.Cancel(h.now, w2))
		w1 := h.queue(1)
		h.refill()
		require.Equal(t, OutcomeGranted, w1.Outcome(), "the cancelled head is skipped")
		h.requireStats(2, 0, 0, 2)
	})
}

func TestRef22_CanFillQueueNewestFirstAfterCancelingQueuedRequest(t *testing.T) {
	forEachKind(t, spec{limit: 2, queueLimit: 2, order: NewestFirst}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(2).Acquired())
		cancelled := h.queue(1)
		live := h.queue(1)
		require.True(t, h.core.Cancel(h.now, cancelled))
		big := h.queue(2)
		require.Equal(t, OutcomeCanceled, cancelled.Outcome())
		require.Equal(t, OutcomeEvicted, live.Outcome())
		h.requireStats(0, 2, 1, 1) // the cancelled one is not counted
		h.refill()
		require.Equal(t, OutcomeGranted, big.Outcome())
	})
}

func TestRef23_CannotAttemptWithQueuedItemsIfOldestFirst(t *testing.T) {
	forEachKind(t, spec{limit: 2, queueLimit: 2, order: OldestFirst}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(1).Acquired())
		h.queue(2)
		require.False(t, h.attempt(1).Acquired())
		l, w := h.acquire(1)
		require.False(t, l.Acquired())
		require.Nil(t, w, "the queue (2 permits) is full")
	})
}

func TestRef24_CanAttemptWithQueuedItemsIfNewestFirst(t *testing.T) {
	forEachKind(t, spec{limit: 2, queueLimit: 2, order: NewestFirst}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(1).Acquired())
		w := h.queue(2)
		require.True(t, h.attempt(1).Acquired())
		require.Equal(t, OutcomePending, w.Outcome())
	})
}

func TestRef25_AcquireQueuesBehindWaitersIfOldestFirst(t *testing.T) {
	forEachKind(t, spec{limit: 2, queueLimit: 3, order: OldestFirst}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(2).Acquired())
		w2, w1 := h.queue(2), h.queue(1)
		h.refill()
		require.Equal(t, OutcomeGranted, w2.Outcome())
		require.Equal(t, OutcomePending, w1.Outcome())
		h.requireStats(0, 1, 0, 2)
		h.refill()
		require.Equal(t, OutcomeGranted, w1.Outcome())
	})
}

func TestRef26_CloseReleasesQueuedAcquires(t *testing.T) {
	for _, order := range []QueueOrder{OldestFirst, NewestFirst} {
		t.Run(order.String(), func(t *testing.T) {
			forEachKind(t, spec{limit: 1, queueLimit: 3, order: order}, func(t *testing.T, h *harness) {
				require.True(t, h.attempt(1).Acquired())
				w1, w2, w3 := h.queue(1), h.queue(1), h.queue(1)
				h.core.Close(h.now)
				for _, w := range []*Waiter{w1, w2, w3} {
					require.Equal(t, OutcomeClosed, w.Outcome())
					require.False(t, w.Lease().Acquired())
					_, ok := w.Lease().RetryAfter()
					require.False(t, ok)
				}
				if order == OldestFirst {
					require.Equal(t, []*Waiter{w1, w2, w3}, h.completed)
				} else {
					require.Equal(t, []*Waiter{w3, w2, w1}, h.completed)
				}
				_, err := h.core.AttemptAcquire(h.now, 1)
				require.ErrorIs(t, err, ErrClosed)
				_, err = h.core.AttemptAcquire(h.now, 0)
				require.ErrorIs(t, err, ErrClosed)
				_, _, err = h.core.Acquire(h.now, 1)
				require.ErrorIs(t, err, ErrClosed)
				_, _, err = h.core.Acquire(h.now, 0)
				require.ErrorIs(t, err, ErrClosed)
			})
		})
	}
}

func TestRef27_StatisticsHaveCorrectValues(t *testing.T) {
	forEachKind(t, spec{limit: 100, queueLimit: 50}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(60).Acquired())
		h.requireStats(40, 0, 0, 1)
		h.queue(50)
		h.requireStats(40, 50, 0, 1)
		l, w := h.acquire(1)
		require.Nil(t, w)
		require.False(t, l.Acquired())
		h.requireStats(40, 50, 1, 1)
		require.False(t, h.attempt(100).Acquired())
		h.requireStats(40, 50, 2, 1)
		h.refill()
		h.requireStats(50, 0, 2, 2)
	})

	// The bucket version: 30 tokens per period.
	tb, err := NewTokenBucket(TokenBucketOptions{TokenLimit: 100, TokensPerPeriod: 30, QueueLimit: 50,
		ReplenishmentPeriod: period, ManualReplenishment: true}, t0)
	require.NoError(t, err)
	h := newHarness(t, tb)
	require.True(t, h.attempt(60).Acquired())
	h.queue(50)
	h.acquire(1)
	h.attempt(100)
	h.refill()
	h.requireStats(20, 0, 2, 2)
}

func TestRef28_StatisticsWithZeroPermitCount(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 1}, func(t *testing.T, h *harness) {
		require.True(t, h.attempt(0).Acquired())
		l, w := h.acquire(0)
		require.Nil(t, w)
		require.True(t, l.Acquired())
		h.requireStats(1, 0, 0, 2)
		require.True(t, h.attempt(1).Acquired())
		require.False(t, h.attempt(0).Acquired())
		h.requireStats(0, 0, 1, 3)
	})
}

func TestRef29_StatisticsAfterCloseAndSnapshots(t *testing.T) {
	forEachKind(t, spec{limit: 2}, func(t *testing.T, h *harness) {
		before := h.stats()
		h.attempt(1)
		after := h.stats()
		require.NotEqual(t, before, after, "a snapshot does not follow the limiter")
		require.Equal(t, int64(2), before.AvailablePermits)
		h.core.Close(h.now)
		_, err := h.core.Statistics()
		require.ErrorIs(t, err, ErrClosed)
	})
}

func TestRef30_RetryMetadataOnFailedAcquire(t *testing.T) {
	tb := newBucket(t, TokenBucketOptions{TokenLimit: 2, TokensPerPeriod: 1, ReplenishmentPeriod: 20 * time.Second})
	mustAcquire(t, tb, t0, 2)
	l, w, err := tb.Acquire(t0, 2)
	require.NoError(t, err)
	require.Nil(t, w)
	requireRetry(t, l, 40*time.Second)

	fw, err := NewFixedWindow(FixedWindowOptions{PermitLimit: 2, Window: 20 * time.Second, ManualReplenishment: true}, t0)
	require.NoError(t, err)
	mustAcquire(t, fw, t0, 2)
	l, _, err = fw.Acquire(t0, 2)
	require.NoError(t, err)
	requireRetry(t, l, 20*time.Second)
}

func TestRef31_CorrectRetryMetadataWithQueuedItem(t *testing.T) {
	tb := newBucket(t, TokenBucketOptions{TokenLimit: 2, TokensPerPeriod: 1, QueueLimit: 1, ReplenishmentPeriod: 20 * time.Second})
	mustAcquire(t, tb, t0, 2)
	_, w, _ := tb.Acquire(t0, 1)
	require.NotNil(t, w)
	l, _, _ := tb.Acquire(t0, 2)
	requireRetry(t, l, 60*time.Second)

	// The fixed window answers the time left, whatever is queued.
	fw, err := NewFixedWindow(FixedWindowOptions{PermitLimit: 2, QueueLimit: 1, Window: 20 * time.Second, ManualReplenishment: true}, t0)
	require.NoError(t, err)
	mustAcquire(t, fw, t0, 2)
	_, w, _ = fw.Acquire(t0, 1)
	require.NotNil(t, w)
	l, _, _ = fw.Acquire(t0.Add(5*time.Second), 2)
	requireRetry(t, l, 15*time.Second)
}

func TestRef32_CorrectRetryMetadataWithMultipleTokensPerPeriod(t *testing.T) {
	for _, tpp := range []int64{2, 100} {
		tb := newBucket(t, TokenBucketOptions{TokenLimit: 2, TokensPerPeriod: tpp, QueueLimit: 1, ReplenishmentPeriod: 20 * time.Second})
		mustAcquire(t, tb, t0, 2)
		_, w, _ := tb.Acquire(t0, 1)
		require.NotNil(t, w)
		l, _, _ := tb.Acquire(t0, 2)
		requireRetry(t, l, 20*time.Second)
	}
}

func TestRef33_ReasonMetadataOnFailedAcquire(t *testing.T) {
	c, err := NewConcurrency(ConcurrencyOptions{PermitLimit: 2, QueueLimit: 1}, t0)
	require.NoError(t, err)
	mustAcquire(t, c, t0, 2)
	l, w, err := c.Acquire(t0, 2)
	require.NoError(t, err)
	require.Nil(t, w)
	require.False(t, l.Acquired())
	reason, ok := l.ReasonPhrase()
	require.True(t, ok)
	require.Equal(t, "Queue limit reached", reason)
	v, ok := l.Metadata(MetadataReasonPhrase)
	require.True(t, ok)
	require.Equal(t, "Queue limit reached", v)
	_, ok = l.Metadata(MetadataRetryAfter)
	require.False(t, ok)
}

func TestRef34_SlidingRetryAfterWithPartiallyElapsedSegment(t *testing.T) {
	sw := newSliding(t, SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 4, Window: 20 * time.Second})
	mustAcquire(t, sw, t0, 1)
	l, _ := sw.AttemptAcquire(t0, 1)
	requireRetry(t, l, 20*time.Second)
	l, _ = sw.AttemptAcquire(t0.Add(2*time.Second), 1)
	requireRetry(t, l, 18*time.Second)
}

func TestRef35_SlidingRetryAfterClampsToZeroWhenWindowExpired(t *testing.T) {
	sw := newSliding(t, SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 4, Window: 20 * time.Second})
	mustAcquire(t, sw, t0, 1)
	l, _ := sw.AttemptAcquire(t0.Add(25*time.Second), 1)
	requireRetry(t, l, 0)
}

func TestRef36_SlidingRetryAfterAccountsForPermitsAcrossSegments(t *testing.T) {
	sw := newSliding(t, SlidingWindowOptions{PermitLimit: 4, SegmentsPerWindow: 4, Window: 8 * time.Second})
	mustAcquire(t, sw, t0, 3)
	require.True(t, sw.TryReplenish(t0.Add(2*time.Second)))
	mustAcquire(t, sw, t0.Add(2*time.Second), 1)
	l, _ := sw.AttemptAcquire(t0.Add(2*time.Second), 2)
	requireRetry(t, l, 6*time.Second)
}

func TestRef37_SlidingRetryMetadataOnFailedAttemptZero(t *testing.T) {
	sw := newSliding(t, SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 4, Window: 20 * time.Second})
	mustAcquire(t, sw, t0, 1)
	l, _ := sw.AttemptAcquire(t0, 0)
	requireRetry(t, l, 20*time.Second)
}

func TestRef38_Replenishment(t *testing.T) {
	t.Run("HonorsTokensPerPeriod", func(t *testing.T) {
		tb := newBucket(t, TokenBucketOptions{TokenLimit: 7, TokensPerPeriod: 3, ReplenishmentPeriod: time.Millisecond})
		mustAcquire(t, tb, t0, 5)
		requireAvailable(t, tb, 2)
		tb.TryReplenish(ms(1))
		requireAvailable(t, tb, 5)
		tb.TryReplenish(ms(2))
		requireAvailable(t, tb, 7)
	})
	t.Run("AllTokensAvailableNoops", func(t *testing.T) {
		tb := newBucket(t, TokenBucketOptions{TokenLimit: 7, TokensPerPeriod: 3, ReplenishmentPeriod: time.Millisecond})
		require.True(t, tb.TryReplenish(ms(1)))
		requireAvailable(t, tb, 7)
	})
	t.Run("AutoReplenishReturnsFalse", func(t *testing.T) {
		tb, err := NewTokenBucket(TokenBucketOptions{TokenLimit: 7, TokensPerPeriod: 3, ReplenishmentPeriod: time.Millisecond}, t0)
		require.NoError(t, err)
		mustAcquire(t, tb, t0, 5)
		require.False(t, tb.TryReplenish(ms(10)))
		requireAvailable(t, tb, 2)
		fw, err := NewFixedWindow(FixedWindowOptions{PermitLimit: 7, Window: time.Millisecond}, t0)
		require.NoError(t, err)
		mustAcquire(t, fw, t0, 5)
		require.False(t, fw.TryReplenish(ms(10)))
		requireAvailable(t, fw, 2)
		sw, err := NewSlidingWindow(SlidingWindowOptions{PermitLimit: 7, SegmentsPerWindow: 1, Window: time.Millisecond}, t0)
		require.NoError(t, err)
		mustAcquire(t, sw, t0, 5)
		require.False(t, sw.TryReplenish(ms(10)))
		requireAvailable(t, sw, 2)
	})
}

func TestRef39_AutoReplenishIgnoresTimerJitter(t *testing.T) {
	t.Run("FixedWindow", func(t *testing.T) {
		fw, err := NewFixedWindow(FixedWindowOptions{PermitLimit: 10, Window: 100 * time.Millisecond}, t0)
		require.NoError(t, err)
		mustAcquire(t, fw, t0, 3)
		fw.Tick(ms(99)) // early, still a full reset
		requireAvailable(t, fw, 10)
	})
	t.Run("TokenBucket", func(t *testing.T) {
		tb, err := NewTokenBucket(TokenBucketOptions{TokenLimit: 10, TokensPerPeriod: 1, ReplenishmentPeriod: 100 * time.Millisecond}, t0)
		require.NoError(t, err)
		mustAcquire(t, tb, t0, 3)
		tb.Tick(ms(99))
		requireAvailable(t, tb, 8)
		tb.Tick(ms(1000)) // late, still one period's tokens
		requireAvailable(t, tb, 9)
	})
	t.Run("SlidingWindow", func(t *testing.T) {
		sw, err := NewSlidingWindow(SlidingWindowOptions{PermitLimit: 10, SegmentsPerWindow: 2, Window: 200 * time.Millisecond}, t0)
		require.NoError(t, err)
		mustAcquire(t, sw, t0, 3)
		sw.Tick(ms(99))
		requireAvailable(t, sw, 7)
		mustAcquire(t, sw, ms(99), 3)
		requireAvailable(t, sw, 4)
		sw.Tick(ms(150))
		requireAvailable(t, sw, 7)
	})
}

func TestRef40_SlidingCanAcquireMultipleRequests(t *testing.T) {
	sw := newSliding(t, SlidingWindowOptions{PermitLimit: 4, SegmentsPerWindow: 3, Window: 3 * time.Millisecond,
		QueueLimit: 4, QueueOrder: NewestFirst})
	h := newHarness(t, sw)
	require.True(t, h.attempt(2).Acquired())
	w3 := h.queue(3)
	sw.TryReplenish(ms(1))
	h.now = ms(1)
	require.True(t, h.attempt(2).Acquired(), "NewestFirst serves a new request at once")
	sw.TryReplenish(ms(2))
	h.now = ms(2)
	w2 := h.queue(2)
	require.Equal(t, OutcomeEvicted, w3.Outcome())
	sw.TryReplenish(ms(3)) // frees segment 0
	require.Equal(t, OutcomeGranted, w2.Outcome())
	require.False(t, w3.Lease().Acquired())
	requireAvailable(t, sw, 0)
}

func TestRefRelated_ReplenishingProperties(t *testing.T) {
	fw, err := NewFixedWindow(FixedWindowOptions{PermitLimit: 1, Window: 3 * time.Second}, t0)
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, fw.ReplenishmentPeriod())
	require.False(t, fw.Options().ManualReplenishment)
	sw, err := NewSlidingWindow(SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 3, Window: 10 * time.Second, ManualReplenishment: true}, t0)
	require.NoError(t, err)
	// Window.Ticks / SegmentsPerWindow: integer division of 100 ns ticks
	// (§1), so 10 s / 3 is 33333333 ticks.
	require.Equal(t, 3333333300*time.Nanosecond, sw.ReplenishmentPeriod(), "integer division of 100 ns ticks")
	require.True(t, sw.Options().ManualReplenishment)
	tb, err := NewTokenBucket(TokenBucketOptions{TokenLimit: 1, TokensPerPeriod: 1, ReplenishmentPeriod: 7 * time.Second}, t0)
	require.NoError(t, err)
	require.Equal(t, 7*time.Second, tb.ReplenishmentPeriod())
}

func TestRefRelated_PartialManualReplenishDoesNotGrantEarly(t *testing.T) {
	tb := newBucket(t, TokenBucketOptions{TokenLimit: 1, TokensPerPeriod: 1, QueueLimit: 1, ReplenishmentPeriod: 2 * time.Millisecond})
	mustAcquire(t, tb, t0, 1)
	_, w, err := tb.Acquire(t0, 1)
	require.NoError(t, err)
	tb.TryReplenish(ms(1))
	require.Equal(t, OutcomePending, w.Outcome(), "half a token")
	tb.TryReplenish(ms(3))
	require.Equal(t, OutcomeGranted, w.Outcome())
}

// Helpers for the algorithm-specific tests.

func newBucket(t *testing.T, o TokenBucketOptions) *TokenBucket {
	t.Helper()
	o.ManualReplenishment = true
	tb, err := NewTokenBucket(o, t0)
	require.NoError(t, err)
	return tb
}

func newSliding(t *testing.T, o SlidingWindowOptions) *SlidingWindow {
	t.Helper()
	o.ManualReplenishment = true
	sw, err := NewSlidingWindow(o, t0)
	require.NoError(t, err)
	return sw
}

func mustAcquire(t *testing.T, c Core, now time.Time, n int64) Lease {
	t.Helper()
	l, err := c.AttemptAcquire(now, n)
	require.NoError(t, err)
	require.True(t, l.Acquired(), "acquire %d", n)
	return l
}

func requireRetry(t *testing.T, l Lease, want time.Duration) {
	t.Helper()
	require.False(t, l.Acquired())
	got, ok := l.RetryAfter()
	require.True(t, ok, "no RETRY_AFTER on %v", l)
	require.Equal(t, want, got)
	v, ok := l.Metadata(MetadataRetryAfter)
	require.True(t, ok)
	require.Equal(t, want, v)
}

func requireAvailable(t *testing.T, c Core, want int64) {
	t.Helper()
	s, err := c.Statistics()
	require.NoError(t, err)
	require.Equal(t, want, s.AvailablePermits)
}
