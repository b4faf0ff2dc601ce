package limiter

// Edge cases of limiter-semantics.md: argument errors, zero permits, queue
// limits, eviction, retry-after and replenishment, close. Each test
// names the section it checks.

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// §1, §3.1 step 1, §3.2 steps 1-2, §9: argument errors come before the
// closed check, for every algorithm and every count, attempt and queued.
func TestArgumentErrorsBeforeClosed(t *testing.T) {
	forEachKind(t, spec{limit: 2, queueLimit: 2}, func(t *testing.T, h *harness) {
		h.core.Close(h.now)
		for _, c := range []struct {
			n    int64
			want error
		}{{-1, ErrNegativeCount}, {math.MinInt64, ErrNegativeCount}, {3, ErrCountExceedsLimit},
			{math.MaxInt64, ErrCountExceedsLimit}, {0, ErrClosed}, {1, ErrClosed}, {2, ErrClosed}} {
			_, err := h.core.AttemptAcquire(h.now, c.n)
			require.ErrorIs(t, err, c.want, "AttemptAcquire(%d)", c.n)
			_, w, err := h.core.Acquire(h.now, c.n)
			require.ErrorIs(t, err, c.want, "Acquire(%d)", c.n)
			require.Nil(t, w)
		}
		_, err := h.core.Statistics()
		require.ErrorIs(t, err, ErrClosed)
	})
}

// §1 (AcquireAsync step 2) and "Decisions": a context that is already done
// wins over a count above the limit and over a closed limiter, but not over
// a negative count; it touches nothing.
func TestWrapperDoneContextOrdering(t *testing.T) {
	fw, err := NewFixedWindow(FixedWindowOptions{PermitLimit: 1, QueueLimit: 1, Window: time.Second, ManualReplenishment: true}, t0)
	require.NoError(t, err)
	l, _ := newFakeLimiter(t, fw)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	_, err = l.Acquire(ctx, -1)
	require.ErrorIs(t, err, ErrNegativeCount)
	_, err = l.Acquire(ctx, 2)
	require.ErrorIs(t, err, context.Canceled, "cancelled before the call: count > limit is not looked at")
	_, err = l.Acquire(ctx, 1)
	require.ErrorIs(t, err, context.Canceled, "cancelled even though a permit is free")
	s, err := l.Statistics()
	require.NoError(t, err)
	require.Equal(t, Statistics{AvailablePermits: 1}, s, "the limiter was not touched")

	_, err = l.Acquire(context.Background(), 2)
	require.ErrorIs(t, err, ErrCountExceedsLimit)
	l.Close()
	_, err = l.Acquire(ctx, 1)
	require.ErrorIs(t, err, context.Canceled)
	_, err = l.Acquire(context.Background(), 2)
	require.ErrorIs(t, err, ErrCountExceedsLimit, "AOORE before ODE after close")
	_, err = l.Acquire(context.Background(), 0)
	require.ErrorIs(t, err, ErrClosed)
	_, err = l.AttemptAcquire(0)
	require.ErrorIs(t, err, ErrClosed)
	require.True(t, l.TryReplenish(), "§9: manual TryReplenish after close returns true")
}

// §3.2 step 3 and §3.1 step 2: a zero-permit request is served while any
// permit is free even behind OldestFirst waiters, takes nothing, counts as a
// success and leaves the idle mark alone.
func TestZeroPermitFastPathIgnoresQueue(t *testing.T) {
	forEachKind(t, spec{limit: 3, queueLimit: 3}, func(t *testing.T, h *harness) {
		h.attempt(1)
		h.queue(3)
		h.requireStats(2, 3, 0, 1)
		l, w := h.acquire(0)
		require.Nil(t, w)
		require.True(t, l.Acquired())
		require.Zero(t, l.ID(), "§6: zero-permit successes are shared leases")
		require.True(t, h.attempt(0).Acquired())
		require.False(t, h.attempt(1).Acquired(), "§3.3: OldestFirst blocks non-zero requests")
		h.requireStats(2, 3, 1, 3)
	})
}

// §3.1 step 2, §8: zero-permit acquisitions never affect the idle mark.
func TestZeroPermitLeavesIdleMark(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 1}, func(t *testing.T, h *harness) {
		h.now = ms(5)
		require.True(t, h.attempt(0).Acquired())
		_, w := h.acquire(0)
		require.Nil(t, w)
		d, ok := h.core.IdleDuration(h.now)
		require.True(t, ok)
		require.Equal(t, 5*time.Millisecond, d, "still idle since construction")

		h.attempt(1)
		_, ok = h.core.IdleDuration(h.now)
		require.False(t, ok)
		require.False(t, h.attempt(0).Acquired())
		_, ok = h.core.IdleDuration(h.now)
		require.False(t, ok, "a failed zero request does not set the mark either")
	})
}

