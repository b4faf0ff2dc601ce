package limitgrain

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit/internal/contract"
	"github.com/granary-go/granary/grains/ratelimit/limiter"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

func configure(f *fakeRuntime, g *concurrencyGrain, o limiter.ConcurrencyOptions) outcome {
	return turn(f, func() (*pb.ConfigureReply, error) {
		return g.Configure(context.Background(), contract.ConcurrencyToWire(o))
	})
}

func acquireWith(f *fakeRuntime, g *concurrencyGrain, permits int64, o *limiter.ConcurrencyOptions) outcome {
	in := &pb.ConcurrencyAcquireRequest{Permits: permits}
	if o != nil {
		in.Options = contract.ConcurrencyToWire(*o)
	}
	return turn(f, func() (*pb.LeaseMetadata, error) { return g.AcquireAndCheckConfiguration(context.Background(), in) })
}

func configuration(t *testing.T, g *concurrencyGrain) limiter.ConcurrencyOptions {
	t.Helper()
	p, err := g.Configuration(context.Background(), &pb.ConfigurationRequest{})
	require.NoError(t, err)
	o, ok := contract.ConcurrencyFromWire(p)
	require.True(t, ok)
	return o
}

var (
	twoPermits  = limiter.ConcurrencyOptions{PermitLimit: 2, QueueLimit: 2}
	fivePermits = limiter.ConcurrencyOptions{PermitLimit: 5, QueueLimit: 2}
)

func TestConfigureReplacesTheLimiterAndStoresAtOnce(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, twoPermits)
	held := acquire(f, g, 1).lease(t)
	out := configure(f, g, fivePermits)
	require.NoError(t, out.err)
	require.Nil(t, out.deferred, "nothing waits: the change runs at once")
	assert.Equal(t, fivePermits, configuration(t, g))
	assert.Equal(t, 1, f.writes, "stored at once")
	st := stats(t, g)
	assert.EqualValues(t, 5, st.AvailablePermits, "quota starts afresh")
	assert.Zero(t, st.TotalSuccessfulLeases, "and counters")
	assert.Zero(t, st.ActiveLeases, "and leases")
	reply, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: held.LeaseId})
	require.NoError(t, err)
	assert.False(t, reply.Released, "a lease of the old limiter is forgotten")
	assert.EqualValues(t, 5, stats(t, g).AvailablePermits)
}

func TestInvalidOptionsChangeNothing(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, twoPermits)
	held := acquire(f, g, 2).lease(t)
	before := stats(t, g)

	out := configure(f, g, limiter.ConcurrencyOptions{PermitLimit: 0, QueueLimit: -1})
	var oe *limiter.OptionsError
	require.ErrorAs(t, out.err, &oe)
	assert.True(t, oe.Has("PermitLimit") && oe.Has("QueueLimit"), "every bad field is named: %v", oe)
	out = acquireWith(f, g, 1, &limiter.ConcurrencyOptions{PermitLimit: -3})
	assert.ErrorIs(t, out.err, limiter.ErrInvalidOptions)
	out = acquireWith(f, g, 6, &fivePermits)
	assert.ErrorIs(t, out.err, limiter.ErrCountExceedsLimit, "permits are checked against the new options")
	out = acquireWith(f, g, -1, &fivePermits)
	assert.ErrorIs(t, out.err, limiter.ErrNegativeCount)
	_, err := g.Configure(context.Background(), nil)
	assert.Error(t, err)

	assert.Equal(t, twoPermits, configuration(t, g))
	assert.Equal(t, before, stats(t, g), "quota and counters intact")
	assert.Zero(t, f.writes)
	reply, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: held.LeaseId})
	require.NoError(t, err)
	assert.True(t, reply.Released, "the lease survived")
}

