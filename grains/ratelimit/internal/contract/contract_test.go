package contract

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

func TestOptionsSurviveTheWire(t *testing.T) {
	c := limiter.ConcurrencyOptions{PermitLimit: 3, QueueLimit: 4, QueueOrder: limiter.NewestFirst}
	f := limiter.FixedWindowOptions{PermitLimit: 3, QueueLimit: 4, QueueOrder: limiter.NewestFirst, Window: 1500 * time.Millisecond, ManualReplenishment: true}
	s := limiter.SlidingWindowOptions{PermitLimit: 3, QueueLimit: 4, Window: time.Minute, SegmentsPerWindow: 6, ManualReplenishment: true}
	b := limiter.TokenBucketOptions{TokenLimit: 3, TokensPerPeriod: 2, QueueLimit: 4, ReplenishmentPeriod: time.Second, ManualReplenishment: true}
	if got, ok := ConcurrencyFromWire(ConcurrencyToWire(c)); assert.True(t, ok) {
		assert.Equal(t, c, got)
	}
	if got, ok := FixedWindowFromWire(FixedWindowToWire(f)); assert.True(t, ok) {
		assert.Equal(t, f, got)
	}
	if got, ok := SlidingWindowFromWire(SlidingWindowToWire(s)); assert.True(t, ok) {
		assert.Equal(t, s, got)
	}
	if got, ok := TokenBucketFromWire(TokenBucketToWire(b)); assert.True(t, ok) {
		assert.Equal(t, b, got)
	}
	_, ok := ConcurrencyFromWire(nil)
	assert.False(t, ok)
	_, ok = FixedWindowFromWire(nil)
	assert.False(t, ok)
	_, ok = SlidingWindowFromWire(nil)
	assert.False(t, ok)
	_, ok = TokenBucketFromWire(nil)
	assert.False(t, ok)
}

func TestAQueueOrderThisBuildDoesNotKnowFailsValidation(t *testing.T) {
	for _, order := range []pb.QueueOrder{2, 300, -1} {
		o, _ := ConcurrencyFromWire(&pb.ConcurrencyOptions{PermitLimit: 1, QueueOrder: order})
		assert.ErrorIs(t, o.Validate(), limiter.ErrInvalidOptions, "order %d", order)
	}
}

// The grains send the limiter's argument errors as *proxy.Error values; a
// caller receives a fresh *proxy.Error of the same code, which must match
// the limiter's error and the sent one, and the limiter's error must match
// it back, so that there is one error per meaning.
func TestArgumentErrorsMatchTheLimitersBothWays(t *testing.T) {
	for sent, local := range map[*proxy.Error]error{
		ErrNegativeCount:     limiter.ErrNegativeCount,
		ErrCountExceedsLimit: limiter.ErrCountExceedsLimit,
	} {
		received := &proxy.Error{Code: sent.Code, Message: sent.Message}
		assert.ErrorIs(t, received, local)
		assert.ErrorIs(t, received, sent)
		assert.ErrorIs(t, local, received)
		assert.Equal(t, local.Error(), sent.Message)
	}
	assert.NotErrorIs(t, ErrNegativeCount, limiter.ErrCountExceedsLimit)
	assert.NotErrorIs(t, limiter.ErrNegativeCount, ErrCountExceedsLimit)
	assert.NotErrorIs(t, limiter.ErrNegativeCount, limiter.ErrClosed)
}