// §3.2 step 5: n = 0 always queues, even with QL = 0, adds nothing to Q,
// and is granted (and counted) by the next processing run.
func TestZeroPermitQueuesWithZeroQueueLimit(t *testing.T) {
	for _, order := range []QueueOrder{OldestFirst, NewestFirst} {
		t.Run(order.String(), func(t *testing.T) {
			forEachKind(t, spec{limit: 1, queueLimit: 0, order: order}, func(t *testing.T, h *harness) {
				h.attempt(1)
				w := h.queue(0)
				w2 := h.queue(0)
				h.requireStats(0, 0, 0, 1)
				l, w3 := h.acquire(1)
				require.Nil(t, w3)
				require.False(t, l.Acquired(), "QL = 0 refuses a non-zero request")
				h.requireStats(0, 0, 1, 1)
				h.refill()
				require.Equal(t, OutcomeGranted, w.Outcome())
				require.Equal(t, OutcomeGranted, w2.Outcome())
				require.True(t, w.Lease().Acquired())
				require.Zero(t, w.Lease().ID())
				h.requireStats(1, 0, 1, 3)
			})
		})
	}
}

// §3.2 step 5: queue capacity is in permits, the test is a subtraction that
// cannot overflow at the int64 limits, and OldestFirst rejects what does not
// fit without evicting.
func TestQueueLimitInPermitsNoOverflow(t *testing.T) {
	const big = math.MaxInt64
	forEachKind(t, spec{limit: big, queueLimit: big}, func(t *testing.T, h *harness) {
		h.attempt(big)
		a := h.queue(big - 1)
		l, w := h.acquire(2)
		require.Nil(t, w)
		require.False(t, l.Acquired())
		b := h.queue(1)
		l, w = h.acquire(1)
		require.Nil(t, w)
		require.False(t, l.Acquired())
		h.requireStats(0, big, 2, 1)
		require.Equal(t, OutcomePending, a.Outcome())
		require.Equal(t, OutcomePending, b.Outcome())
	})
}

// §3.2 (NewestFirst eviction), §7: eviction takes the head one entry at a
// time; an already-cancelled head frees no extra space and is not counted;
// evicted waiters get a failed lease without values that still lists its
// metadata name (§1, §4).
func TestEvictionFromHeadSkipsCancelled(t *testing.T) {
	forEachKind(t, spec{limit: 2, queueLimit: 3, order: NewestFirst}, func(t *testing.T, h *harness) {
		h.attempt(2)
		a := h.queue(1)
		b := h.queue(1)
		c := h.queue(1)
		require.True(t, h.core.Cancel(h.now, a))
		h.requireStats(0, 2, 0, 1)
		d := h.queue(2) // room 1: drop a (stale, frees nothing), then evict b
		require.Equal(t, OutcomeCanceled, a.Outcome())
		require.Equal(t, OutcomeEvicted, b.Outcome())
		require.Equal(t, OutcomePending, c.Outcome())
		h.requireStats(0, 3, 1, 1)
		require.Equal(t, []*Waiter{a, b}, h.completed)

		evicted := b.Lease()
		require.False(t, evicted.Acquired())
		_, ok := evicted.RetryAfter()
		require.False(t, ok)
		_, ok = evicted.ReasonPhrase()
		require.False(t, ok)
		if h.isConcurrency() {
			require.Equal(t, []string{MetadataReasonPhrase}, evicted.MetadataNames())
		} else {
			require.Equal(t, []string{MetadataRetryAfter}, evicted.MetadataNames())
		}

		// Processing from the tail: d (2) first.
		h.refill()
		require.Equal(t, OutcomeGranted, d.Outcome())
		require.Equal(t, OutcomePending, c.Outcome())
		h.requireStats(0, 1, 1, 2)
	})
}

// §3.4 step 4: head-of-line blocking in both orders, with a partial refill
// (concurrency release, sliding-window slide) so that the blocked request
// does not fit while a smaller one behind it would.
func TestHeadOfLineBlockingBothOrders(t *testing.T) {
	for _, order := range []QueueOrder{OldestFirst, NewestFirst} {
		t.Run(order.String(), func(t *testing.T) {
			conc, err := NewConcurrency(ConcurrencyOptions{PermitLimit: 4, QueueLimit: 10, QueueOrder: order}, t0)
			require.NoError(t, err)
			sw, err := NewSlidingWindow(SlidingWindowOptions{PermitLimit: 4, SegmentsPerWindow: 2, QueueLimit: 10,
				QueueOrder: order, Window: 2 * time.Second, ManualReplenishment: true}, t0)
			require.NoError(t, err)
			for _, core := range []Core{conc, sw} {
				h := newHarness(t, core)
				h.attempt(2) // segment 0
				if core == Core(sw) {
					require.True(t, sw.TryReplenish(ms(1000))) // frees nothing
				}
				h.attempt(2) // segment 1
				// The blocking request sits where processing looks first.
				var big, small *Waiter
				if order == OldestFirst {
					big, small = h.queue(3), h.queue(1)
				} else {
					small, big = h.queue(1), h.queue(3)
				}
				switch c := core.(type) {
				case *Concurrency:
					require.NoError(t, c.Release(ms(1), 2))
				case *SlidingWindow:
					require.True(t, c.TryReplenish(ms(2000))) // frees segment 0
				}
				require.Equal(t, OutcomePending, big.Outcome(), "%T", core)
				require.Equal(t, OutcomePending, small.Outcome(), "%T: blocked behind the 3", core)
				h.requireStats(2, 4, 0, 2)
			}
		})
	}
}

