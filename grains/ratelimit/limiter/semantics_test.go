package limiter

// Tests named TestSectionN cover limiter-semantics.md §N beyond the §10
// scenarios, plus the granary decisions (RETRY_AFTER, the tick schedule,
// state).

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSection1_LeaseMetadata(t *testing.T) {
	forEachKind(t, spec{limit: 1}, func(t *testing.T, h *harness) {
		ok := h.attempt(1)
		failed := h.attempt(1)
		want := []string{MetadataRetryAfter}
		if h.isConcurrency() {
			want = []string{MetadataReasonPhrase}
		}
		for _, l := range []Lease{ok, failed} {
			assert.Equal(t, want, l.MetadataNames(), "every lease lists its limiter's name")
		}
		for _, name := range []string{MetadataRetryAfter, MetadataReasonPhrase, "OTHER"} {
			_, has := ok.Metadata(name)
			assert.False(t, has, "a successful lease has no %s", name)
		}
		_, hasRetry := failed.RetryAfter()
		assert.Equal(t, !h.isConcurrency(), hasRetry, "attempt failures carry RETRY_AFTER except for concurrency")
		_, hasReason := failed.ReasonPhrase()
		assert.False(t, hasReason, "an attempt failure has no reason phrase")
		assert.Nil(t, Lease{}.MetadataNames())
		assert.Contains(t, ok.String(), "acquired")
		assert.Contains(t, failed.String(), "rejected")
	})
}

func TestSection1_CountCheckedBeforeClosed(t *testing.T) {
	forEachKind(t, spec{limit: 1}, func(t *testing.T, h *harness) {
		h.core.Close(h.now)
		_, err := h.core.AttemptAcquire(h.now, 2)
		require.ErrorIs(t, err, ErrCountExceedsLimit)
		_, err = h.core.AttemptAcquire(h.now, -1)
		require.ErrorIs(t, err, ErrNegativeCount)
		_, _, err = h.core.Acquire(h.now, 2)
		require.ErrorIs(t, err, ErrCountExceedsLimit)
	})
}

func TestSection1_OptionsAreCopied(t *testing.T) {
	o := FixedWindowOptions{PermitLimit: 2, Window: time.Second}
	fw, err := NewFixedWindow(o, t0)
	require.NoError(t, err)
	o.PermitLimit = 100
	require.Equal(t, int64(2), fw.Options().PermitLimit)
	_, err = fw.AttemptAcquire(t0, 3)
	require.ErrorIs(t, err, ErrCountExceedsLimit)
}

func TestSection2_Validation(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		fields []string // every invalid field, in check order
	}{
		{"concurrency zero value", ConcurrencyOptions{}.Validate(), []string{"PermitLimit"}},
		{"fixed zero value", FixedWindowOptions{}.Validate(), []string{"PermitLimit", "Window"}},
		{"sliding zero value", SlidingWindowOptions{}.Validate(), []string{"PermitLimit", "SegmentsPerWindow", "Window"}},
		{"bucket zero value", TokenBucketOptions{}.Validate(), []string{"TokenLimit", "TokensPerPeriod", "ReplenishmentPeriod"}},
		{"everything wrong", SlidingWindowOptions{PermitLimit: -1, SegmentsPerWindow: -1, QueueLimit: -1, QueueOrder: 7, Window: -1}.Validate(),
			[]string{"PermitLimit", "SegmentsPerWindow", "QueueLimit", "QueueOrder", "Window"}},
		{"bucket everything wrong", TokenBucketOptions{TokenLimit: 0, TokensPerPeriod: 0, QueueLimit: -5, QueueOrder: 2, ReplenishmentPeriod: time.Microsecond}.Validate(),
			[]string{"TokenLimit", "TokensPerPeriod", "QueueLimit", "QueueOrder", "ReplenishmentPeriod"}},
		{"period under 1ms", FixedWindowOptions{PermitLimit: 1, Window: time.Millisecond - 1}.Validate(), []string{"Window"}},
		{"segment under 1ms", SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 3, Window: 2 * time.Millisecond}.Validate(), []string{"SegmentsPerWindow"}},
		{"concurrency bad order", ConcurrencyOptions{PermitLimit: 1, QueueOrder: 2}.Validate(), []string{"QueueOrder"}},

		{"queue limit 0 is valid", ConcurrencyOptions{PermitLimit: 1}.Validate(), nil},
		{"TokensPerPeriod may exceed TokenLimit", TokenBucketOptions{TokenLimit: 1, TokensPerPeriod: 5, ReplenishmentPeriod: time.Millisecond}.Validate(), nil},
		{"1ms periods are valid", SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 2, Window: 2 * time.Millisecond}.Validate(), nil},
		{"huge values are valid", TokenBucketOptions{TokenLimit: math.MaxInt64, TokensPerPeriod: math.MaxInt64, QueueLimit: math.MaxInt64,
			QueueOrder: NewestFirst, ReplenishmentPeriod: math.MaxInt64}.Validate(), nil},
		{"huge sliding", SlidingWindowOptions{PermitLimit: math.MaxInt64, SegmentsPerWindow: MaxSegmentsPerWindow,
			QueueLimit: math.MaxInt64, Window: math.MaxInt64}.Validate(), nil},
		{"too many segments", SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: MaxSegmentsPerWindow + 1,
			Window: math.MaxInt64}.Validate(), []string{"SegmentsPerWindow"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.fields == nil {
				require.NoError(t, tt.err)
				return
			}
			var oe *OptionsError
			require.ErrorAs(t, tt.err, &oe)
			var got []string
			for _, f := range oe.Fields {
				got = append(got, f.Field)
				assert.Contains(t, tt.err.Error(), f.Field)
			}
			require.Equal(t, tt.fields, got)
		})
	}
}

