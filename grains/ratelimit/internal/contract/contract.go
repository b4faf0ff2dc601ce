package contract

import (
	"math"
	"time"

	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

// Metadata names and the reason phrases a lease may carry.
const (
	MetadataRetryAfter   = limiter.MetadataRetryAfter
	MetadataReasonPhrase = limiter.MetadataReasonPhrase

	ReasonRateLimitExceeded = "Rate limit exceeded"
	ReasonLeaseNotAcquired  = "Lease not acquired"
	ReasonTimeLimitExceeded = "Time limit exceeded"
	ReasonQueueLimitReached = limiter.ReasonQueueLimitReached
)

// The grains' argument errors as they send them: the limiter's, as
// *proxy.Error values with the limiter's codes, which errors.Is matches
// against the limiter's errors on every path.
var (
	ErrNegativeCount     = wireError(limiter.ErrNegativeCount)
	ErrCountExceedsLimit = wireError(limiter.ErrCountExceedsLimit)
)

func wireError(err error) *proxy.Error {
	return proxy.NewError(err.(interface{ ErrorCode() uint32 }).ErrorCode(), err.Error())
}

// Grain types, one per algorithm.
const (
	ConcurrencyGrainType   = pb.ConcurrencyLimiterGrainType
	FixedWindowGrainType   = pb.FixedWindowLimiterGrainType
	SlidingWindowGrainType = pb.SlidingWindowLimiterGrainType
	TokenBucketGrainType   = pb.TokenBucketLimiterGrainType
)

func orderToWire(o limiter.QueueOrder) pb.QueueOrder { return pb.QueueOrder(o) }

// orderFromWire keeps an order this build does not know invalid, so that
// validation rejects it instead of reading it as OldestFirst.
func orderFromWire(o pb.QueueOrder) limiter.QueueOrder {
	if o < 0 || o > math.MaxUint8 {
		return limiter.QueueOrder(math.MaxUint8)
	}
	return limiter.QueueOrder(o)
}

// ConcurrencyToWire encodes concurrency options.
func ConcurrencyToWire(o limiter.ConcurrencyOptions) *pb.ConcurrencyOptions {
	return &pb.ConcurrencyOptions{PermitLimit: o.PermitLimit, QueueLimit: o.QueueLimit, QueueOrder: orderToWire(o.QueueOrder), LeaseTtlNanos: int64(o.LeaseTTL)}
}

// ConcurrencyFromWire decodes concurrency options; ok is false for nil.
func ConcurrencyFromWire(p *pb.ConcurrencyOptions) (o limiter.ConcurrencyOptions, ok bool) {
	if p == nil {
		return o, false
	}
	return limiter.ConcurrencyOptions{PermitLimit: p.PermitLimit, QueueLimit: p.QueueLimit, QueueOrder: orderFromWire(p.QueueOrder), LeaseTTL: time.Duration(p.LeaseTtlNanos)}, true
}

// FixedWindowToWire encodes fixed-window options.
func FixedWindowToWire(o limiter.FixedWindowOptions) *pb.FixedWindowOptions {
	return &pb.FixedWindowOptions{
		PermitLimit: o.PermitLimit, QueueLimit: o.QueueLimit, QueueOrder: orderToWire(o.QueueOrder),
		WindowNanos: int64(o.Window), ManualReplenishment: o.ManualReplenishment,
	}
}

// FixedWindowFromWire decodes fixed-window options; ok is false for nil.
func FixedWindowFromWire(p *pb.FixedWindowOptions) (o limiter.FixedWindowOptions, ok bool) {
	if p == nil {
		return o, false
	}
	return limiter.FixedWindowOptions{
		PermitLimit: p.PermitLimit, QueueLimit: p.QueueLimit, QueueOrder: orderFromWire(p.QueueOrder),
		Window: time.Duration(p.WindowNanos), ManualReplenishment: p.ManualReplenishment,
	}, true
}

// SlidingWindowToWire encodes sliding-window options.
func SlidingWindowToWire(o limiter.SlidingWindowOptions) *pb.SlidingWindowOptions {
	return &pb.SlidingWindowOptions{
		PermitLimit: o.PermitLimit, QueueLimit: o.QueueLimit, QueueOrder: orderToWire(o.QueueOrder),
		WindowNanos: int64(o.Window), ManualReplenishment: o.ManualReplenishment, SegmentsPerWindow: o.SegmentsPerWindow,
	}
}

// SlidingWindowFromWire decodes sliding-window options; ok is false for nil.
func SlidingWindowFromWire(p *pb.SlidingWindowOptions) (o limiter.SlidingWindowOptions, ok bool) {
	if p == nil {
		return o, false
	}
	return limiter.SlidingWindowOptions{
		PermitLimit: p.PermitLimit, QueueLimit: p.QueueLimit, QueueOrder: orderFromWire(p.QueueOrder),
		Window: time.Duration(p.WindowNanos), ManualReplenishment: p.ManualReplenishment, SegmentsPerWindow: p.SegmentsPerWindow,
	}, true
}

// TokenBucketToWire encodes token-bucket options.
func TokenBucketToWire(o limiter.TokenBucketOptions) *pb.TokenBucketOptions {
	return &pb.TokenBucketOptions{
		TokenLimit: o.TokenLimit, QueueLimit: o.QueueLimit, QueueOrder: orderToWire(o.QueueOrder),
		ReplenishmentPeriodNanos: int64(o.ReplenishmentPeriod), ManualReplenishment: o.ManualReplenishment, TokensPerPeriod: o.TokensPerPeriod,
	}
}

// TokenBucketFromWire decodes token-bucket options; ok is false for nil.
func TokenBucketFromWire(p *pb.TokenBucketOptions) (o limiter.TokenBucketOptions, ok bool) {
	if p == nil {
		return o, false
	}
	return limiter.TokenBucketOptions{
		TokenLimit: p.TokenLimit, QueueLimit: p.QueueLimit, QueueOrder: orderFromWire(p.QueueOrder),
		ReplenishmentPeriod: time.Duration(p.ReplenishmentPeriodNanos), ManualReplenishment: p.ManualReplenishment, TokensPerPeriod: p.TokensPerPeriod,
	}, true
}