// §3.4 step 2, §3.5: cancelled entries are skipped where processing meets
// them, in both orders, and Q drops exactly once.
func TestStaleEntriesSkippedAndCountedOnce(t *testing.T) {
	for _, order := range []QueueOrder{OldestFirst, NewestFirst} {
		t.Run(order.String(), func(t *testing.T) {
			forEachKind(t, spec{limit: 2, queueLimit: 4, order: order}, func(t *testing.T, h *harness) {
				h.attempt(2)
				first := h.queue(2)
				second := h.queue(1)
				last := h.queue(1)
				stale := first
				if order == NewestFirst {
					stale = last
				}
				require.True(t, h.core.Cancel(h.now, stale))
				require.False(t, h.core.Cancel(h.now, stale), "a second cancel does nothing")
				h.requireStats(0, 4-stale.Permits(), 0, 1)
				h.refill()
				require.Equal(t, OutcomeGranted, second.Outcome())
				other := last
				if order == NewestFirst {
					other = first
					require.Equal(t, OutcomePending, other.Outcome(), "the 2 does not fit after the 1")
					h.requireStats(1, 2, 0, 2)
					return
				}
				require.Equal(t, OutcomeGranted, other.Outcome())
				require.False(t, h.core.Cancel(h.now, other), "cancelling a granted waiter does nothing")
				h.requireStats(0, 0, 0, 3)
			})
		})
	}
}

// §7: evictions count as failures; cancellations, close and errors do not.
func TestCountersPerSection7(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 1, order: NewestFirst}, func(t *testing.T, h *harness) {
		h.attempt(1)
		a := h.queue(1)
		b := h.queue(1) // evicts a
		require.Equal(t, OutcomeEvicted, a.Outcome())
		h.requireStats(0, 1, 1, 1)
		require.True(t, h.core.Cancel(h.now, b))
		h.requireStats(0, 0, 1, 1)
		_, err := h.core.AttemptAcquire(h.now, 2)
		require.Error(t, err)
		_, _, err = h.core.Acquire(h.now, -1)
		require.Error(t, err)
		c := h.queue(1)
		h.requireStats(0, 1, 1, 1)
		h.core.Close(h.now)
		require.Equal(t, OutcomeClosed, c.Outcome())
		s := h.core.(interface{ State() State }).State()
		require.Equal(t, int64(1), s.TotalFailedLeases, "close is not a failure")
		require.Equal(t, int64(1), s.TotalSuccessfulLeases)
	})
}

// §9: close fails waiters in processing order (tail first for NewestFirst),
// skipping cancelled ones, with leases that carry no values; a second close
// does nothing; later calls behave as specified.
func TestCloseOrderAndAfterwards(t *testing.T) {
	for _, order := range []QueueOrder{OldestFirst, NewestFirst} {
		t.Run(order.String(), func(t *testing.T) {
			forEachKind(t, spec{limit: 1, queueLimit: 3, order: order}, func(t *testing.T, h *harness) {
				h.attempt(1)
				a, b, c := h.queue(1), h.queue(1), h.queue(1)
				require.True(t, h.core.Cancel(h.now, b))
				h.completed = nil
				h.core.Close(h.now)
				want := []*Waiter{a, c}
				if order == NewestFirst {
					want = []*Waiter{c, a}
				}
				require.Equal(t, want, h.completed)
				for _, w := range want {
					require.Equal(t, OutcomeClosed, w.Outcome())
					l := w.Lease()
					require.False(t, l.Acquired())
					for _, name := range []string{MetadataRetryAfter, MetadataReasonPhrase} {
						_, ok := l.Metadata(name)
						require.False(t, ok, name)
					}
					require.NotEmpty(t, l.MetadataNames())
				}
				require.False(t, h.core.Cancel(h.now, a))
				h.core.Close(h.now)
				require.Len(t, h.completed, 2)

				h.now = h.now.Add(10 * period)
				switch c := h.core.(type) {
				case *Concurrency:
					require.NoError(t, c.Release(h.now, 1), "release after close returns at once")
				case interface{ TryReplenish(time.Time) bool }:
					require.True(t, c.TryReplenish(h.now), "manual TryReplenish after close returns true")
				}
				h.core.Tick(h.now)
				_, ok := h.core.NextTick(h.now)
				require.False(t, ok)
				st := h.core.(interface{ State() State }).State()
				require.Equal(t, int64(0), st.AvailablePermits, "nothing was replenished after close")
			})
		})
	}
}

