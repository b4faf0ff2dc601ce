package limiter_test

import (
	"context"
	"fmt"
	"time"

	"github.com/granary-go/granary/grains/ratelimit/limiter"
)

// A fixed window driven by hand: time is an argument.
func ExampleFixedWindow() {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	fw, err := limiter.NewFixedWindow(limiter.FixedWindowOptions{PermitLimit: 2, Window: time.Minute}, start)
	if err != nil {
		panic(err)
	}
	for i := range 3 {
		lease, _ := fw.AttemptAcquire(start.Add(time.Duration(i)*10*time.Second), 1)
		retry, _ := lease.RetryAfter()
		fmt.Println(lease.Acquired(), retry)
	}
	next, _ := fw.NextTick(start)
	fw.Tick(next)
	lease, _ := fw.AttemptAcquire(next, 1)
	fmt.Println(lease.Acquired())
	// Output:
	// true 0s
	// true 0s
	// false 40s
	// true
}

// A queued acquisition completes later; the completion handler tells the
// driver which waiter finished and how.
func ExampleConcurrency_Acquire() {
	now := time.Now()
	c, _ := limiter.NewConcurrency(limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1}, now)
	c.SetCompletionHandler(func(w *limiter.Waiter) {
		fmt.Printf("%v: %v %v\n", w.Value, w.Outcome(), w.Lease().Acquired())
	})
	held, _, _ := c.Acquire(now, 1)
	_, w, _ := c.Acquire(now, 1)
	w.Value = "second caller"
	full, _, _ := c.Acquire(now, 1)
	reason, _ := full.ReasonPhrase()
	fmt.Println(reason)
	_ = c.Release(now, held.Permits())
	// Output:
	// Queue limit reached
	// second caller: granted true
}

// The token bucket's RETRY_AFTER counts the periods needed to cover the
// request and everything queued before it.
func ExampleTokenBucket_AttemptAcquire() {
	now := time.Now()
	tb, _ := limiter.NewTokenBucket(limiter.TokenBucketOptions{
		TokenLimit: 10, TokensPerPeriod: 2, ReplenishmentPeriod: time.Second,
	}, now)
	_, _ = tb.AttemptAcquire(now, 10)
	lease, _ := tb.AttemptAcquire(now, 5)
	retry, _ := lease.RetryAfter()
	fmt.Println(lease.Acquired(), retry)
	// Output: false 2s
}

// Validation names every invalid field at once.
func ExampleSlidingWindowOptions_Validate() {
	err := limiter.SlidingWindowOptions{PermitLimit: 0, SegmentsPerWindow: 4, Window: time.Millisecond}.Validate()
	fmt.Println(err)
	// Output: limiter: invalid SlidingWindowOptions: PermitLimit must be greater than 0 (got 0); SegmentsPerWindow must leave segments of at least 1ms (Window 1ms / 4)
}

// The wrapper blocks until permits come back and replenishes on its own
// timer.
func ExampleLimiter() {
	tb, _ := limiter.NewTokenBucket(limiter.TokenBucketOptions{
		TokenLimit: 1, TokensPerPeriod: 1, QueueLimit: 1, ReplenishmentPeriod: time.Millisecond,
	}, time.Now())
	l := limiter.New(tb)
	defer l.Close()
	for range 3 {
		lease, err := l.Acquire(context.Background(), 1)
		fmt.Println(lease.Acquired(), err)
	}
	// Output:
	// true <nil>
	// true <nil>
	// true <nil>
}