func TestSection2_InitialState(t *testing.T) {
	forEachKind(t, spec{limit: 5, queueLimit: 3}, func(t *testing.T, h *harness) {
		h.requireStats(5, 0, 0, 0)
		d, idle := h.core.IdleDuration(ms(7))
		require.True(t, idle, "idle since construction")
		require.Equal(t, 7*time.Millisecond, d)
		_, need := h.core.NextTick(t0)
		require.False(t, need, "manual limiters and concurrency need no tick")
	})
	fw, err := NewFixedWindow(FixedWindowOptions{PermitLimit: 1, Window: time.Second}, t0)
	require.NoError(t, err)
	mustAcquire(t, fw, t0, 1)
	next, need := fw.NextTick(t0)
	require.True(t, need)
	require.Equal(t, t0.Add(time.Second), next, "the first tick comes one period after construction")
	sw, err := NewSlidingWindow(SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 4, Window: time.Second}, t0)
	require.NoError(t, err)
	mustAcquire(t, sw, t0, 1)
	next, _ = sw.NextTick(t0)
	require.Equal(t, t0.Add(250*time.Millisecond), next)
}

func TestSection3_ZeroPermitAttempt(t *testing.T) {
	forEachKind(t, spec{limit: 2, queueLimit: 2}, func(t *testing.T, h *harness) {
		l := h.attempt(0)
		require.True(t, l.Acquired())
		require.Zero(t, l.ID(), "zero-permit leases have no identity")
		h.requireStats(2, 0, 0, 1)
		_, idle := h.core.IdleDuration(h.now)
		require.True(t, idle, "a zero-permit success does not make the limiter busy")

		// n = 0 succeeds immediately even behind OldestFirst waiters.
		h.attempt(1)
		h.queue(2)
		require.True(t, h.attempt(0).Acquired())
		l, w := h.acquire(0)
		require.Nil(t, w)
		require.True(t, l.Acquired())
	})
}

func TestSection3_FractionalTokensServeZeroRequests(t *testing.T) {
	tb := newBucket(t, TokenBucketOptions{TokenLimit: 1, TokensPerPeriod: 1, ReplenishmentPeriod: 10 * time.Millisecond})
	mustAcquire(t, tb, t0, 1)
	l, _ := tb.AttemptAcquire(t0, 0)
	require.False(t, l.Acquired())
	tb.TryReplenish(ms(3)) // 0.3 tokens
	requireAvailable(t, tb, 0)
	mustAcquire(t, tb, ms(3), 0)
	l, _ = tb.AttemptAcquire(ms(3), 1)
	require.False(t, l.Acquired())
}

func TestSection3_ZeroPermitAlwaysQueues(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 0}, func(t *testing.T, h *harness) {
		h.attempt(1)
		l, w := h.acquire(1)
		require.Nil(t, w, "a queue limit of 0 rejects non-zero requests")
		require.False(t, l.Acquired())
		w0 := h.queue(0)
		w1 := h.queue(0)
		h.requireStats(0, 0, 1, 1)
		h.refill()
		require.Equal(t, OutcomeGranted, w0.Outcome())
		require.Equal(t, OutcomeGranted, w1.Outcome())
	})
}

func TestSection3_HeadOfLineBlocking(t *testing.T) {
	for _, order := range []QueueOrder{OldestFirst, NewestFirst} {
		t.Run(order.String(), func(t *testing.T) {
			forEachKind(t, spec{limit: 3, queueLimit: 10, order: order}, func(t *testing.T, h *harness) {
				h.attempt(3)
				var big, small *Waiter
				if order == OldestFirst {
					big, small = h.queue(3), h.queue(1)
				} else {
					small, big = h.queue(1), h.queue(3)
				}
				// Bring back 2 permits: the big waiter is first in line and
				// blocks the small one, which would fit.
				switch c := h.core.(type) {
				case *Concurrency:
					require.NoError(t, c.Release(h.now, 2))
				default:
					h.core.Close(h.now)
					return // window and bucket refills give back all 3; covered by Ref25.
				}
				require.Equal(t, OutcomePending, big.Outcome())
				require.Equal(t, OutcomePending, small.Outcome())
				h.requireStats(2, 4, 0, 1)
			})
		})
	}

	// The bucket can bring back fewer permits than the waiter at the head
	// needs.
	tb := newBucket(t, TokenBucketOptions{TokenLimit: 3, TokensPerPeriod: 2, QueueLimit: 10, ReplenishmentPeriod: time.Millisecond})
	mustAcquire(t, tb, t0, 3)
	_, big, _ := tb.Acquire(t0, 3)
	_, small, _ := tb.Acquire(t0, 1)
	tb.TryReplenish(ms(1))
	require.Equal(t, OutcomePending, big.Outcome())
	require.Equal(t, OutcomePending, small.Outcome())
	tb.TryReplenish(ms(2))
	require.Equal(t, OutcomeGranted, big.Outcome())
	require.Equal(t, OutcomePending, small.Outcome())
}

