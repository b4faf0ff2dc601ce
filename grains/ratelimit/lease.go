package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/grains/ratelimit/internal/contract"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

// Metadata names a lease may carry, and the reason phrases.
const (
	// MetadataRetryAfter names the time after which a retry may succeed,
	// carried by rejections of the time-based limiters (see
	// Lease.RetryAfter).
	MetadataRetryAfter = contract.MetadataRetryAfter
	// MetadataReasonPhrase names why a lease was not acquired (see
	// Lease.Reason).
	MetadataReasonPhrase = contract.MetadataReasonPhrase

	// ReasonRateLimitExceeded is the reason of a rejection that names
	// none: the limit was reached.
	ReasonRateLimitExceeded = contract.ReasonRateLimitExceeded
	// ReasonLeaseNotAcquired is the reason of a rejection because the
	// call's budget ran out while it waited in the queue.
	ReasonLeaseNotAcquired = contract.ReasonLeaseNotAcquired
	// ReasonTimeLimitExceeded is the reason of a rejection because no
	// answer came within the response timeout.
	ReasonTimeLimitExceeded = contract.ReasonTimeLimitExceeded
	// ReasonQueueLimitReached is the reason of a concurrency limiter's
	// rejection when its queue is full.
	ReasonQueueLimitReached = contract.ReasonQueueLimitReached
)

// ErrLimitExceeded is matched (errors.Is) by every *ExceededError.
var ErrLimitExceeded = errors.New("ratelimit: limit exceeded")

// ExceededError is a rejected lease as an error, for code that turns a
// rejection into a failure (Lease.Err).
type ExceededError struct {
	// Reason says why the lease was not acquired.
	Reason string
	// RetryAfter is when a retry may succeed; 0 when the limiter gave no
	// hint.
	RetryAfter time.Duration
}

// Error describes the rejection.
func (e *ExceededError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("ratelimit: %s (retry after %v)", e.Reason, e.RetryAfter)
	}
	return "ratelimit: " + e.Reason
}

// Is reports whether target is ErrLimitExceeded.
func (e *ExceededError) Is(target error) bool { return target == ErrLimitExceeded }

// Lease is the outcome of an acquisition: permits held (Acquired), or a
// rejection with a reason and possibly a retry-after hint.
//
// A concurrency lease holds its permits until Release. A time-based lease,
// a rejected lease and a zero-permit lease are release-optional: the
// grain kept nothing for them, so Release sends nothing. Release is safe to
// call on every lease, more than once, from any goroutine, so
// `defer lease.Release(ctx)` is always right.
type Lease struct {
	md       pb.LeaseMetadata // decoded in place: one allocation per lease
	grain    *grainRef        // the reference of the holder that acquired the lease
	released atomic.Bool
	// refundable says that the grain keeps what a refund of the lease
	// needs (a time-based lease taken for a decision over many limits).
	refundable bool

	group      *Group // set for a group's lease, which releases the group
	generation uint64
}

// timedOutMetadata is shared by every lease made for a call that got no
// answer; leases only read their metadata.
var timedOutMetadata = []*pb.MetadataEntry{{Name: MetadataReasonPhrase, Value: ReasonTimeLimitExceeded}}

func timedOutLease(g *grainRef) *Lease {
	l := &Lease{grain: g}
	l.md.ReleaseOptional, l.md.Metadata = true, timedOutMetadata
	return l
}

// Acquired reports whether the lease holds the permits it asked for.
func (l *Lease) Acquired() bool { return l.md.Acquired }

// ReleaseOptional reports whether the grain kept nothing for the lease, so
// that Release sends nothing. A lease from a server that predates the
// flag needs release.
func (l *Lease) ReleaseOptional() bool { return l.md.ReleaseOptional }

// ID returns the lease's id within its grain; 0 for a rejected lease.
func (l *Lease) ID() uint64 { return l.md.LeaseId }

// Owner returns the limiter grain that issued the lease. A lease that
// needs no release does not name it: its issuer is the holder's grain.
func (l *Lease) Owner() actor.GrainID {
	if id := l.md.GrainId; id != nil {
		return actor.GrainID{Type: id.Type, Key: id.Key}
	}
	if l.grain != nil {
		return l.grain.ref.GrainID()
	}
	return actor.GrainID{}
}

// metadata returns the value of the named metadata.
func (l *Lease) metadata(name string) (string, bool) {
	for _, e := range l.md.Metadata {
		if e.GetName() == name {
			return e.GetValue(), true
		}
	}
	return "", false
}

// Reason says why the lease was not acquired: its REASON_PHRASE, else
// ReasonRateLimitExceeded. It is "" for an acquired lease.
func (l *Lease) Reason() string {
	if l.md.Acquired {
		return ""
	}
	if r, ok := l.metadata(MetadataReasonPhrase); ok {
		return r
	}
	return ReasonRateLimitExceeded
}

