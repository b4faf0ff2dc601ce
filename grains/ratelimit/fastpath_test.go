package ratelimit_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/grains/ratelimit"
	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/silo"
)

// sideCounters are the counters that show a call's machinery: grain
// timers and deferred replies on the silo, cancellation registered by the
// client and by the silo's gateway.
type sideCounters struct {
	timers, deferred, clientWatches, siloRegistered int64
}

func counters(s *silo.Silo, c *client.Client) sideCounters {
	st := s.Stats()
	sc := sideCounters{timers: st.Host.TimersArmed, deferred: st.Host.Deferred, siloRegistered: st.Gateway.Inbound.Registered}
	if c != nil {
		sc.clientWatches = c.Stats().CancelWatches
	}
	return sc
}

func TestImmediateAnswersArmNoTimerAndRegisterNoCancellation(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	for _, alg := range algorithms {
		t.Run(alg.name, func(t *testing.T) {
			for _, k := range entries {
				caller := e.silo.Caller()
				if k == viaGateway {
					caller = c
				}
				// Manual replenishment: nothing here needs a tick.
				h := alg.holder(caller, "fast-"+k.String(), 3, 0, true)
				ctx := context.Background()
				l, err := h.Acquire(ctx, 1) // activates and configures the grain
				require.NoError(t, err)
				require.True(t, l.Acquired())

				before := counters(e.silo, c)
				for range 2 {
					l, err := h.Acquire(ctx, 1)
					require.NoError(t, err)
					assert.True(t, l.Acquired())
				}
				l, err = h.Acquire(ctx, 1)
				require.NoError(t, err)
				assert.False(t, l.Acquired(), "queue 0 rejects at once")
				assert.Equal(t, before, counters(e.silo, c), "%s: no timer, no deferred reply, no cancellation on either side", k)
			}
		})
	}
}

func TestOnlyAQueuedCallArmsADeadlineAndOnlyACancellableOneWatchesCancellation(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	h := ratelimit.Concurrency(c, "queued", ratelimit.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 2})
	held, err := h.Acquire(context.Background(), 1)
	require.NoError(t, err)
	require.True(t, held.Acquired())

	before := counters(e.silo, c)
	done := make(chan *ratelimit.Lease, 1)
	go func() {
		l, err := h.Acquire(context.Background(), 1)
		assert.NoError(t, err)
		done <- l
	}()
	eventually(t, func() bool { return counters(e.silo, c).deferred == before.deferred+1 }, "the acquisition waits")
	after := counters(e.silo, c)
	assert.Equal(t, before.timers+1, after.timers, "its deadline")
	assert.Equal(t, before.clientWatches, after.clientWatches, "a Background caller watches nothing")
	assert.Equal(t, before.siloRegistered, after.siloRegistered, "and the silo registers nothing for it")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		l, err := h.Acquire(ctx, 1)
		assert.NoError(t, err)
		done <- l
	}()
	// The client counts its watch after the request is sent, so the silo
	// may defer the call first.
	eventually(t, func() bool {
		now := counters(e.silo, c)
		return now.deferred == before.deferred+2 && now.clientWatches == before.clientWatches+1
	}, "a cancellable caller's acquisition waits, and the caller watches its context")
	after = counters(e.silo, c)
	assert.Equal(t, before.clientWatches+1, after.clientWatches, "one watch")
	assert.Equal(t, before.siloRegistered+1, after.siloRegistered)

	require.NoError(t, held.Release(context.Background()))
	first := <-done
	require.True(t, first.Acquired())
	require.NoError(t, first.Release(context.Background()))
	second := <-done
	require.True(t, second.Acquired())
	require.NoError(t, second.Release(context.Background()))
}

func TestNoReleaseIsSentForTimeBasedOrRejectedLeases(t *testing.T) {
	e := newEnv(t)
	for _, alg := range algorithms {
		for _, k := range entries {
			t.Run(alg.name+"/"+k.String(), func(t *testing.T) {
				h := alg.holder(e.caller(k), "release-"+k.String(), 2, 0, true)
				var leases []*ratelimit.Lease
				for range 3 {
					l, err := h.Acquire(context.Background(), 1)
					require.NoError(t, err)
					leases = append(leases, l)
				}
				require.False(t, leases[2].Acquired())
				for _, l := range leases {
					assert.Equal(t, !alg.releases || !l.Acquired(), l.ReleaseOptional(), "%v", l)
				}
				before := e.calls.count("", "Release")
				for range 2 {
					for _, l := range leases {
						require.NoError(t, l.Release(context.Background()))
					}
				}
				want := 0
				if alg.releases {
					want = 2 // the two acquired leases, once each
				}
				assert.Equal(t, want, e.calls.count("", "Release")-before)
				st, err := h.Statistics(context.Background())
				require.NoError(t, err)
				assert.Zero(t, st.ActiveLeases)
				if alg.releases {
					assert.EqualValues(t, 2, st.AvailablePermits, "the permits came back")
				}
			})
		}
	}
}

func TestAbandonedTimeBasedLeasesLeaveNothingInTheGrain(t *testing.T) {
	e := newEnv(t)
	for _, alg := range algorithms[1:] {
		t.Run(alg.name, func(t *testing.T) {
			h := alg.holder(e.silo.Caller(), "abandoned", 1000, 0, true)
			for range 1000 {
				l, err := h.Acquire(context.Background(), 1)
				require.NoError(t, err)
				require.True(t, l.Acquired())
			}
			st, err := h.Statistics(context.Background())
			require.NoError(t, err)
			assert.Zero(t, st.ActiveLeases, "nothing kept per lease")
			assert.Zero(t, st.WaitingCalls)
		})
	}
}

func TestAReleaseFromAnOlderClientIsHarmlessOnTimeBasedGrains(t *testing.T) {
	e := newEnv(t)
	h := ratelimit.FixedWindow(e.silo.Caller(), "legacy", fixedOptions(2, 0))
	l, err := h.Acquire(context.Background(), 1)
	require.NoError(t, err)
	ref := pb.NewFixedWindowLimiterRef(e.silo.Caller(), "legacy")
	reply, err := ref.Release(context.Background(), &pb.ReleaseRequest{LeaseId: l.ID()})
	require.NoError(t, err)
	assert.False(t, reply.Released)
	st, err := h.Statistics(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.AvailablePermits, "time-based quota is never refunded")
}

func TestOneRequestKeyPerHolder(t *testing.T) {
	e := newEnv(t)
	for i, alg := range algorithms {
		h := alg.holder(e.silo.Caller(), fmt.Sprint("id-", i), 1, 0, false)
		assert.Equal(t, fmt.Sprint("id-", i), h.GrainID().Key)
	}
	assert.NotEqual(t, ratelimit.Concurrency(e.silo.Caller(), "k").GrainID(), ratelimit.FixedWindow(e.silo.Caller(), "k").GrainID(),
		"the same key under two algorithms is two limiters")
}