func TestSection3_CancelledEntriesDoNotBlock(t *testing.T) {
	forEachKind(t, spec{limit: 2, queueLimit: 2, order: OldestFirst}, func(t *testing.T, h *harness) {
		h.attempt(1)
		w := h.queue(2)
		require.False(t, h.attempt(1).Acquired(), "a live waiter blocks under OldestFirst")
		require.True(t, h.core.Cancel(h.now, w))
		require.True(t, h.attempt(1).Acquired(), "Q is 0: a cancelled entry blocks nobody")
	})
}

func TestSection3_EvictingCancelledEntryFreesNothingExtra(t *testing.T) {
	forEachKind(t, spec{limit: 2, queueLimit: 2, order: NewestFirst}, func(t *testing.T, h *harness) {
		h.attempt(2)
		a, b := h.queue(1), h.queue(1)
		require.True(t, h.core.Cancel(h.now, a))
		c := h.queue(1) // room for it without eviction
		require.Equal(t, OutcomePending, b.Outcome())
		d := h.queue(2) // walks past the cancelled a, evicts b and c
		require.Equal(t, OutcomeEvicted, b.Outcome())
		require.Equal(t, OutcomeEvicted, c.Outcome())
		require.Equal(t, OutcomePending, d.Outcome())
		h.requireStats(0, 2, 2, 1)
	})
}

func TestSection3_CancelForeignOrNilWaiter(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 1}, func(t *testing.T, h *harness) {
		require.False(t, h.core.Cancel(h.now, nil))
		other, err := NewConcurrency(ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1}, t0)
		require.NoError(t, err)
		mustAcquire(t, other, t0, 1)
		_, w, _ := other.Acquire(t0, 1)
		require.False(t, h.core.Cancel(h.now, w))
		require.Equal(t, OutcomePending, w.Outcome())
	})
}

func TestSection3_ManyCancellationsStayBounded(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 1}, func(t *testing.T, h *harness) {
		h.attempt(1)
		e := engineOf(h.core)
		for range 10_000 {
			require.True(t, h.core.Cancel(h.now, h.queue(1)))
		}
		require.Less(t, e.waiters.len(), 100, "cancelled entries are compacted")
		require.Less(t, len(e.waiters.buf), 1000)
		w := h.queue(1)
		h.refill()
		require.Equal(t, OutcomeGranted, w.Outcome())
	})
}

func TestSection4_FixedWindowRetryAfter(t *testing.T) {
	fw, err := NewFixedWindow(FixedWindowOptions{PermitLimit: 3, QueueLimit: 5, Window: 10 * time.Second}, t0)
	require.NoError(t, err)
	mustAcquire(t, fw, t0, 2)
	tests := []struct {
		at   time.Duration
		n    int64
		want time.Duration
	}{
		{0, 3, 10 * time.Second},
		{4 * time.Second, 2, 6 * time.Second}, // independent of n
		{4 * time.Second, 3, 6 * time.Second},
		{4 * time.Second, 0, 6 * time.Second}, // A > 0 serves zero; checked below
		{12 * time.Second, 3, 0},              // the tick is late: clamp
	}
	for _, tt := range tests {
		l, _ := fw.AttemptAcquire(t0.Add(tt.at), tt.n)
		if tt.n == 0 {
			require.True(t, l.Acquired())
			continue
		}
		requireRetry(t, l, tt.want)
	}
	fw.Tick(t0.Add(10 * time.Second))
	mustAcquire(t, fw, t0.Add(11*time.Second), 3)
	l, _ := fw.AttemptAcquire(t0.Add(11*time.Second), 0)
	requireRetry(t, l, 9*time.Second) // measured from the last replenishment
}