// §5: with automatic replenishment TryReplenish returns false even after
// close.
func TestAutoTryReplenishFalseAfterClose(t *testing.T) {
	fw, _ := NewFixedWindow(FixedWindowOptions{PermitLimit: 1, Window: time.Second}, t0)
	sw, _ := NewSlidingWindow(SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 2, Window: time.Second}, t0)
	tb, _ := NewTokenBucket(TokenBucketOptions{TokenLimit: 1, TokensPerPeriod: 1, ReplenishmentPeriod: time.Second}, t0)
	for _, r := range []interface {
		TryReplenish(time.Time) bool
		Close(time.Time)
	}{fw, sw, tb} {
		require.False(t, r.TryReplenish(ms(5000)))
		r.Close(ms(5000))
		require.False(t, r.TryReplenish(ms(6000)))
	}
}

// §8: which replenish paths refresh the idle mark and which early returns
// do not.
func TestIdleMarkPerReplenishPath(t *testing.T) {
	t.Run("FixedWindowFullDoesNotRefresh", func(t *testing.T) {
		fw, _ := NewFixedWindow(FixedWindowOptions{PermitLimit: 2, Window: time.Second, ManualReplenishment: true}, t0)
		require.True(t, fw.TryReplenish(ms(1500))) // full: moves last only
		d, ok := fw.IdleDuration(ms(1600))
		require.True(t, ok)
		require.Equal(t, 1600*time.Millisecond, d)
		mustAcquire(t, fw, ms(1600), 1)
		_, ok = fw.IdleDuration(ms(1600))
		require.False(t, ok)
		require.True(t, fw.TryReplenish(ms(2499))) // too early since 1500
		_, ok = fw.IdleDuration(ms(2499))
		require.False(t, ok)
		require.True(t, fw.TryReplenish(ms(2500)))
		d, ok = fw.IdleDuration(ms(2700))
		require.True(t, ok)
		require.Equal(t, 200*time.Millisecond, d)
	})
	t.Run("SlidingFreedZeroDoesNotRefresh", func(t *testing.T) {
		sw := newSliding(t, SlidingWindowOptions{PermitLimit: 2, SegmentsPerWindow: 2, Window: 2 * time.Second, ManualReplenishment: true})
		require.True(t, sw.TryReplenish(ms(1000))) // frees 0
		d, ok := sw.IdleDuration(ms(1000))
		require.True(t, ok)
		require.Equal(t, time.Second, d)
		mustAcquire(t, sw, ms(1000), 2) // segment 1
		require.True(t, sw.TryReplenish(ms(2000)))
		_, ok = sw.IdleDuration(ms(2000))
		require.False(t, ok, "the slide freed nothing")
		require.True(t, sw.TryReplenish(ms(3000)))
		d, ok = sw.IdleDuration(ms(3500))
		require.True(t, ok)
		require.Equal(t, 500*time.Millisecond, d)
	})
	t.Run("BucketFullDoesNotRefresh", func(t *testing.T) {
		tb := newBucket(t, TokenBucketOptions{TokenLimit: 2, TokensPerPeriod: 1, ReplenishmentPeriod: time.Second, ManualReplenishment: true})
		require.True(t, tb.TryReplenish(ms(5000)))
		d, ok := tb.IdleDuration(ms(5000))
		require.True(t, ok)
		require.Equal(t, 5*time.Second, d)
		mustAcquire(t, tb, ms(5000), 1)
		// Full bucket did not move last (t0): 5 s of refill restores the
		// token at once (§5.3 quirk).
		require.True(t, tb.TryReplenish(ms(5000)))
		d, ok = tb.IdleDuration(ms(5100))
		require.True(t, ok)
		require.Equal(t, 100*time.Millisecond, d)
	})
	t.Run("BucketPartialRefillStaysBusy", func(t *testing.T) {
		tb := newBucket(t, TokenBucketOptions{TokenLimit: 2, TokensPerPeriod: 1, ReplenishmentPeriod: time.Second, ManualReplenishment: true})
		mustAcquire(t, tb, t0, 2)
		require.True(t, tb.TryReplenish(ms(1000)))
		_, ok := tb.IdleDuration(ms(1000))
		require.False(t, ok)
		require.True(t, tb.TryReplenish(ms(2000)))
		d, ok := tb.IdleDuration(ms(2000))
		require.True(t, ok)
		require.Zero(t, d)
	})
	t.Run("ConcurrencyReleaseToFull", func(t *testing.T) {
		c, _ := NewConcurrency(ConcurrencyOptions{PermitLimit: 2, QueueLimit: 1}, t0)
		mustAcquire(t, c, t0, 2)
		_, w, _ := c.Acquire(t0, 1)
		require.NotNil(t, w)
		require.NoError(t, c.Release(ms(10), 2)) // grants the 1: not full
		_, ok := c.IdleDuration(ms(10))
		require.False(t, ok)
		require.NoError(t, c.Release(ms(20), 1))
		d, ok := c.IdleDuration(ms(30))
		require.True(t, ok)
		require.Equal(t, 10*time.Millisecond, d)
	})
}

