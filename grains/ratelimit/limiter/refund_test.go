package limiter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFixedWindowRefundsOnlyWithinTheWindowOfTheGrant(t *testing.T) {
	f, err := NewFixedWindow(FixedWindowOptions{PermitLimit: 5, Window: time.Second, ManualReplenishment: true}, t0)
	require.NoError(t, err)
	l, err := f.AttemptAcquire(t0, 3)
	require.NoError(t, err)
	assert.True(t, f.Refundable(l))
	assert.EqualValues(t, 3, f.Refund(ms(10), l))
	st, _ := f.Statistics()
	assert.EqualValues(t, 5, st.AvailablePermits, "the window has its permits back")

	l, _ = f.AttemptAcquire(ms(20), 3)
	require.True(t, f.TryReplenish(ms(1000)))
	assert.False(t, f.Refundable(l), "a new window began")
	assert.Zero(t, f.Refund(ms(1001), l), "its permits came back with the window")
	st, _ = f.Statistics()
	assert.EqualValues(t, 5, st.AvailablePermits, "never more than the limit")

	zero, _ := f.AttemptAcquire(ms(1002), 0)
	assert.Zero(t, f.Refund(ms(1002), zero), "a zero-permit lease holds nothing")
	all, _ := f.AttemptAcquire(ms(1002), 5)
	failed, _ := f.AttemptAcquire(ms(1002), 1)
	assert.False(t, failed.Acquired())
	assert.Zero(t, f.Refund(ms(1003), failed), "a rejection holds nothing")
	assert.EqualValues(t, 5, f.Refund(ms(1003), all))
}

func TestFixedWindowRefundServesTheQueue(t *testing.T) {
	f, err := NewFixedWindow(FixedWindowOptions{PermitLimit: 1, QueueLimit: 1, Window: time.Hour, ManualReplenishment: true}, t0)
	require.NoError(t, err)
	var done []*Waiter
	f.SetCompletionHandler(func(w *Waiter) { done = append(done, w) })
	l, _ := f.AttemptAcquire(t0, 1)
	_, w, err := f.Acquire(t0, 1)
	require.NoError(t, err)
	require.NotNil(t, w)
	assert.EqualValues(t, 1, f.Refund(ms(1), l))
	require.Len(t, done, 1)
	assert.Equal(t, OutcomeGranted, w.Outcome(), "the refunded permit went to the waiter")
	assert.True(t, f.Refundable(w.Lease()), "a queued grant is refundable in its window too")
}

func TestSlidingWindowRefundsIntoTheSegmentOfTheGrant(t *testing.T) {
	s, err := NewSlidingWindow(SlidingWindowOptions{PermitLimit: 4, Window: 2 * time.Second, SegmentsPerWindow: 2, ManualReplenishment: true}, t0)
	require.NoError(t, err)
	first, _ := s.AttemptAcquire(t0, 2) // segment 0
	require.True(t, s.TryReplenish(ms(1000)))
	second, _ := s.AttemptAcquire(ms(1000), 1) // segment 1
	assert.True(t, s.Refundable(first), "its segment is still in the window")
	assert.EqualValues(t, 2, s.Refund(ms(1001), first))
	st := s.State()
	assert.Equal(t, []int64{0, 1}, st.Segments, "taken from the segment it was charged to")
	assert.EqualValues(t, 3, st.AvailablePermits)

	third, _ := s.AttemptAcquire(ms(1002), 2) // segment 1 as well
	require.True(t, s.TryReplenish(ms(2000))) // segment 0 slides out (empty), segment 1 becomes the oldest
	assert.EqualValues(t, 1, s.Refund(ms(2001), second))
	require.True(t, s.TryReplenish(ms(3000))) // segment 1 slides out: its permits come back by themselves
	assert.False(t, s.Refundable(third))
	assert.Zero(t, s.Refund(ms(3001), third))
	st = s.State()
	assert.EqualValues(t, 4, st.AvailablePermits, "A + segments = L throughout")
}

func TestTokenBucketRefundIsCappedAtTheLimit(t *testing.T) {
	b, err := NewTokenBucket(TokenBucketOptions{TokenLimit: 5, TokensPerPeriod: 2, ReplenishmentPeriod: time.Second, ManualReplenishment: true}, t0)
	require.NoError(t, err)
	l, _ := b.AttemptAcquire(t0, 3)
	assert.EqualValues(t, 3, b.Refund(ms(1), l))
	l, _ = b.AttemptAcquire(ms(2), 3)
	require.True(t, b.TryReplenish(ms(1002))) // +2 tokens: 4
	assert.True(t, b.Refundable(l))
	assert.EqualValues(t, 1, b.Refund(ms(1003), l), "only what fits under the limit")
	st, _ := b.Statistics()
	assert.EqualValues(t, 5, st.AvailablePermits)
	b.Close(ms(1004))
	l2 := Lease{algorithm: algorithmTokenBucket, permits: 1, flags: leaseAcquired}
	assert.Zero(t, b.Refund(ms(1005), l2), "a closed bucket takes nothing back")
}

func TestRefundsRefuseLeasesOfOtherAlgorithms(t *testing.T) {
	c, err := NewConcurrency(ConcurrencyOptions{PermitLimit: 2}, t0)
	require.NoError(t, err)
	l, _ := c.AttemptAcquire(t0, 1)
	f, _ := NewFixedWindow(FixedWindowOptions{PermitLimit: 2, Window: time.Second}, t0)
	_, _ = f.AttemptAcquire(t0, 2)
	assert.Zero(t, f.Refund(t0, l))
}