func TestSection4_TokenBucketRetryAfter(t *testing.T) {
	p := 20 * time.Second
	tests := []struct {
		name                     string
		limit, tpp, take, queued int64
		order                    QueueOrder
		ask                      int64
		want                     time.Duration
	}{
		{"TPP 1, ask 2", 2, 1, 2, 0, OldestFirst, 2, 40 * time.Second},
		{"TPP 1, 1 queued", 3, 1, 3, 1, OldestFirst, 2, 60 * time.Second},
		{"TPP 2, 1 queued", 3, 2, 3, 1, OldestFirst, 2, 20 * time.Second},
		{"TPP 100", 2, 100, 2, 0, OldestFirst, 2, 20 * time.Second},
		{"limit 3, 1 available, ask 3", 3, 1, 2, 0, OldestFirst, 3, 40 * time.Second},
		{"need <= 0 is one period", 3, 1, 0, 3, OldestFirst, 1, 20 * time.Second},
		{"queued counts under NewestFirst too", 3, 1, 3, 2, NewestFirst, 3, 100 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := newBucket(t, TokenBucketOptions{TokenLimit: tt.limit, TokensPerPeriod: tt.tpp, QueueLimit: 10,
				QueueOrder: tt.order, ReplenishmentPeriod: p})
			if tt.take > 0 {
				mustAcquire(t, tb, t0, tt.take)
			}
			if tt.queued > 0 {
				if tt.take == 0 { // make the queue possible: an OldestFirst
					// waiter can only exist while permits are short.
					mustAcquire(t, tb, t0, tt.limit)
					_, w, _ := tb.Acquire(t0, tt.queued)
					require.NotNil(t, w)
					tb.e.available = tt.limit // back to full, waiter still queued
				} else {
					_, w, _ := tb.Acquire(t0, tt.queued)
					require.NotNil(t, w)
				}
			}
			l, _ := tb.AttemptAcquire(t0, tt.ask)
			requireRetry(t, l, tt.want)
		})
	}
}

func TestSection4_SlidingRetryAfterWalk(t *testing.T) {
	// Window 8s, 4 segments of 2s. Charges: slide 0 gets 1, slide 1 gets 2,
	// slide 2 gets 1 (current). Next slides free segments 3 (0), 0 (1), 1 (2).
	newSW := func(order QueueOrder) *SlidingWindow {
		sw := newSliding(t, SlidingWindowOptions{PermitLimit: 4, SegmentsPerWindow: 4, Window: 8 * time.Second,
			QueueLimit: 4, QueueOrder: order})
		mustAcquire(t, sw, t0, 1)
		sw.TryReplenish(t0.Add(2 * time.Second))
		mustAcquire(t, sw, t0.Add(2*time.Second), 2)
		sw.TryReplenish(t0.Add(4 * time.Second))
		mustAcquire(t, sw, t0.Add(4*time.Second), 1)
		return sw
	}
	tests := []struct {
		n    int64
		at   time.Duration
		want time.Duration
	}{
		{1, 4 * time.Second, 4 * time.Second},  // k = 2 frees 1
		{2, 4 * time.Second, 6 * time.Second},  // k = 3 frees 3
		{4, 4 * time.Second, 8 * time.Second},  // k = 4 needs the current segment too
		{3, 5 * time.Second, 5 * time.Second},  // k = 3, one second into the segment
		{0, 4 * time.Second, 4 * time.Second},  // zero counts as one
		{1, 20 * time.Second, 0 * time.Second}, // far behind: clamp
	}
	for _, tt := range tests {
		sw := newSW(OldestFirst)
		l, _ := sw.AttemptAcquire(t0.Add(tt.at), tt.n)
		requireRetry(t, l, tt.want)
	}

	// A failure caused only by OldestFirst waiters (deficit <= 0) answers
	// one segment.
	sw := newSliding(t, SlidingWindowOptions{PermitLimit: 4, SegmentsPerWindow: 4, Window: 8 * time.Second, QueueLimit: 4})
	mustAcquire(t, sw, t0, 3)
	_, w, _ := sw.Acquire(t0, 2)
	require.NotNil(t, w)
	l, _ := sw.AttemptAcquire(t0.Add(500*time.Millisecond), 1)
	requireRetry(t, l, 1500*time.Millisecond)
	// The queue-limit rejection carries it too.
	l, w, _ = sw.Acquire(t0, 3)
	require.Nil(t, w)
	requireRetry(t, l, 8*time.Second)
}

func TestSection4_ConcurrencyFailuresCarryNoRetry(t *testing.T) {
	c, err := NewConcurrency(ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1, QueueOrder: NewestFirst}, t0)
	require.NoError(t, err)
	h := newHarness(t, c)
	h.attempt(1)
	for _, l := range []Lease{h.attempt(1), h.attempt(0)} {
		require.False(t, l.Acquired())
		_, ok := l.RetryAfter()
		require.False(t, ok)
		_, ok = l.ReasonPhrase()
		require.False(t, ok)
	}
}

func TestSection5_TryReplenishReturnValues(t *testing.T) {
	forEachKind(t, spec{limit: 1}, func(t *testing.T, h *harness) {
		r, ok := h.core.(interface{ TryReplenish(time.Time) bool })
		if !ok {
			require.True(t, h.isConcurrency())
			return
		}
		require.True(t, r.TryReplenish(h.now), "manual: true even when nothing happens")
		h.core.Close(h.now)
		require.True(t, r.TryReplenish(h.now.Add(time.Hour)), "manual after close: true, nothing done")
	})
}