// "Decisions" and §4.2: token bucket RETRY_AFTER with truncating division,
// floor 1, Q always added (NewestFirst too), for n = 0 as well.
func TestTokenBucketRetryAfter(t *testing.T) {
	const p = 20 * time.Second
	cases := []struct {
		name                   string
		limit, perPeriod, take int64
		queue                  []int64
		order                  QueueOrder
		ask                    int64
		want                   time.Duration
	}{
		{"need 2 tpp 1", 2, 1, 2, nil, OldestFirst, 2, 2 * p},
		{"queued adds", 2, 1, 2, []int64{1}, OldestFirst, 2, 3 * p},
		{"truncates", 2, 2, 2, []int64{1}, OldestFirst, 2, p},
		{"large tpp floors to 1", 2, 100, 2, nil, OldestFirst, 2, p},
		{"partial availability", 3, 1, 2, nil, OldestFirst, 3, 2 * p},
		{"zero ask, queued 2", 2, 1, 2, []int64{2}, OldestFirst, 0, 2 * p},
		{"NewestFirst still adds Q", 4, 1, 4, []int64{1, 2}, NewestFirst, 3, 6 * p},
		{"need <= 0 gives 1", 4, 1, 1, []int64{}, OldestFirst, 4, p},
		{"7/3 truncates to 2", 7, 3, 7, []int64{}, OldestFirst, 7, 2 * p},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tb := newBucket(t, TokenBucketOptions{TokenLimit: c.limit, TokensPerPeriod: c.perPeriod, QueueLimit: 10,
				QueueOrder: c.order, ReplenishmentPeriod: p, ManualReplenishment: true})
			mustAcquire(t, tb, t0, c.take)
			for _, q := range c.queue {
				_, w, err := tb.Acquire(t0, q)
				require.NoError(t, err)
				require.NotNil(t, w)
			}
			l, err := tb.AttemptAcquire(t0, c.ask)
			require.NoError(t, err)
			requireRetry(t, l, c.want)
		})
	}
}

// "Decisions" and §4.3: fixed window RETRY_AFTER is the time left in the
// window, measured from the last replenishment that passed the window check
// (construction until then), independent of n and Q.
func TestFixedWindowRetryAfterUsesLastReplenishment(t *testing.T) {
	fw, _ := NewFixedWindow(FixedWindowOptions{PermitLimit: 2, QueueLimit: 2, Window: time.Second, ManualReplenishment: true}, t0)
	mustAcquire(t, fw, t0, 2)
	l, _ := fw.AttemptAcquire(ms(300), 1)
	requireRetry(t, l, 700*time.Millisecond)
	require.True(t, fw.TryReplenish(ms(900))) // fails the window check: last stays t0
	l, _ = fw.AttemptAcquire(ms(900), 2)
	requireRetry(t, l, 100*time.Millisecond)
	_, w, _ := fw.Acquire(ms(900), 2)
	require.NotNil(t, w)
	l, rejected, _ := fw.Acquire(ms(950), 1) // queue full: same formula
	require.Nil(t, rejected)
	requireRetry(t, l, 50*time.Millisecond)
	l, _ = fw.AttemptAcquire(ms(2500), 0)
	requireRetry(t, l, 0)
	require.True(t, fw.TryReplenish(ms(2500))) // passes, grants the 2
	require.Equal(t, OutcomeGranted, w.Outcome())
	l, _ = fw.AttemptAcquire(ms(2600), 1)
	requireRetry(t, l, 900*time.Millisecond)
	// A replenish that passes the window check moves last even when the
	// window is already full (§5.1 step 2).
	fw2, _ := NewFixedWindow(FixedWindowOptions{PermitLimit: 1, Window: time.Second, ManualReplenishment: true}, t0)
	require.True(t, fw2.TryReplenish(ms(1000)))
	mustAcquire(t, fw2, ms(1200), 1)
	l, _ = fw2.AttemptAcquire(ms(1200), 1)
	requireRetry(t, l, 800*time.Millisecond)
	require.True(t, fw2.TryReplenish(ms(1999)))
	requireAvailable(t, fw2, 0)
	require.True(t, fw2.TryReplenish(ms(2000)), "elapsed == Window passes")
	requireAvailable(t, fw2, 1)
}

