package limitgrain

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
)

func acquireRefundable[O comparable, P proto.Message, R acquireRequest[P]](f *fakeRuntime, g *grain[O, P, R], permits int64) outcome {
	return turn(f, func() (*pb.LeaseMetadata, error) {
		return g.Acquire(context.Background(), &pb.AcquireRequest{Permits: permits, Refundable: true})
	})
}

func refund[O comparable, P proto.Message, R acquireRequest[P]](t *testing.T, g *grain[O, P, R], id uint64) int64 {
	t.Helper()
	reply, err := g.Refund(context.Background(), &pb.RefundRequest{LeaseId: id})
	require.NoError(t, err)
	return reply.Refunded
}

func TestARefundableLeaseIsRefundedOnceWithinItsWindow(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	g := newFixed(f, limiter.FixedWindowOptions{PermitLimit: 5, Window: time.Second})
	plain := acquire(f, g, 1).lease(t)
	md := acquireRefundable(f, g, 2).lease(t)
	require.True(t, md.Acquired)
	assert.True(t, md.ReleaseOptional, "a refundable lease still needs no release")
	assert.Zero(t, refund(t, g, plain.LeaseId), "a lease not acquired as refundable keeps nothing to refund")
	assert.EqualValues(t, 2, refund(t, g, md.LeaseId))
	assert.Zero(t, refund(t, g, md.LeaseId), "a second refund gives nothing")
	assert.EqualValues(t, 4, stats(t, g).AvailablePermits)

	late := acquireRefundable(f, g, 2).lease(t)
	f.advance(time.Second) // the window's tick
	assert.Zero(t, refund(t, g, late.LeaseId), "its window ended: the permits came back with the new one")
	assert.EqualValues(t, 5, stats(t, g).AvailablePermits)
}

func TestARefundServesTheQueue(t *testing.T) {
	f := newRuntime(t, pb.TokenBucketLimiterGrainType)
	g := startGrain[limiter.TokenBucketOptions, *pb.TokenBucketOptions, *pb.TokenBucketAcquireRequest](f, tokenBucket,
		limiter.TokenBucketOptions{TokenLimit: 1, QueueLimit: 1, TokensPerPeriod: 1, ReplenishmentPeriod: time.Hour, ManualReplenishment: true}, nil)
	md := acquireRefundable(f, g, 1).lease(t)
	waiter := acquire(f, g, 1).waiting(t)
	assert.EqualValues(t, 1, refund(t, g, md.LeaseId))
	assert.True(t, waiter.lease(t).Acquired, "the refunded token went to the waiter")
}

func TestAConfigurationChangeForgetsRefunds(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	g := newFixed(f, limiter.FixedWindowOptions{PermitLimit: 5, Window: time.Hour, ManualReplenishment: true})
	md := acquireRefundable(f, g, 2).lease(t)
	_, err := g.Reset(context.Background(), &pb.ResetRequest{})
	require.NoError(t, err)
	assert.Zero(t, refund(t, g, md.LeaseId), "the reset gave the permits back already")
	assert.EqualValues(t, 5, stats(t, g).AvailablePermits)
}

func TestRefundRecordsThatCanNoLongerBeRefundedAreDropped(t *testing.T) {
	f := newRuntime(t, pb.FixedWindowLimiterGrainType)
	g := newFixed(f, limiter.FixedWindowOptions{PermitLimit: 1000, Window: time.Second})
	for range 10 {
		for range 100 {
			require.True(t, acquireRefundable(f, g, 1).lease(t).Acquired)
		}
		f.advance(time.Second)
	}
	assert.LessOrEqual(t, len(g.refunds), 2*100+64, "only about the current window's records are kept")
}

// A caller that marks every grant refundable, on a key whose grants all
// stay refundable (a token bucket, within the horizon), makes the grain
// keep no more than maxRefunds records; an evicted grant refunds nothing.
func TestRefundRecordsStayBoundedWhateverTheCallersAsk(t *testing.T) {
	f := newRuntime(t, pb.TokenBucketLimiterGrainType)
	g := startGrain[limiter.TokenBucketOptions, *pb.TokenBucketOptions, *pb.TokenBucketAcquireRequest](f, tokenBucket,
		limiter.TokenBucketOptions{TokenLimit: 1 << 40, TokensPerPeriod: 1, ReplenishmentPeriod: time.Hour, ManualReplenishment: true}, nil)
	var ids []uint64
	for range 4 * maxRefunds {
		md := acquireRefundable(f, g, 1).lease(t)
		require.True(t, md.Acquired)
		ids = append(ids, md.LeaseId)
		require.LessOrEqual(t, len(g.refunds), maxRefunds)
	}
	assert.Len(t, g.refunds, maxRefunds, "at the bound every new grant is kept, one at random is evicted")
	var refunded int64
	for _, id := range ids {
		refunded += refund(t, g, id)
	}
	assert.EqualValues(t, maxRefunds, refunded, "only the records kept refund, each once")
	assert.Empty(t, g.refunds)
}

func TestConcurrencyGrainsKeepNoRefunds(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 2})
	md := acquireRefundable(f, g, 1).lease(t)
	assert.False(t, md.ReleaseOptional, "released, not refunded")
	assert.Nil(t, g.refunds)
	assert.Zero(t, refund(t, g, md.LeaseId))
}