func TestSection5_FixedWindowManual(t *testing.T) {
	fw, err := NewFixedWindow(FixedWindowOptions{PermitLimit: 5, Window: 10 * time.Millisecond, ManualReplenishment: true}, t0)
	require.NoError(t, err)
	mustAcquire(t, fw, t0, 4)
	fw.TryReplenish(ms(9))
	requireAvailable(t, fw, 1) // less than a window
	fw.TryReplenish(ms(10))
	requireAvailable(t, fw, 5) // equality passes
	require.Equal(t, ms(10), fw.State().LastReplenishment)
	fw.TryReplenish(ms(25))
	require.Equal(t, ms(25), fw.State().LastReplenishment, "last moves even when full")
	mustAcquire(t, fw, ms(25), 1)
	fw.TryReplenish(ms(34))
	requireAvailable(t, fw, 4) // 9ms since the full window at 25
	mustAcquire(t, fw, ms(34), 4)
	fw.TryReplenish(ms(1000))
	requireAvailable(t, fw, 5) // a reset after many windows, not an addition
	mustAcquire(t, fw, ms(1000), 5)
	fw.TryReplenish(ms(500)) // a clock that went back does nothing
	requireAvailable(t, fw, 0)
}

func TestSection5_SlidingWindowOneSegmentPerCall(t *testing.T) {
	sw := newSliding(t, SlidingWindowOptions{PermitLimit: 6, SegmentsPerWindow: 3, Window: 30 * time.Millisecond})
	mustAcquire(t, sw, t0, 1)
	sw.TryReplenish(ms(10))
	mustAcquire(t, sw, ms(10), 2)
	sw.TryReplenish(ms(15)) // too early
	require.Equal(t, []int64{0, 1, 2}, sw.State().Segments)
	sw.TryReplenish(ms(1000)) // however long the gap: one slide
	require.Equal(t, []int64{1, 2, 0}, sw.State().Segments)
	requireAvailable(t, sw, 3)
	sw.TryReplenish(ms(1010))
	requireAvailable(t, sw, 4) // the first permit, 3 slides after it was taken
	sw.TryReplenish(ms(1020))
	requireAvailable(t, sw, 6)
}

func TestSection5_TokenBucketManualFractions(t *testing.T) {
	p := 100 * time.Millisecond
	tb := newBucket(t, TokenBucketOptions{TokenLimit: 10, TokensPerPeriod: 1, ReplenishmentPeriod: p})
	mustAcquire(t, tb, t0, 3)
	tb.TryReplenish(t0.Add(p - time.Millisecond)) // 7.99 truncates to 7
	requireAvailable(t, tb, 7)
	tb.TryReplenish(t0.Add(2 * p)) // + 1.01 = exactly 9
	requireAvailable(t, tb, 9)

	// A full bucket keeps its last time, so the next refill covers the gap.
	tb = newBucket(t, TokenBucketOptions{TokenLimit: 10, TokensPerPeriod: 1, ReplenishmentPeriod: p})
	tb.TryReplenish(t0.Add(5 * p))
	mustAcquire(t, tb, t0.Add(5*p), 10)
	tb.TryReplenish(t0.Add(5*p + time.Millisecond))
	requireAvailable(t, tb, 5)
	tb.TryReplenish(t0.Add(time.Hour))
	requireAvailable(t, tb, 10)

	// A fraction carries over and can serve a queued request.
	tb = newBucket(t, TokenBucketOptions{TokenLimit: 2, TokensPerPeriod: 1, QueueLimit: 1, ReplenishmentPeriod: p})
	mustAcquire(t, tb, t0, 2)
	_, w, _ := tb.Acquire(t0, 1)
	tb.TryReplenish(t0.Add(p + p/2))
	require.Equal(t, OutcomeGranted, w.Outcome())
	requireAvailable(t, tb, 0)
	tb.TryReplenish(t0.Add(2 * p))
	requireAvailable(t, tb, 1) // 0.5 + 0.5
}

func TestSection6_ConcurrencyLeases(t *testing.T) {
	c, err := NewConcurrency(ConcurrencyOptions{PermitLimit: 2, QueueLimit: 2, QueueOrder: NewestFirst}, t0)
	require.NoError(t, err)
	h := newHarness(t, c)
	a := h.attempt(1)
	b := h.attempt(1)
	require.NotZero(t, a.ID())
	require.Greater(t, b.ID(), a.ID())
	require.Equal(t, int64(1), a.Permits())
	require.Zero(t, h.attempt(0).ID())
	require.Zero(t, h.attempt(1).ID(), "failed leases have no identity")

	w2 := h.queue(2)
	w1 := h.queue(0)
	require.ErrorIs(t, c.Release(t0, 3), ErrOverRelease)
	require.ErrorIs(t, c.Release(t0, -1), ErrNegativeCount)
	require.NoError(t, c.Release(t0, 0))
	require.Equal(t, OutcomePending, w1.Outcome(), "a no-op release processes nothing")
	require.NoError(t, c.Release(t0, 1))
	require.Equal(t, OutcomeGranted, w1.Outcome(), "newest first")
	require.Zero(t, w1.Lease().ID())
	require.Equal(t, OutcomePending, w2.Outcome())
	require.NoError(t, c.Release(t0, 1))
	require.Equal(t, OutcomeGranted, w2.Outcome())
	require.Greater(t, w2.Lease().ID(), b.ID(), "granted leases get an identity")
	c.Close(t0)
	require.NoError(t, c.Release(t0, 2), "release after close does nothing")
	require.Equal(t, int64(0), c.State().AvailablePermits)
}