// RetryAfter returns the time after which a retry may succeed, from the
// lease's RETRY_AFTER; 0 when there is none.
func (l *Lease) RetryAfter() time.Duration {
	v, ok := l.metadata(MetadataRetryAfter)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// Remaining returns the permits the limiter had free when it answered
// (its Statistics' AvailablePermits then, after this lease's own), and
// false when the answer did not say: a lease a holder answered from its
// leased quota, a group's lease, one that got no answer, or one from a
// server that predates it. A lease given back by AcquireMany counts the
// permits its refund returned.
func (l *Lease) Remaining() (int64, bool) { return l.md.Remaining, l.md.HasRemaining }

// ResetAfter returns how long after the answer the limiter was to be back
// in full by itself: the end of a fixed window. It is 0 when the limiter
// could not say (the other algorithms, manual replenishment, a lease
// without the grain's answer), which a caller reads as a whole window.
func (l *Lease) ResetAfter() time.Duration { return time.Duration(l.md.ResetInNanos) }

// Metadata yields every metadata entry the lease carries, name and value,
// as the grain sent them; RETRY_AFTER's value is a Go duration string.
// Reason and RetryAfter read the known names.
func (l *Lease) Metadata() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, e := range l.md.Metadata {
			if !yield(e.GetName(), e.GetValue()) {
				return
			}
		}
	}
}

// Err returns nil for an acquired lease and an *ExceededError for a
// rejection.
func (l *Lease) Err() error {
	if l.md.Acquired {
		return nil
	}
	return &ExceededError{Reason: l.Reason(), RetryAfter: l.RetryAfter()}
}

// String describes the lease for logs and test failures.
func (l *Lease) String() string {
	if l.group != nil {
		return "acquired (group)"
	}
	if l.md.Acquired {
		return fmt.Sprintf("acquired (lease %d of %s)", l.md.LeaseId, l.Owner())
	}
	return l.Err().Error()
}

// refund gives back the permits of a refundable time-based lease, once,
// and reports how many came back (see the limiter's Refund rules). A
// lease that is not refundable, not acquired or refunded already sends
// nothing. When the call fails the lease stays unrefunded.
func (l *Lease) refund(ctx context.Context) (int64, error) {
	if !l.refundable || !l.md.Acquired || l.grain == nil || l.grain.refund == nil || !l.released.CompareAndSwap(false, true) {
		return 0, nil
	}
	out := new(pb.RefundReply)
	if err := l.grain.ref.Invoke(ctx, l.grain.refund, &pb.RefundRequest{LeaseId: l.md.LeaseId}, out); err != nil {
		l.released.Store(false)
		return 0, err
	}
	if l.md.HasRemaining {
		l.md.Remaining += out.Refunded
	}
	return out.Refunded, nil
}

// releaseMethods are the Release methods of the grain types, for a lease
// whose owner is not the grain of the holder that got it.
var releaseMethods = map[string]*proxy.MethodDesc{
	pb.ConcurrencyLimiterGrainType:   pb.ConcurrencyLimiter_Release_Method,
	pb.FixedWindowLimiterGrainType:   pb.FixedWindowLimiter_Release_Method,
	pb.SlidingWindowLimiterGrainType: pb.SlidingWindowLimiter_Release_Method,
	pb.TokenBucketLimiterGrainType:   pb.TokenBucketLimiter_Release_Method,
}

// ErrUnknownOwner is returned by Release for a lease whose owner is not a
// rate-limiting grain type.
var ErrUnknownOwner = errors.New("ratelimit: lease owner is not a limiter grain")

// Release gives the lease's permits back. It sends nothing for a rejected
// or release-optional lease, or for a lease already released; otherwise
// it calls the owner grain, through the holder's reference when the lease
// came from the holder's grain. When the call fails the lease stays
// unreleased, and Release may be tried again.
func (l *Lease) Release(ctx context.Context) error {
	if l.group != nil {
		if !l.released.CompareAndSwap(false, true) {
			return nil
		}
		return l.group.release(ctx, l.generation)
	}
	if !l.md.Acquired || l.md.ReleaseOptional || !l.released.CompareAndSwap(false, true) {
		return nil
	}
	if l.grain != nil {
		l.grain.untrack(l) // renewals stop at once; a release that fails leaves the lease to expire
	}
	in, out := &pb.ReleaseRequest{LeaseId: l.md.LeaseId}, new(pb.ReleaseReply)
	call := func(ctx context.Context) error {
		owner := l.Owner()
		if owner == l.grain.ref.GrainID() {
			return l.grain.ref.Invoke(ctx, l.grain.release, in, out)
		}
		if m := releaseMethods[owner.Type]; m != nil {
			return proxy.NewRef(l.grain.ref.Caller(), owner.Type, owner.Key).Invoke(ctx, m, in, out)
		}
		return fmt.Errorf("%w: %s", ErrUnknownOwner, owner)
	}
	err := call(ctx)
	// A release that could not reach the grain is tried again, within the
	// caller's response timeout (or ctx's deadline): a permit given back
	// late is better than one held until the lease expires.
	deadline := time.Now().Add(l.grain.ref.Caller().ResponseTimeout())
	for backoff := 20 * time.Millisecond; err != nil && releaseRetryable(err) && ctx.Err() == nil && time.Now().Add(backoff).Before(deadline); backoff = min(2*backoff, time.Second) {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-t.C:
			err = call(ctx)
		}
		t.Stop()
	}
	if err != nil {
		l.released.Store(false)
	}
	return err
}
