// Package limiter implements four rate-limiting algorithms as deterministic
// state machines: a concurrency limiter, a fixed window, a sliding window
// and a token bucket. Their behaviour follows .NET's
// System.Threading.RateLimiting limiters (option validation, attempt and
// queued acquisition, zero-permit requests, queue limits counted in
// permits, OldestFirst and NewestFirst ordering with eviction, head-of-line
// blocking, failed-lease metadata, statistics and idle time), with the
// differences granary chose: errors instead of exceptions, options whose
// zero values are safe, and time as an input.
//
// # The algorithms
//
// [Concurrency] bounds how many permits are held at once. Permits return
// only when the holder releases them, so it suits protecting a resource
// with a fixed capacity (connections, workers). It needs no clock.
//
// [FixedWindow] grants PermitLimit permits per Window and resets to the
// limit at each window boundary. It is the cheapest time-based limiter and
// the easiest to explain, but a burst at the end of one window and another
// at the start of the next can pass twice the limit within one Window.
//
// [SlidingWindow] divides the window into SegmentsPerWindow segments,
// charges each grant to the current segment and, each segment period,
// slides the window by one segment, freeing what the oldest segment held.
// No span of one Window grants more than PermitLimit, at the cost of one
// counter per segment and coarser refills when segments are few.
//
// [TokenBucket] holds up to TokenLimit tokens and adds TokensPerPeriod per
// ReplenishmentPeriod. It allows bursts up to the bucket size and a steady
// rate after that; manual replenishment adds tokens in proportion to the
// time elapsed, fractions included, in exact integer arithmetic.
//
// # Driving a limiter
//
// The algorithm types own no goroutines, timers or locks: every method takes
// now, and one driver calls them at a time (a grain during its turns, or
// the [Limiter] wrapper under its mutex). AttemptAcquire never queues.
// Acquire either answers at once with a [Lease] or returns a [*Waiter] that
// completes later, during another call, in exactly one of four ways:
// granted, evicted (a NewestFirst queue made room for a newer request),
// closed, or cancelled. The driver learns of completions through the
// handler set with SetCompletionHandler, which is called synchronously,
// once per waiter, and needs no allocation; Waiter.Value lets the driver
// find the reply the waiter stands for.
//
// A rejection is a Lease whose Acquired reports false, carrying RETRY_AFTER
// for the time-based limiters (see Lease.RetryAfter) and REASON_PHRASE for a
// concurrency queue-limit rejection. Errors are kept for bad arguments
// ([ErrNegativeCount], [ErrCountExceedsLimit], checked first) and for a
// closed limiter ([ErrClosed]).
//
// Replenishment is automatic unless ManualReplenishment is set. Automatic
// replenishment means the driver calls Tick at the time NextTick reports;
// each tick trusts that schedule (one window reset, one segment slide or
// TokensPerPeriod tokens), as a periodic timer would. NextTick reports
// nothing while all permits are free, because ticks would change nothing
// then, so an idle limiter costs no timer. With manual replenishment the
// driver calls TryReplenish, which checks the elapsed time itself.
//
// IdleDuration says how long a limiter has been unused, so that a grain can
// decide when to deactivate, and State and Restore carry the permits,
// counters, last replenishment time and sliding-window segments across
// activations.
//
// # The wrapper
//
// [Limiter] makes one algorithm safe for concurrent in-process use: a
// mutex, a [Clock] (the wall clock, or a fake in tests), a blocking
// Acquire(ctx, n), AttemptAcquire(n), an idempotent Release for
// concurrency leases, and one timer that drives automatic replenishment,
// armed only while a tick is needed and stopped by Close.
//
// # Costs
//
// AttemptAcquire does not allocate, on success or failure; a Lease is a
// small value and its metadata is computed when read. Only queueing
// allocates (the Waiter).
package limiter