func TestSection7_CountersForEveryOutcome(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 1, order: NewestFirst}, func(t *testing.T, h *harness) {
		h.attempt(1)    // success 1
		h.attempt(1)    // failed 1
		a := h.queue(1) // queued: not counted
		b := h.queue(1) // evicts a: failed 2
		require.Equal(t, OutcomeEvicted, a.Outcome())
		_, _ = h.core.AttemptAcquire(h.now, 5) // errors are not counted
		_, _ = h.core.AttemptAcquire(h.now, -1)
		h.requireStats(0, 1, 2, 1)
		require.True(t, h.core.Cancel(h.now, b))
		h.requireStats(0, 0, 2, 1) // cancellation counts nothing
		w := h.queue(1)
		h.core.Close(h.now)
		require.Equal(t, OutcomeClosed, w.Outcome())
		e := engineOf(h.core)
		require.Equal(t, [2]int64{2, 1}, [2]int64{e.failed, e.succeeded}, "closing counts nothing")
	})
}

func TestSection7_CountersSaturate(t *testing.T) {
	fw := newFixed(t, FixedWindowOptions{PermitLimit: 1, Window: time.Second})
	require.NoError(t, fw.Restore(t0, State{AvailablePermits: 1, TotalSuccessfulLeases: math.MaxInt64, TotalFailedLeases: math.MaxInt64}))
	mustAcquire(t, fw, t0, 1)
	_, _ = fw.AttemptAcquire(t0, 1)
	s, _ := fw.Statistics()
	require.Equal(t, int64(math.MaxInt64), s.TotalSuccessfulLeases)
	require.Equal(t, int64(math.MaxInt64), s.TotalFailedLeases)
}

func TestSection8_IdleDuration(t *testing.T) {
	t.Run("NullWhenActive", func(t *testing.T) {
		forEachKind(t, spec{limit: 1}, func(t *testing.T, h *harness) {
			h.attempt(1)
			_, idle := h.core.IdleDuration(h.now)
			require.False(t, idle)
		})
	})
	t.Run("UpdatesWhenIdle", func(t *testing.T) {
		forEachKind(t, spec{limit: 1}, func(t *testing.T, h *harness) {
			d1, _ := h.core.IdleDuration(ms(1))
			d2, _ := h.core.IdleDuration(ms(5))
			require.Greater(t, d2, d1)
		})
	})
	t.Run("UpdatesWhenChangingFromActive", func(t *testing.T) {
		forEachKind(t, spec{limit: 1}, func(t *testing.T, h *harness) {
			h.attempt(1)
			h.refill()
			d, idle := h.core.IdleDuration(h.now.Add(3 * time.Millisecond))
			require.True(t, idle)
			require.Equal(t, 3*time.Millisecond, d, "the mark is the refill time")
		})
	})
	t.Run("EarlyReturnsKeepTheMark", func(t *testing.T) {
		fw := newFixed(t, FixedWindowOptions{PermitLimit: 1, Window: time.Millisecond})
		fw.TryReplenish(ms(5)) // already full: the mark stays at t0
		d, _ := fw.IdleDuration(ms(5))
		require.Equal(t, 5*time.Millisecond, d)

		sw := newSliding(t, SlidingWindowOptions{PermitLimit: 2, SegmentsPerWindow: 2, Window: 2 * time.Millisecond})
		sw.TryReplenish(ms(5)) // frees nothing
		d, _ = sw.IdleDuration(ms(5))
		require.Equal(t, 5*time.Millisecond, d)

		tb := newBucket(t, TokenBucketOptions{TokenLimit: 1, TokensPerPeriod: 1, ReplenishmentPeriod: time.Millisecond})
		tb.TryReplenish(ms(5)) // full
		d, _ = tb.IdleDuration(ms(5))
		require.Equal(t, 5*time.Millisecond, d)
	})
	t.Run("PartialRefillStaysBusy", func(t *testing.T) {
		tb := newBucket(t, TokenBucketOptions{TokenLimit: 4, TokensPerPeriod: 1, ReplenishmentPeriod: time.Millisecond})
		mustAcquire(t, tb, t0, 4)
		tb.TryReplenish(ms(1))
		_, idle := tb.IdleDuration(ms(1))
		require.False(t, idle)
		c, _ := NewConcurrency(ConcurrencyOptions{PermitLimit: 2}, t0)
		mustAcquire(t, c, t0, 2)
		require.NoError(t, c.Release(ms(1), 1))
		_, idle = c.IdleDuration(ms(1))
		require.False(t, idle)
		require.NoError(t, c.Release(ms(2), 1))
		d, idle := c.IdleDuration(ms(3))
		require.True(t, idle)
		require.Equal(t, time.Millisecond, d)
	})
	t.Run("BackwardsClockIsZero", func(t *testing.T) {
		c, _ := NewConcurrency(ConcurrencyOptions{PermitLimit: 2}, ms(10))
		d, idle := c.IdleDuration(ms(5))
		require.True(t, idle)
		require.Zero(t, d)
	})
}

