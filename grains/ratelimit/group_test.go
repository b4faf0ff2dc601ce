package ratelimit_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
)

func available(t *testing.T, l ratelimit.Limiter) int64 {
	t.Helper()
	st, err := l.Statistics(context.Background())
	require.NoError(t, err)
	return st.AvailablePermits
}

func TestGroupRollsBackWhenALaterMemberRejects(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pool := ratelimit.Concurrency(e.silo.Caller(), "group-pool", ratelimit.ConcurrencyOptions{PermitLimit: 2})
	strict := ratelimit.FixedWindow(e.silo.Caller(), "group-strict", fixedOptions(1, 0))
	exhaust, err := strict.Acquire(ctx, 1)
	require.NoError(t, err)
	require.True(t, exhaust.Acquired())

	g := ratelimit.NewGroup(pool, strict)
	assert.Equal(t, 2, g.Len())
	rejected, err := g.Acquire(ctx)
	require.NoError(t, err)
	require.False(t, rejected.Acquired())
	assert.Equal(t, strict.GrainID(), rejected.Owner(), "the first rejection is returned")
	assert.EqualValues(t, 2, available(t, pool), "the permit taken from the first member went back")

	again, err := g.Acquire(ctx)
	require.NoError(t, err, "a rejected group may try again")
	assert.False(t, again.Acquired())
}

func TestGroupIsAcquiredOnceUntilReleased(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := ratelimit.Concurrency(e.silo.Caller(), "once-a", ratelimit.ConcurrencyOptions{PermitLimit: 3})
	b := ratelimit.Concurrency(e.caller(viaGateway), "once-b", ratelimit.ConcurrencyOptions{PermitLimit: 3})
	g := ratelimit.NewGroup(a)
	require.NoError(t, g.Add(b))
	lease, err := g.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, lease.Acquired())
	assert.EqualValues(t, 2, available(t, a))
	assert.EqualValues(t, 2, available(t, b))

	_, err = g.Acquire(ctx)
	assert.ErrorIs(t, err, ratelimit.ErrGroupAcquired)
	assert.ErrorIs(t, g.Add(a), ratelimit.ErrGroupAcquired)
	assert.EqualValues(t, 2, available(t, a), "the refused Acquire took nothing")

	require.NoError(t, lease.Release(ctx))
	assert.EqualValues(t, 3, available(t, a))
	assert.EqualValues(t, 3, available(t, b))
	second, err := g.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, second.Acquired())
	require.NoError(t, lease.Release(ctx), "the first acquisition's lease cannot release the second")
	assert.EqualValues(t, 2, available(t, a))
	require.NoError(t, g.Release(ctx))
	assert.EqualValues(t, 3, available(t, a))
}

func TestConcurrentGroupReleasesReleaseEachLeaseOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var members []ratelimit.Limiter
	for _, key := range []string{"c1", "c2", "c3"} {
		members = append(members, ratelimit.Concurrency(e.silo.Caller(), key, ratelimit.ConcurrencyOptions{PermitLimit: 1}))
	}
	members = append(members, ratelimit.TokenBucket(e.silo.Caller(), "t1", tokenOptions(5, 0)))
	g := ratelimit.NewGroup(members...)
	lease, err := g.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, lease.Acquired())
	before := e.calls.count("", "Release")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				assert.NoError(t, g.Release(ctx))
			} else {
				assert.NoError(t, lease.Release(ctx))
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 3, e.calls.count("", "Release")-before, "one release per concurrency lease, none for the bucket")
	for _, m := range members[:3] {
		assert.EqualValues(t, 1, available(t, m))
	}
}

func TestConcurrentAcquireOfOneGroupFailsAtOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pool := ratelimit.Concurrency(e.silo.Caller(), "race", ratelimit.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
	block, err := pool.Acquire(ctx, 1)
	require.NoError(t, err)
	g := ratelimit.NewGroup(pool)
	first := make(chan *ratelimit.Lease, 1)
	go func() {
		l, err := g.Acquire(ctx)
		assert.NoError(t, err)
		first <- l
	}()
	waitForWaiting(t, pool, 1) // the first Acquire waits in the pool's queue
	_, err = g.Acquire(ctx)
	assert.ErrorIs(t, err, ratelimit.ErrGroupAcquired)
	released := make(chan error, 1)
	go func() { released <- g.Release(ctx) }() // waits for the running Acquire
	require.NoError(t, block.Release(ctx))
	l := <-first
	require.True(t, l.Acquired())
	require.NoError(t, <-released)
	assert.EqualValues(t, 1, available(t, pool), "the Release that waited released the group's lease")
}

func TestGroupReturnsAMembersErrorAfterRollingBack(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pool := ratelimit.Concurrency(e.silo.Caller(), "err-pool", ratelimit.ConcurrencyOptions{PermitLimit: 1})
	broken := failingLimiter{Limiter: pool, err: errors.New("unavailable")}
	g := ratelimit.NewGroup(pool, broken)
	_, err := g.Acquire(ctx)
	assert.ErrorIs(t, err, broken.err)
	assert.EqualValues(t, 1, available(t, pool))

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = ratelimit.NewGroup(pool).Acquire(cancelled)
	assert.ErrorIs(t, err, context.Canceled)
	assert.EqualValues(t, 1, available(t, pool))
	empty, err := ratelimit.NewGroup().Acquire(cancelled)
	assert.ErrorIs(t, err, context.Canceled, "an empty group does not let a cancelled caller through")
	assert.Nil(t, empty)
}

type failingLimiter struct {
	ratelimit.Limiter
	err error
}

func (f failingLimiter) AcquireAndConfigure(context.Context, int64) (*ratelimit.Lease, error) {
	return nil, f.err
}