func TestAcquireAndCheckConfigurationReconfiguresOnlyWhenOptionsDiffer(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, twoPermits)
	assert.True(t, acquireWith(f, g, 1, &twoPermits).lease(t).Acquired)
	assert.Zero(t, f.writes, "the same options change nothing")
	assert.True(t, acquireWith(f, g, 1, nil).lease(t).Acquired, "no options: the current ones")
	assert.Zero(t, stats(t, g).AvailablePermits)

	md := acquireWith(f, g, 3, &fivePermits).lease(t)
	assert.True(t, md.Acquired, "reconfigured first, then acquired")
	assert.Equal(t, 1, f.writes)
	assert.Equal(t, fivePermits, configuration(t, g))
	st := stats(t, g)
	assert.EqualValues(t, 2, st.AvailablePermits)
	assert.EqualValues(t, 1, st.TotalSuccessfulLeases)
}

func TestConfigurationChangeWaitsBehindQueuedAcquisitions(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 2})
	first := acquire(f, g, 1).lease(t)
	queued := acquire(f, g, 1).waiting(t)
	change := configure(f, g, fivePermits).waiting(t)
	later := acquire(f, g, 1).waiting(t)
	st := stats(t, g)
	assert.EqualValues(t, 3, st.WaitingCalls)
	assert.EqualValues(t, 2, st.QueuedPermits, "the later acquisition waits behind the change")
	assert.Equal(t, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 2}, configuration(t, g), "not yet applied")

	_, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: first.LeaseId})
	require.NoError(t, err)
	assert.True(t, queued.lease(t).Acquired, "the earlier acquisition ran under the old options")
	require.True(t, change.replied)
	require.NoError(t, change.err)
	assert.Equal(t, fivePermits, configuration(t, g))
	assert.True(t, later.lease(t).Acquired, "the later one under the new")
	st = stats(t, g)
	assert.EqualValues(t, 4, st.AvailablePermits)
	assert.EqualValues(t, 1, st.ActiveLeases, "the change forgot the leases before it")
	assert.Zero(t, st.WaitingCalls)
}

func TestConfigurationWaitThatRunsOutOfBudgetChangesNothing(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 2})
	acquire(f, g, 1).lease(t)
	f.budget = 10 * time.Second
	queued := acquire(f, g, 1).waiting(t)
	f.budget = 100 * time.Millisecond
	change := configure(f, g, fivePermits).waiting(t)
	f.advance(100 * time.Millisecond)
	require.True(t, change.replied)
	assert.ErrorIs(t, change.err, proxy.ErrTimeout)
	assert.Equal(t, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 2}, configuration(t, g))
	assert.False(t, queued.replied, "the acquisition ahead still waits")
	assert.EqualValues(t, 1, stats(t, g).WaitingCalls)
	assert.Zero(t, f.writes)
}

func TestCancelledConfigurationWaitChangesNothing(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 2})
	first := acquire(f, g, 1).lease(t)
	queued := acquire(f, g, 1).waiting(t)
	f.cancellable = true
	change := configure(f, g, fivePermits).waiting(t)
	change.cancelCall()
	assert.ErrorIs(t, change.err, context.Canceled)
	_, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: first.LeaseId})
	require.NoError(t, err)
	assert.True(t, queued.lease(t).Acquired)
	assert.Equal(t, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 2}, configuration(t, g))
	st := stats(t, g)
	assert.EqualValues(t, 1, st.ActiveLeases, "nothing was reset")
	assert.EqualValues(t, 2, st.TotalSuccessfulLeases)
	assert.Zero(t, f.writes)
}

func TestHeldCallWhoseBudgetRanOutNeitherAcquiresNorReconfigures(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 2})
	first := acquire(f, g, 1).lease(t)
	f.budget = time.Hour
	queued := acquire(f, g, 1).waiting(t)
	f.budget = 100 * time.Millisecond
	reconfigure := acquireWith(f, g, 1, &fivePermits).waiting(t)
	// Its deadline passes; the queue drains before its expiry turn runs.
	f.now = f.now.Add(time.Second)
	_, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: first.LeaseId})
	require.NoError(t, err)
	assert.True(t, queued.lease(t).Acquired)
	md := reconfigure.lease(t)
	assert.False(t, md.Acquired)
	assert.Equal(t, "Lease not acquired", reason(md))
	assert.Equal(t, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 2}, configuration(t, g))
	assert.Zero(t, f.writes)
}

