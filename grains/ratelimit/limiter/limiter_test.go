package limiter

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
)

var (
	_ Clock = clock.Real{}
	_ Clock = (*clock.Fake)(nil)
)

func newFakeLimiter(t *testing.T, core Core) (*Limiter, *clock.Fake) {
	t.Helper()
	fake := clock.NewFake(t0)
	l := New(core, WithClock(fake))
	t.Cleanup(l.Close)
	return l, fake
}

// acquireAsync runs a blocking Acquire and delivers its result.
type acquireResult struct {
	lease Lease
	err   error
}

func acquireAsync(ctx context.Context, l *Limiter, n int64) <-chan acquireResult {
	ch := make(chan acquireResult, 1)
	go func() {
		lease, err := l.Acquire(ctx, n)
		ch <- acquireResult{lease, err}
	}()
	return ch
}

func waitQueued(t *testing.T, l *Limiter, permits int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		s, err := l.Statistics()
		return err == nil && s.QueuedPermits == permits
	}, 5*time.Second, time.Millisecond)
}

func receive(t *testing.T, ch <-chan acquireResult) acquireResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return")
		return acquireResult{}
	}
}

func TestLimiter_TimerDrivesReplenishment(t *testing.T) {
	fw, err := NewFixedWindow(FixedWindowOptions{PermitLimit: 2, QueueLimit: 2, Window: time.Second}, t0)
	require.NoError(t, err)
	l, fake := newFakeLimiter(t, fw)
	require.Zero(t, fake.Pending(), "no timer while full")

	lease, err := l.AttemptAcquire(2)
	require.NoError(t, err)
	require.True(t, lease.Acquired())
	require.Equal(t, 1, fake.Pending(), "one timer once a tick is needed")
	_, err = l.AttemptAcquire(1)
	require.NoError(t, err)
	require.Equal(t, 1, fake.Pending(), "still one timer")

	ch := acquireAsync(context.Background(), l, 1)
	waitQueued(t, l, 1)
	fake.Advance(time.Second)
	r := receive(t, ch)
	require.NoError(t, r.err)
	require.True(t, r.lease.Acquired())
	require.Equal(t, 1, fake.Pending(), "one permit is still out")

	fake.Advance(time.Second)
	require.Zero(t, fake.Pending(), "full again: the timer is not re-armed")
	s, err := l.Statistics()
	require.NoError(t, err)
	require.Equal(t, Statistics{AvailablePermits: 2, TotalFailedLeases: 1, TotalSuccessfulLeases: 2}, s)
	d, idle := l.IdleDuration()
	require.True(t, idle)
	require.Zero(t, d)
	fake.Advance(time.Minute)
	d, _ = l.IdleDuration()
	require.Equal(t, time.Minute, d)
}

func TestLimiter_TokenBucketTicksUntilFull(t *testing.T) {
	tb, err := NewTokenBucket(TokenBucketOptions{TokenLimit: 5, TokensPerPeriod: 1, ReplenishmentPeriod: 10 * time.Millisecond}, t0)
	require.NoError(t, err)
	l, fake := newFakeLimiter(t, tb)
	_, err = l.AttemptAcquire(5)
	require.NoError(t, err)
	fake.Advance(time.Hour) // ticks run one by one inside Advance
	s, _ := l.Statistics()
	require.Equal(t, int64(5), s.AvailablePermits)
	require.Zero(t, fake.Pending())
}

func TestRef19_CanCancelBeforeQueuing(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 1}, func(t *testing.T, h *harness) {
		l, _ := newFakeLimiter(t, h.core)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		for _, n := range []int64{0, 1, 5} { // even free, even above the limit
			_, err := l.Acquire(ctx, n)
			require.ErrorIs(t, err, context.Canceled)
		}
		_, err := l.Acquire(ctx, -1)
		require.ErrorIs(t, err, ErrNegativeCount, "the count is checked first")
		s, _ := l.Statistics()
		require.Equal(t, Statistics{AvailablePermits: 1}, s, "the limiter was not touched")
	})
}

func TestLimiter_CancelWhileWaiting(t *testing.T) {
	forEachKind(t, spec{limit: 1, queueLimit: 1}, func(t *testing.T, h *harness) {
		l, _ := newFakeLimiter(t, h.core)
		_, err := l.AttemptAcquire(1)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		ch := acquireAsync(ctx, l, 1)
		waitQueued(t, l, 1)
		cancel()
		r := receive(t, ch)
		require.ErrorIs(t, r.err, context.Canceled)
		s, _ := l.Statistics()
		require.Equal(t, Statistics{TotalSuccessfulLeases: 1}, s)
	})
}

