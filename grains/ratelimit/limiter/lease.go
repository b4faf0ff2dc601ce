package limiter

import (
	"fmt"
	"time"
)

// Metadata names a failed lease may carry, and the reason phrase used by the
// concurrency limiter. They are the names the grains put on the wire.
const (
	// MetadataRetryAfter names a time.Duration after which a retry may
	// succeed. Window and bucket leases list it.
	MetadataRetryAfter = "RETRY_AFTER"
	// MetadataReasonPhrase names a string that says why a lease failed.
	// Concurrency leases list it.
	MetadataReasonPhrase = "REASON_PHRASE"
	// ReasonQueueLimitReached is the reason phrase of a concurrency lease
	// rejected because the queue had no room.
	ReasonQueueLimitReached = "Queue limit reached"
)

// algorithm identifies which limiter issued a lease; the zero value is a
// lease that no limiter issued.
type algorithm uint8

const (
	algorithmNone algorithm = iota
	algorithmConcurrency
	algorithmFixedWindow
	algorithmSlidingWindow
	algorithmTokenBucket
)

type leaseFlags uint8

const (
	leaseAcquired leaseFlags = 1 << iota
	leaseHasRetryAfter
	leaseQueueLimitReached
)

// Lease is the result of an acquisition: either permits held (Acquired) or a
// rejection, possibly with a retry-after hint. It is a small value; reading
// its metadata computes on demand and allocates only in MetadataNames and
// Metadata.
//
// Time-based limiters never take permits back, so their leases need no
// release. A successful [Concurrency] lease holds permits until the driver
// calls Release with Permits; ID gives it an identity to track.
type Lease struct {
	id         uint64
	permits    int64
	window     uint64 // time-based: the window (fixed) or slide (sliding) the permits were charged in
	retryAfter time.Duration
	algorithm  algorithm
	flags      leaseFlags
}

// Acquired reports whether the lease holds the permits it asked for.
func (l Lease) Acquired() bool { return l.flags&leaseAcquired != 0 }

// Permits returns the number of permits the lease holds: the requested
// count when acquired, else 0.
func (l Lease) Permits() int64 { return l.permits }

// ID returns a number that identifies a successful non-zero concurrency
// lease within its limiter (unique and increasing), or 0 for every other
// lease.
func (l Lease) ID() uint64 { return l.id }

// RetryAfter returns the RETRY_AFTER hint of a failed lease, and whether it
// has one.
func (l Lease) RetryAfter() (time.Duration, bool) {
	return l.retryAfter, l.flags&leaseHasRetryAfter != 0
}

// ReasonPhrase returns the REASON_PHRASE of a failed lease, and whether it
// has one. Only a concurrency lease rejected for lack of queue room has one.
func (l Lease) ReasonPhrase() (string, bool) {
	if l.flags&leaseQueueLimitReached != 0 {
		return ReasonQueueLimitReached, true
	}
	return "", false
}

// MetadataNames lists the metadata names a lease of its limiter may carry,
// whether or not this lease has a value: REASON_PHRASE for concurrency
// leases, RETRY_AFTER for the others. It returns a new slice.
func (l Lease) MetadataNames() []string {
	switch l.algorithm {
	case algorithmNone:
		return nil
	case algorithmConcurrency:
		return []string{MetadataReasonPhrase}
	}
	return []string{MetadataRetryAfter}
}

// Metadata returns the value of the named metadata (a time.Duration for
// RETRY_AFTER, a string for REASON_PHRASE) and whether the lease has it.
func (l Lease) Metadata(name string) (any, bool) {
	switch name {
	case MetadataRetryAfter:
		if d, ok := l.RetryAfter(); ok {
			return d, true
		}
	case MetadataReasonPhrase:
		if r, ok := l.ReasonPhrase(); ok {
			return r, true
		}
	}
	return nil, false
}

// String describes the lease for logs and test failures.
func (l Lease) String() string {
	if l.Acquired() {
		if l.id != 0 {
			return fmt.Sprintf("acquired %d (id %d)", l.permits, l.id)
		}
		return fmt.Sprintf("acquired %d", l.permits)
	}
	if d, ok := l.RetryAfter(); ok {
		return fmt.Sprintf("rejected (retry after %v)", d)
	}
	if r, ok := l.ReasonPhrase(); ok {
		return "rejected (" + r + ")"
	}
	return "rejected"
}

// Statistics is a snapshot of a limiter's counters.
type Statistics struct {
	// AvailablePermits is the number of permits (whole tokens) free now.
	AvailablePermits int64
	// QueuedPermits is the total count of the live queued requests, in
	// permits, not requests.
	QueuedPermits int64
	// TotalFailedLeases counts rejected attempts, queue-limit rejections and
	// evicted waiters.
	TotalFailedLeases int64
	// TotalSuccessfulLeases counts immediate successes (including zero-permit
	// ones) and granted waiters.
	TotalSuccessfulLeases int64
}

// Outcome is the state of a [Waiter]. Each waiter leaves OutcomePending
// exactly once.
type Outcome uint8

const (
	// OutcomePending means the waiter is still queued.
	OutcomePending Outcome = iota
	// OutcomeGranted means the waiter's permits were granted; its lease is
	// acquired.
	OutcomeGranted
	// OutcomeEvicted means a newer request pushed the waiter out of a full
	// NewestFirst queue; its lease is failed and counted as failed.
	OutcomeEvicted
	// OutcomeClosed means the limiter was closed while the waiter was
	// queued; its lease is failed and not counted.
	OutcomeClosed
	// OutcomeCanceled means the driver cancelled the waiter; it is counted
	// neither as failed nor as successful.
	OutcomeCanceled
)

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case OutcomePending:
		return "pending"
	case OutcomeGranted:
		return "granted"
	case OutcomeEvicted:
		return "evicted"
	case OutcomeClosed:
		return "closed"
	case OutcomeCanceled:
		return "canceled"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Waiter is a queued acquisition. It completes later, during some other call
// on its limiter, in exactly one of four ways: granted, evicted, closed or
// cancelled. The limiter's completion handler (see SetCompletionHandler) is
// called once when that happens.
type Waiter struct {
	// Value is for the driver: it typically maps the waiter to the reply or
	// channel that must learn the outcome. The limiter never reads it.
	Value any

	owner   *engine
	permits int64
	outcome Outcome
	lease   Lease
}

// Permits returns the number of permits the waiter asked for.
func (w *Waiter) Permits() int64 { return w.permits }

// Outcome returns how the waiter completed, or OutcomePending.
func (w *Waiter) Outcome() Outcome { return w.outcome }

// Lease returns the waiter's lease once it has completed: acquired when
// granted, a failed lease without metadata otherwise. While pending it
// returns the zero Lease.
func (w *Waiter) Lease() Lease { return w.lease }