// "Decisions" and §4.4: the sliding walk, including k = 1 when the failure
// is caused only by waiters ahead, the n = 0 case, and the clamp at 0.
func TestSlidingRetryAfterWalk(t *testing.T) {
	t.Run("DeficitCoveredOnlyByWaiters", func(t *testing.T) {
		sw := newSliding(t, SlidingWindowOptions{PermitLimit: 2, SegmentsPerWindow: 4, QueueLimit: 5,
			Window: 4 * time.Second, ManualReplenishment: true})
		mustAcquire(t, sw, t0, 1)
		_, w, _ := sw.Acquire(t0, 2)
		require.NotNil(t, w)
		l, _ := sw.AttemptAcquire(ms(300), 1) // A = 1 >= 1: only the waiter blocks
		requireRetry(t, l, 700*time.Millisecond)
	})
	t.Run("WalkAcrossSegments", func(t *testing.T) {
		sw := newSliding(t, SlidingWindowOptions{PermitLimit: 4, SegmentsPerWindow: 4, QueueLimit: 5,
			Window: 4 * time.Second, ManualReplenishment: true})
		mustAcquire(t, sw, t0, 1)                  // segment 0
		require.True(t, sw.TryReplenish(ms(1000))) // current 1
		mustAcquire(t, sw, ms(1000), 2)            // segment 1
		require.True(t, sw.TryReplenish(ms(2000))) // current 2
		mustAcquire(t, sw, ms(2000), 1)            // segment 2
		// A = 0. Future slides free segments 3 (0), 0 (1), 1 (2), 2 (1).
		for _, c := range []struct {
			n    int64
			want time.Duration
		}{{0, 2*time.Second - 250*time.Millisecond}, {1, 2*time.Second - 250*time.Millisecond},
			{2, 3*time.Second - 250*time.Millisecond}, {3, 3*time.Second - 250*time.Millisecond},
			{4, 4*time.Second - 250*time.Millisecond}} {
			l, err := sw.AttemptAcquire(ms(2250), c.n)
			require.NoError(t, err)
			requireRetry(t, l, c.want)
		}
		// Queue-full rejection uses the same walk; queued permits do not count.
		_, w, _ := sw.Acquire(ms(2250), 4)
		require.NotNil(t, w)
		l, w, _ := sw.Acquire(ms(2250), 2)
		require.Nil(t, w)
		requireRetry(t, l, 3*time.Second-250*time.Millisecond)
		l, _ = sw.AttemptAcquire(ms(9000), 4)
		requireRetry(t, l, 0)
	})
}

// §5.2: exactly one segment per call whatever the gap; a slide that frees
// nothing returns before queue processing, so even a zero-permit waiter
// stays queued until a slide frees something.
func TestSlidingFreedZeroSkipsQueue(t *testing.T) {
	sw := newSliding(t, SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 3, QueueLimit: 1,
		Window: 3 * time.Second, ManualReplenishment: true})
	mustAcquire(t, sw, t0, 1) // segment 0
	_, w, _ := sw.Acquire(t0, 0)
	require.NotNil(t, w)
	require.True(t, sw.TryReplenish(ms(100000))) // one slide: frees segment 1 (0)
	require.Equal(t, OutcomePending, w.Outcome())
	require.True(t, sw.TryReplenish(ms(100500))) // too early
	require.True(t, sw.TryReplenish(ms(101000))) // frees segment 2 (0)
	require.Equal(t, OutcomePending, w.Outcome())
	requireAvailable(t, sw, 0)
	require.True(t, sw.TryReplenish(ms(102000))) // frees segment 0 (1)
	require.Equal(t, OutcomeGranted, w.Outcome())
	requireAvailable(t, sw, 1)
	st := sw.State()
	require.Equal(t, int64(2), st.TotalSuccessfulLeases)
}

// §5.1 step 3: a fixed-window replenish while full does not process the
// queue; here the queue can only hold a zero-permit waiter when A = 0, so
// check instead that a queued zero waiter is granted by the reset.
func TestFixedWindowGrantsZeroWaiterOnReset(t *testing.T) {
	fw, _ := NewFixedWindow(FixedWindowOptions{PermitLimit: 1, Window: time.Second, ManualReplenishment: true}, t0)
	mustAcquire(t, fw, t0, 1)
	_, w, _ := fw.Acquire(t0, 0)
	require.NotNil(t, w)
	require.True(t, fw.TryReplenish(ms(999)))
	require.Equal(t, OutcomePending, w.Outcome())
	require.True(t, fw.TryReplenish(ms(1000)))
	require.Equal(t, OutcomeGranted, w.Outcome())
	requireAvailable(t, fw, 1)
}