func TestLimiter_DeadlineWhileWaiting(t *testing.T) {
	c, _ := NewConcurrency(ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1}, t0)
	l := New(c) // the real clock: the context deadline is real time anyway
	defer l.Close()
	_, _ = l.AttemptAcquire(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := l.Acquire(ctx, 1)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestLimiter_ConcurrencyReleaseIsIdempotent(t *testing.T) {
	c, _ := NewConcurrency(ConcurrencyOptions{PermitLimit: 2, QueueLimit: 2}, t0)
	l, _ := newFakeLimiter(t, c)
	a, err := l.AttemptAcquire(2)
	require.NoError(t, err)
	ch := acquireAsync(context.Background(), l, 1)
	waitQueued(t, l, 1)
	l.Release(a)
	r := receive(t, ch)
	require.True(t, r.lease.Acquired())
	l.Release(a) // again: nothing
	s, _ := l.Statistics()
	require.Equal(t, int64(1), s.AvailablePermits)
	l.Release(r.lease) // a granted lease is tracked too
	l.Release(r.lease)
	l.Release(Lease{})
	s, _ = l.Statistics()
	require.Equal(t, int64(2), s.AvailablePermits)
	require.False(t, l.TryReplenish(), "concurrency has no replenishment")
}

func TestLimiter_TimeBasedReleaseIsNoop(t *testing.T) {
	fw, _ := NewFixedWindow(FixedWindowOptions{PermitLimit: 2, Window: time.Second, ManualReplenishment: true}, t0)
	l, fake := newFakeLimiter(t, fw)
	lease, _ := l.AttemptAcquire(2)
	l.Release(lease)
	s, _ := l.Statistics()
	require.Zero(t, s.AvailablePermits)
	require.Zero(t, fake.Pending(), "manual replenishment arms no timer")
	require.True(t, l.TryReplenish())
	s, _ = l.Statistics()
	require.Zero(t, s.AvailablePermits, "less than a window")
	fake.Advance(time.Second)
	require.True(t, l.TryReplenish())
	s, _ = l.Statistics()
	require.Equal(t, int64(2), s.AvailablePermits)
}

func TestLimiter_CloseFailsWaitersAndStopsTimer(t *testing.T) {
	sw, _ := NewSlidingWindow(SlidingWindowOptions{PermitLimit: 1, SegmentsPerWindow: 2, QueueLimit: 2, Window: time.Second}, t0)
	l, fake := newFakeLimiter(t, sw)
	_, _ = l.AttemptAcquire(1)
	ch1 := acquireAsync(context.Background(), l, 1)
	ch2 := acquireAsync(context.Background(), l, 1)
	waitQueued(t, l, 2)
	require.Equal(t, 1, fake.Pending())
	l.Close()
	for _, ch := range []<-chan acquireResult{ch1, ch2} {
		r := receive(t, ch)
		require.NoError(t, r.err, "closing fails waiters with a lease, not an error")
		require.False(t, r.lease.Acquired())
	}
	require.Zero(t, fake.Pending())
	l.Close()
	_, err := l.AttemptAcquire(1)
	require.ErrorIs(t, err, ErrClosed)
	_, err = l.Acquire(context.Background(), 1)
	require.ErrorIs(t, err, ErrClosed)
	_, err = l.Statistics()
	require.ErrorIs(t, err, ErrClosed)
	fake.Advance(time.Hour)
}

func TestLimiter_EvictedWaiterGetsFailedLease(t *testing.T) {
	c, _ := NewConcurrency(ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1, QueueOrder: NewestFirst}, t0)
	l, _ := newFakeLimiter(t, c)
	held, _ := l.AttemptAcquire(1)
	old := acquireAsync(context.Background(), l, 1)
	waitQueued(t, l, 1)
	newer := acquireAsync(context.Background(), l, 1)
	r := receive(t, old)
	require.NoError(t, r.err)
	require.False(t, r.lease.Acquired())
	waitQueued(t, l, 1)
	l.Release(held)
	r = receive(t, newer)
	require.True(t, r.lease.Acquired())
}

func TestLimiter_RealClock(t *testing.T) {
	tb, _ := NewTokenBucket(TokenBucketOptions{TokenLimit: 2, TokensPerPeriod: 1, QueueLimit: 4, ReplenishmentPeriod: time.Millisecond}, time.Now())
	l := New(tb)
	defer l.Close()
	for range 6 {
		lease, err := l.Acquire(context.Background(), 1)
		require.NoError(t, err)
		require.True(t, lease.Acquired())
	}
}

func TestLimiter_ConcurrentUse(t *testing.T) {
	c, _ := NewConcurrency(ConcurrencyOptions{PermitLimit: 3, QueueLimit: 1000}, t0)
	l := New(c)
	var wg sync.WaitGroup
	var mu sync.Mutex
	inFlight, peak := 0, 0
	for range 16 {
		wg.Go(func() {
			for range 200 {
				lease, err := l.Acquire(context.Background(), 1)
				if err != nil || !lease.Acquired() {
					t.Errorf("acquire: %v %v", lease, err)
					return
				}
				mu.Lock()
				inFlight++
				peak = max(peak, inFlight)
				mu.Unlock()
				runtime.Gosched() // hold the permit while others run
				mu.Lock()
				inFlight--
				mu.Unlock()
				l.Release(lease)
			}
		})
	}
	wg.Wait()
	s, err := l.Statistics()
	require.NoError(t, err)
	require.Equal(t, Statistics{AvailablePermits: 3, TotalSuccessfulLeases: 16 * 200}, s)
	require.LessOrEqual(t, peak, 3)
	l.Close()
}