func TestSection9_Close(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 3}, func(t *testing.T, h *harness) {
		h.attempt(1)
		a, b := h.queue(1), h.queue(1)
		require.True(t, h.core.Cancel(h.now, a))
		h.completed = nil
		h.core.Close(h.now)
		require.Equal(t, []*Waiter{b}, h.completed, "cancelled entries are skipped")
		require.Equal(t, OutcomeCanceled, a.Outcome())
		h.core.Close(h.now)
		require.Len(t, h.completed, 1, "a second close does nothing")
		require.False(t, h.core.Cancel(h.now, b))
		h.core.Tick(h.now.Add(time.Hour))
		_, need := h.core.NextTick(h.now)
		require.False(t, need)
	})
}

// The tick schedule (granary: time is an input, and ticks are requested
// only while they can change something).

func TestDecision_TickSchedule(t *testing.T) {
	p := 100 * time.Millisecond
	fw, err := NewFixedWindow(FixedWindowOptions{PermitLimit: 2, QueueLimit: 1, Window: p}, t0)
	require.NoError(t, err)
	_, need := fw.NextTick(t0)
	require.False(t, need, "a full limiter needs no tick")

	mustAcquire(t, fw, ms(30), 2)
	next, need := fw.NextTick(ms(30))
	require.True(t, need)
	require.Equal(t, ms(100), next)
	fw.Tick(ms(103)) // a little late
	require.Equal(t, ms(200), fw.e.nextTick, "the schedule does not drift with jitter")
	_, need = fw.NextTick(ms(103))
	require.False(t, need, "full again")

	// Idle for a long time: the first acquisition resumes the schedule on
	// its grid, and the window it falls in started at the last grid point.
	mustAcquire(t, fw, ms(1250), 2)
	next, _ = fw.NextTick(ms(1250))
	require.Equal(t, ms(1300), next)
	l, _ := fw.AttemptAcquire(ms(1250), 1)
	requireRetry(t, l, 50*time.Millisecond)

	// A driver that fell far behind skips the missed points.
	fw.Tick(ms(1730))
	require.Equal(t, ms(1800), fw.e.nextTick)

	// Waiters do not change the need: it follows the permits.
	mustAcquire(t, fw, ms(1730), 2)
	_, w, _ := fw.Acquire(ms(1730), 1)
	require.NotNil(t, w)
	fw.Tick(ms(1800))
	require.Equal(t, OutcomeGranted, w.Outcome())
	next, need = fw.NextTick(ms(1800))
	require.True(t, need)
	require.Equal(t, ms(1900), next)
}

func TestDecision_TickScheduleBucketAndSliding(t *testing.T) {
	tb, err := NewTokenBucket(TokenBucketOptions{TokenLimit: 3, TokensPerPeriod: 1, ReplenishmentPeriod: 10 * time.Millisecond}, t0)
	require.NoError(t, err)
	mustAcquire(t, tb, ms(5), 3)
	for i, at := range []int64{10, 20, 30} {
		next, need := tb.NextTick(ms(at))
		require.True(t, need)
		require.Equal(t, ms(at), next)
		tb.Tick(ms(at))
		requireAvailable(t, tb, int64(i+1))
	}
	_, need := tb.NextTick(ms(30))
	require.False(t, need)

	sw, err := NewSlidingWindow(SlidingWindowOptions{PermitLimit: 2, SegmentsPerWindow: 2, Window: 20 * time.Millisecond}, t0)
	require.NoError(t, err)
	mustAcquire(t, sw, ms(1), 2)
	sw.Tick(ms(10)) // frees nothing but the schedule moves on
	next, need := sw.NextTick(ms(10))
	require.True(t, need)
	require.Equal(t, ms(20), next)
	sw.Tick(ms(20))
	_, need = sw.NextTick(ms(20))
	require.False(t, need)
	sw.Tick(ms(20)) // an extra tick is harmless
	requireAvailable(t, sw, 2)

	// Manual limiters ignore Tick.
	m := newFixed(t, FixedWindowOptions{PermitLimit: 1, Window: time.Millisecond, ManualReplenishment: true})
	mustAcquire(t, m, t0, 1)
	m.Tick(ms(5))
	requireAvailable(t, m, 0)
}