// §5.3: auto ticks add exactly TokensPerPeriod whatever the time; manual
// adds fractions; a full bucket keeps last.
func TestTokenBucketReplenishment(t *testing.T) {
	auto, err := NewTokenBucket(TokenBucketOptions{TokenLimit: 10, TokensPerPeriod: 3, ReplenishmentPeriod: time.Second}, t0)
	require.NoError(t, err)
	mustAcquire(t, auto, t0, 10)
	auto.Tick(ms(100)) // jitter: still exactly 3
	requireAvailable(t, auto, 3)
	auto.Tick(ms(50000)) // a long gap: still exactly 3
	requireAvailable(t, auto, 6)

	man := newBucket(t, TokenBucketOptions{TokenLimit: 10, TokensPerPeriod: 2, QueueLimit: 1,
		ReplenishmentPeriod: time.Second, ManualReplenishment: true})
	mustAcquire(t, man, t0, 10)
	_, w, _ := man.Acquire(t0, 1)
	require.NotNil(t, w)
	require.True(t, man.TryReplenish(ms(250))) // 0.5 token
	require.Equal(t, OutcomePending, w.Outcome())
	l, _ := man.AttemptAcquire(ms(250), 0)
	require.True(t, l.Acquired(), "a fraction serves a zero request")
	require.True(t, man.TryReplenish(ms(750))) // 1.5 tokens: grants the 1, 0.5 left
	require.Equal(t, OutcomeGranted, w.Outcome())
	requireAvailable(t, man, 0)
	require.True(t, man.TryReplenish(ms(1000))) // +0.5 -> 1.0
	requireAvailable(t, man, 1)
}

// §6 and the wrapper: a concurrency lease released twice returns its
// permits once; a zero-permit lease and a failed lease release nothing.
func TestWrapperDoubleReleaseIsNoop(t *testing.T) {
	c, _ := NewConcurrency(ConcurrencyOptions{PermitLimit: 3, QueueLimit: 1}, t0)
	l, _ := newFakeLimiter(t, c)
	a, err := l.AttemptAcquire(2)
	require.NoError(t, err)
	b, err := l.AttemptAcquire(1)
	require.NoError(t, err)
	_ = b
	l.Release(a)
	l.Release(a)
	s, _ := l.Statistics()
	require.Equal(t, int64(2), s.AvailablePermits)
	z, _ := l.AttemptAcquire(0)
	require.True(t, z.Acquired())
	l.Release(z)
	failed, _ := l.AttemptAcquire(3)
	require.False(t, failed.Acquired())
	l.Release(failed)
	s, _ = l.Statistics()
	require.Equal(t, int64(2), s.AvailablePermits)
}

// §1: every lease from a limiter lists its metadata name even without a
// value; successes never have values.
func TestMetadataNamesAlwaysListed(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 0}, func(t *testing.T, h *harness) {
		want := []string{MetadataRetryAfter}
		if h.isConcurrency() {
			want = []string{MetadataReasonPhrase}
		}
		ok1 := h.attempt(1)
		require.Equal(t, want, ok1.MetadataNames())
		for _, name := range []string{MetadataRetryAfter, MetadataReasonPhrase} {
			_, has := ok1.Metadata(name)
			require.False(t, has)
		}
		failed := h.attempt(1)
		require.Equal(t, want, failed.MetadataNames())
		_, has := failed.Metadata(MetadataRetryAfter)
		require.Equal(t, !h.isConcurrency(), has)
		_, has = failed.Metadata(MetadataReasonPhrase)
		require.False(t, has, "§4.1: attempt failures carry no reason")
		l, w := h.acquire(1)
		require.Nil(t, w)
		require.Equal(t, want, l.MetadataNames())
		r, has := l.ReasonPhrase()
		require.Equal(t, h.isConcurrency(), has)
		if has {
			require.Equal(t, ReasonQueueLimitReached, r)
		}
	})
}

