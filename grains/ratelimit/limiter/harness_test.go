package limiter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// ms returns t0 plus n milliseconds.
func ms(n int64) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// spec is the data the generic tests vary: the algorithm-independent options.
type spec struct {
	limit      int64
	queueLimit int64
	order      QueueOrder
}

// kind builds one algorithm for the generic tests. The time-based ones use
// manual replenishment with a one-second period and are shaped so that one
// refill restores every permit: one sliding segment, and TokensPerPeriod
// equal to the limit.
type kind struct {
	name string
	make func(t testing.TB, s spec) Core
}

const period = time.Second

var kinds = []kind{
	{"Concurrency", func(t testing.TB, s spec) Core {
		c, err := NewConcurrency(ConcurrencyOptions{PermitLimit: s.limit, QueueLimit: s.queueLimit, QueueOrder: s.order}, t0)
		require.NoError(t, err)
		return c
	}},
	{"FixedWindow", func(t testing.TB, s spec) Core {
		c, err := NewFixedWindow(FixedWindowOptions{PermitLimit: s.limit, QueueLimit: s.queueLimit, QueueOrder: s.order,
			Window: period, ManualReplenishment: true}, t0)
		require.NoError(t, err)
		return c
	}},
	{"SlidingWindow", func(t testing.TB, s spec) Core {
		c, err := NewSlidingWindow(SlidingWindowOptions{PermitLimit: s.limit, SegmentsPerWindow: 1, QueueLimit: s.queueLimit,
			QueueOrder: s.order, Window: period, ManualReplenishment: true}, t0)
		require.NoError(t, err)
		return c
	}},
	{"TokenBucket", func(t testing.TB, s spec) Core {
		c, err := NewTokenBucket(TokenBucketOptions{TokenLimit: s.limit, TokensPerPeriod: s.limit, QueueLimit: s.queueLimit,
			QueueOrder: s.order, ReplenishmentPeriod: period, ManualReplenishment: true}, t0)
		require.NoError(t, err)
		return c
	}},
}

// forEachKind runs f once per algorithm as a subtest.
func forEachKind(t *testing.T, s spec, f func(t *testing.T, h *harness)) {
	t.Helper()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			f(t, newHarness(t, k.make(t, s)))
		})
	}
}

// harness drives one Core in tests, keeps the clock, tracks the permits
// held by concurrency leases and records completed waiters in order.
type harness struct {
	t         *testing.T
	core      Core
	now       time.Time
	held      int64
	completed []*Waiter
}

func newHarness(t *testing.T, c Core) *harness {
	h := &harness{t: t, core: c, now: t0}
	c.SetCompletionHandler(func(w *Waiter) {
		h.completed = append(h.completed, w)
		if w.Outcome() == OutcomeGranted {
			h.held += w.Permits()
		}
	})
	return h
}

func (h *harness) attempt(n int64) Lease {
	h.t.Helper()
	l, err := h.core.AttemptAcquire(h.now, n)
	require.NoError(h.t, err)
	h.held += l.Permits()
	return l
}

// acquire queues or grants n and returns the waiter, or the lease when it
// was answered at once.
func (h *harness) acquire(n int64) (Lease, *Waiter) {
	h.t.Helper()
	l, w, err := h.core.Acquire(h.now, n)
	require.NoError(h.t, err)
	h.held += l.Permits()
	return l, w
}

// queue acquires n and requires that it was queued.
func (h *harness) queue(n int64) *Waiter {
	h.t.Helper()
	l, w := h.acquire(n)
	require.NotNil(h.t, w, "expected a waiter, got %v", l)
	require.Equal(h.t, OutcomePending, w.Outcome())
	return w
}

// refill brings every permit back: a release of all held concurrency
// permits, or one manual replenishment a period later.
func (h *harness) refill() {
	h.t.Helper()
	h.now = h.now.Add(period)
	switch c := h.core.(type) {
	case *Concurrency:
		n := h.held
		h.held = 0
		require.NoError(h.t, c.Release(h.now, n))
	case interface{ TryReplenish(time.Time) bool }:
		require.True(h.t, c.TryReplenish(h.now))
	}
}

func (h *harness) stats() Statistics {
	h.t.Helper()
	s, err := h.core.Statistics()
	require.NoError(h.t, err)
	return s
}

// requireStats checks A, Q, failed and successful in that order.
func (h *harness) requireStats(available, queued, failed, succeeded int64) {
	h.t.Helper()
	require.Equal(h.t, Statistics{AvailablePermits: available, QueuedPermits: queued,
		TotalFailedLeases: failed, TotalSuccessfulLeases: succeeded}, h.stats())
}

func (h *harness) isConcurrency() bool {
	_, ok := h.core.(*Concurrency)
	return ok
}
