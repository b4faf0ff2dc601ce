package limitgrain

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
)

func TestCountersCountEachAcquisitionOutcome(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	f.cancellable = true
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
	want := Snapshot{}
	check := func(step string) {
		t.Helper()
		assert.Equal(t, want, g.counters.Snapshot(), step)
	}

	held := acquire(f, g, 1).lease(t)
	require.True(t, held.Acquired)
	want.Granted++
	check("granted at once")

	expiring := acquire(f, g, 1).waiting(t)
	want.Queued++
	want.Waiting++
	check("queued")
	assert.False(t, acquire(f, g, 1).lease(t).Acquired, "the queue is full")
	want.Rejected++
	check("rejected at once")

	f.advance(f.budget)
	assert.False(t, expiring.lease(t).Acquired)
	want.Expired++
	want.Waiting--
	check("expired in the queue")

	cancelled := acquire(f, g, 1).waiting(t)
	cancelled.cancelCall()
	require.ErrorIs(t, cancelled.err, context.Canceled)
	want.Queued++
	want.Cancelled++
	check("cancelled in the queue")

	granted := acquire(f, g, 1).waiting(t)
	_, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: held.LeaseId})
	require.NoError(t, err)
	assert.True(t, granted.lease(t).Acquired)
	want.Queued++
	want.Granted++
	check("granted after a wait")
}

func TestCountersCountConfigurationChangesAsWaitingOnly(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
	require.True(t, acquire(f, g, 1).lease(t).Acquired)
	queued := acquire(f, g, 1).waiting(t)
	change := turn(f, func() (*pb.ConfigureReply, error) {
		return g.Configure(context.Background(), &pb.ConcurrencyOptions{PermitLimit: 5})
	}).waiting(t)
	assert.Equal(t, int64(2), g.counters.Snapshot().Waiting, "the acquisition and the change behind it")
	assert.Equal(t, uint64(1), g.counters.Snapshot().Queued, "a change is not an acquisition")

	f.advance(time.Hour)
	assert.True(t, queued.replied)
	assert.True(t, change.replied)
	assert.Zero(t, g.counters.Snapshot().Waiting)
}