// "Decisions" (time is an input; a tick trusts the schedule) and §5: a core
// driven only when NextTick asks must be indistinguishable from one ticked
// on every period point from construction, as the .NET timer does even while
// the limiter is full (a full fixed window still moves its last
// replenishment; a full sliding window still slides).
func TestSkippedTicksAreUnobservable(t *testing.T) {
	const p = 100 * time.Millisecond
	makers := map[string]func(QueueOrder) Core{
		"FixedWindow": func(o QueueOrder) Core {
			c, _ := NewFixedWindow(FixedWindowOptions{PermitLimit: 4, QueueLimit: 4, QueueOrder: o, Window: p}, t0)
			return c
		},
		"SlidingWindow": func(o QueueOrder) Core {
			c, _ := NewSlidingWindow(SlidingWindowOptions{PermitLimit: 4, SegmentsPerWindow: 3, QueueLimit: 4, QueueOrder: o, Window: 3 * p}, t0)
			return c
		},
		"TokenBucket": func(o QueueOrder) Core {
			c, _ := NewTokenBucket(TokenBucketOptions{TokenLimit: 4, TokensPerPeriod: 2, QueueLimit: 4, QueueOrder: o, ReplenishmentPeriod: p}, t0)
			return c
		},
	}
	for name, mk := range makers {
		for _, order := range []QueueOrder{OldestFirst, NewestFirst} {
			t.Run(name+"/"+order.String(), func(t *testing.T) {
				for seed := int64(1); seed <= 200; seed++ {
					r := rand.New(rand.NewPCG(uint64(seed), 0))
					every, lazy := mk(order), mk(order)
					var doneEvery, doneLazy []Outcome
					every.SetCompletionHandler(func(w *Waiter) { doneEvery = append(doneEvery, w.Outcome()) })
					lazy.SetCompletionHandler(func(w *Waiter) { doneLazy = append(doneLazy, w.Outcome()) })
					grid := t0.Add(p)
					now := t0
					var we, wl []*Waiter
					for step := 0; step < 60; step++ {
						if seed%2 == 0 { // land on period points too
							now = now.Add(time.Duration(r.IntN(12)) * p / 4)
						} else {
							now = now.Add(time.Duration(r.IntN(int(3 * p))))
						}
						for !grid.After(now) {
							every.Tick(grid)
							grid = grid.Add(p)
						}
						for {
							at, ok := lazy.NextTick(now)
							if !ok || at.After(now) {
								break
							}
							lazy.Tick(at)
						}
						n := int64(r.IntN(5))
						switch r.IntN(3) {
						case 0:
							a, err1 := every.AttemptAcquire(now, n)
							b, err2 := lazy.AttemptAcquire(now, n)
							require.Equal(t, err1, err2)
							require.Equal(t, a, b, "seed %d step %d attempt %d", seed, step, n)
						case 1:
							a, w1, err1 := every.Acquire(now, n)
							b, w2, err2 := lazy.Acquire(now, n)
							require.Equal(t, err1, err2)
							require.Equal(t, a, b, "seed %d step %d acquire %d", seed, step, n)
							require.Equal(t, w1 == nil, w2 == nil)
							if w1 != nil {
								we, wl = append(we, w1), append(wl, w2)
							}
						case 2:
							if len(we) > 0 {
								i := r.IntN(len(we))
								require.Equal(t, every.Cancel(now, we[i]), lazy.Cancel(now, wl[i]))
							}
						}
						s1, _ := every.Statistics()
						s2, _ := lazy.Statistics()
						require.Equal(t, s1, s2, "seed %d step %d", seed, step)
						d1, ok1 := every.IdleDuration(now)
						d2, ok2 := lazy.IdleDuration(now)
						require.Equal(t, ok1, ok2, "seed %d step %d idle", seed, step)
						require.Equal(t, d1, d2, "seed %d step %d idle", seed, step)
						require.Equal(t, doneEvery, doneLazy)
					}
				}
			})
		}
	}
}

// §1 (ReplenishingRateLimiter.ReplenishmentPeriod), §5.2: the sliding
// window's period is Window.Ticks / SegmentsPerWindow in 100 ns ticks, so a
// window that does not divide evenly truncates to a whole tick, and the slide
// check, the tick schedule and RETRY_AFTER all use that period.
func TestSlidingPeriodInWholeTicks(t *testing.T) {
	sw := newSliding(t, SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 3, Window: time.Second})
	const want = 333_333_300 * time.Nanosecond
	require.Equal(t, want, sw.ReplenishmentPeriod())
	mustAcquire(t, sw, t0, 1)
	l, _ := sw.AttemptAcquire(t0, 1)
	requireRetry(t, l, 3*want)
	require.True(t, sw.TryReplenish(t0.Add(want-1)))
	require.Equal(t, t0, sw.State().LastReplenishment, "too early: no slide")
	require.True(t, sw.TryReplenish(t0.Add(want)))
	require.Equal(t, t0.Add(want), sw.State().LastReplenishment, "elapsed == P slides")

	auto, err := NewSlidingWindow(SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 3, Window: time.Second}, t0)
	require.NoError(t, err)
	mustAcquire(t, auto, t0, 1)
	next, ok := auto.NextTick(t0)
	require.True(t, ok)
	require.Equal(t, t0.Add(want), next)

	even := newSliding(t, SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 4, Window: time.Second})
	require.Equal(t, 250*time.Millisecond, even.ReplenishmentPeriod())
	odd := newSliding(t, SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 1, Window: time.Second + 50})
	require.Equal(t, time.Second, odd.ReplenishmentPeriod(), "sub-tick remainder dropped like TimeSpan")
}