func TestHeldReconfigurationComparesOptionsWhenItsTurnComes(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 2})
	first := acquire(f, g, 1).lease(t)
	acquire(f, g, 1).waiting(t)
	change := configure(f, g, fivePermits).waiting(t)
	same := acquireWith(f, g, 1, &fivePermits).waiting(t)
	_, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: first.LeaseId})
	require.NoError(t, err)
	require.NoError(t, change.err)
	assert.True(t, same.lease(t).Acquired)
	assert.Equal(t, 1, f.writes, "the second call found the options already in place")
}

func TestResetKeepsTheOptions(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, twoPermits)
	require.NoError(t, configure(f, g, fivePermits).err)
	acquire(f, g, 5).lease(t)
	out := turn(f, func() (*pb.ResetReply, error) { return g.Reset(context.Background(), &pb.ResetRequest{}) })
	require.NoError(t, out.err)
	assert.Equal(t, fivePermits, configuration(t, g))
	st := stats(t, g)
	assert.EqualValues(t, 5, st.AvailablePermits)
	assert.Zero(t, st.ActiveLeases)
	assert.Equal(t, 2, f.writes, "the reset is stored at once")
	assert.True(t, g.configured)
}

func TestDeleteStateReturnsToTheDefaults(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, twoPermits)
	require.NoError(t, configure(f, g, fivePermits).err)
	require.NotNil(t, f.stored)
	acquire(f, g, 1).lease(t)
	out := turn(f, func() (*pb.DeleteStateReply, error) {
		return g.DeleteState(context.Background(), &pb.DeleteStateRequest{})
	})
	require.NoError(t, out.err)
	assert.Nil(t, f.stored, "the stored state is cleared")
	assert.Equal(t, twoPermits, configuration(t, g))
	assert.False(t, g.configured)
	assert.EqualValues(t, 2, stats(t, g).AvailablePermits)
}

func TestDeleteStateWithAFailingStoreChangesNothing(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, twoPermits)
	require.NoError(t, configure(f, g, fivePermits).err)
	acquire(f, g, 1).lease(t)
	before := stats(t, g)
	f.clearErr = errors.New("store down")
	out := turn(f, func() (*pb.DeleteStateReply, error) {
		return g.DeleteState(context.Background(), &pb.DeleteStateRequest{})
	})
	assert.ErrorIs(t, out.err, f.clearErr)
	assert.Equal(t, fivePermits, configuration(t, g))
	assert.Equal(t, before, stats(t, g))
	assert.NotNil(t, f.stored)
}

func TestConfigureWithAFailingStoreAppliesInMemory(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, twoPermits)
	f.writeErr = errors.New("store down")
	require.NoError(t, configure(f, g, fivePermits).err, "the snapshot is best effort; the flusher retries")
	assert.Equal(t, fivePermits, configuration(t, g))
	assert.Positive(t, f.dirty, "the state stays dirty for the flusher")
}

func TestHeldResetAndDeleteRunInOrder(t *testing.T) {
	f := newRuntime(t, pb.ConcurrencyLimiterGrainType)
	g := newConcurrency(f, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
	require.NoError(t, configure(f, g, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 2}).err)
	first := acquire(f, g, 1).lease(t)
	acquire(f, g, 1).waiting(t)
	reset := turn(f, func() (*pb.ResetReply, error) { return g.Reset(context.Background(), &pb.ResetRequest{}) }).waiting(t)
	del := turn(f, func() (*pb.DeleteStateReply, error) {
		return g.DeleteState(context.Background(), &pb.DeleteStateRequest{})
	}).waiting(t)
	_, err := g.Release(context.Background(), &pb.ReleaseRequest{LeaseId: first.LeaseId})
	require.NoError(t, err)
	require.True(t, reset.replied && del.replied)
	require.NoError(t, reset.err)
	require.NoError(t, del.err)
	assert.Equal(t, limiter.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1}, configuration(t, g), "back to the defaults")
	assert.Zero(t, stats(t, g).ActiveLeases)
}