func TestDecision_StateRoundTrip(t *testing.T) {
	sw := newSliding(t, SlidingWindowOptions{PermitLimit: 5, SegmentsPerWindow: 3, Window: 30 * time.Millisecond})
	mustAcquire(t, sw, t0, 1)
	sw.TryReplenish(ms(10))
	mustAcquire(t, sw, ms(10), 2)
	_, _ = sw.AttemptAcquire(ms(10), 5)
	st := sw.State()
	require.Equal(t, State{AvailablePermits: 2, TotalSuccessfulLeases: 2, TotalFailedLeases: 1,
		LastReplenishment: ms(10), Segments: []int64{0, 1, 2}}, st)

	restored := newSliding(t, SlidingWindowOptions{PermitLimit: 5, SegmentsPerWindow: 3, Window: 30 * time.Millisecond})
	require.NoError(t, restored.Restore(ms(11), st))
	require.Equal(t, st, restored.State())
	_, idle := restored.IdleDuration(ms(11))
	require.False(t, idle)
	// The restored one behaves like the original from here on.
	for _, at := range []int64{20, 30, 40} {
		sw.TryReplenish(ms(at))
		restored.TryReplenish(ms(at))
		require.Equal(t, sw.State(), restored.State())
	}

	tb := newBucket(t, TokenBucketOptions{TokenLimit: 5, TokensPerPeriod: 1, ReplenishmentPeriod: time.Second})
	require.NoError(t, tb.Restore(ms(5), State{AvailablePermits: 5, LastReplenishment: ms(1)}))
	d, idle := tb.IdleDuration(ms(6))
	require.True(t, idle)
	require.Equal(t, time.Millisecond, d)

	c, _ := NewConcurrency(ConcurrencyOptions{PermitLimit: 3}, t0)
	require.NoError(t, c.Restore(t0, State{AvailablePermits: 1, TotalSuccessfulLeases: 7}))
	require.Equal(t, State{AvailablePermits: 1, TotalSuccessfulLeases: 7}, c.State())
}

func TestDecision_RestoreResumesSchedule(t *testing.T) {
	fw, err := NewFixedWindow(FixedWindowOptions{PermitLimit: 2, Window: 100 * time.Millisecond}, ms(1000))
	require.NoError(t, err)
	require.NoError(t, fw.Restore(ms(1000), State{AvailablePermits: 0, LastReplenishment: ms(950)}))
	next, need := fw.NextTick(ms(1000))
	require.True(t, need)
	require.Equal(t, ms(1050), next, "the saved window ends on time")
	l, _ := fw.AttemptAcquire(ms(1000), 1)
	requireRetry(t, l, 50*time.Millisecond)

	require.NoError(t, fw.Restore(ms(1000), State{AvailablePermits: 1, LastReplenishment: ms(500)}))
	next, _ = fw.NextTick(ms(1000))
	require.Equal(t, ms(600), next, "overdue: tick at once")

	require.NoError(t, fw.Restore(ms(1000), State{AvailablePermits: 1, LastReplenishment: ms(5000)}))
	require.Equal(t, ms(1000), fw.State().LastReplenishment, "a future time is clamped to now")
}

func TestDecision_RestoreRejectsBadState(t *testing.T) {
	sw := newSliding(t, SlidingWindowOptions{PermitLimit: 5, SegmentsPerWindow: 2, Window: 2 * time.Millisecond, QueueLimit: 1})
	bad := []State{
		{AvailablePermits: -1, Segments: []int64{3, 3}},
		{AvailablePermits: 6, Segments: []int64{0, 0}},
		{AvailablePermits: 5},
		{AvailablePermits: 5, Segments: []int64{0, 0, 0}},
		{AvailablePermits: 3, Segments: []int64{1, 0}},
		{AvailablePermits: 3, Segments: []int64{3, -1}},
		{AvailablePermits: 0, Segments: []int64{math.MaxInt64, math.MaxInt64}},
		{AvailablePermits: 5, Segments: []int64{0, 0}, TotalFailedLeases: -1},
	}
	for _, s := range bad {
		require.ErrorIs(t, sw.Restore(t0, s), ErrInvalidState, "%+v", s)
	}
	fw := newFixed(t, FixedWindowOptions{PermitLimit: 1, Window: time.Millisecond})
	require.ErrorIs(t, fw.Restore(t0, State{AvailablePermits: 1, Segments: []int64{}}), ErrInvalidState)

	mustAcquire(t, sw, t0, 5)
	_, w, _ := sw.Acquire(t0, 1)
	require.NotNil(t, w)
	require.ErrorIs(t, sw.Restore(t0, State{AvailablePermits: 5, Segments: []int64{0, 0}}), ErrInvalidState, "waiters queued")
	sw.Cancel(t0, w)
	require.NoError(t, sw.Restore(t0, State{AvailablePermits: 5, Segments: []int64{0, 0}}))
	sw.Close(t0)
	require.ErrorIs(t, sw.Restore(t0, State{AvailablePermits: 5, Segments: []int64{0, 0}}), ErrClosed)
}

func newFixed(t *testing.T, o FixedWindowOptions) *FixedWindow {
	t.Helper()
	fw, err := NewFixedWindow(o, t0)
	require.NoError(t, err)
	return fw
}

// engineOf exposes the shared engine for white-box checks.
func engineOf(c Core) *engine {
	switch c := c.(type) {
	case *Concurrency:
		return &c.e
	case *FixedWindow:
		return &c.e
	case *SlidingWindow:
		return &c.e
	case *TokenBucket:
		return &c.e
	}
	panic("unknown core")
}
