package ratelimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/proxy"
	"github.com/granary-go/granary/silo"
	"github.com/granary-go/granary/testcluster"
)

// limitHolds runs 16 goroutines against one key, each entering through
// callers[i % len(callers)], and checks that they never get more than the
// limit allows: exactly the limit for a time-based limiter that never
// replenishes, and never more permits held at once than a concurrency
// limiter's limit. Entering through different silos of a cluster, it is
// the cluster-wide check.
func limitHolds(t *testing.T, alg algorithm, key string, callers []proxy.Caller) {
	const workers, attempts, limit = 16, 8, 20
	var granted, holding, maxHolding atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := alg.holder(callers[w%len(callers)], key, limit, 0, true)
			for range attempts {
				l, err := h.Acquire(context.Background(), 1)
				if !assert.NoError(t, err) {
					return
				}
				if !l.Acquired() {
					continue
				}
				granted.Add(1)
				n := holding.Add(1)
				for m := maxHolding.Load(); n > m && !maxHolding.CompareAndSwap(m, n); m = maxHolding.Load() {
				}
				holding.Add(-1)
				assert.NoError(t, l.Release(context.Background()))
			}
		}()
	}
	wg.Wait()
	if alg.releases {
		assert.LessOrEqual(t, maxHolding.Load(), int64(limit), "never more permits held than the limit")
		assert.GreaterOrEqual(t, granted.Load(), int64(limit))
		return
	}
	assert.EqualValues(t, limit, granted.Load(), "exactly the limit, however the calls interleave")
}

func TestEachAlgorithmsLimitHoldsAcrossEntryPoints(t *testing.T) {
	e := newEnv(t)
	callers := []proxy.Caller{e.silo.Caller(), e.client(), e.client(), e.client()}
	for _, alg := range algorithms {
		t.Run(alg.name, func(t *testing.T) {
			limitHolds(t, alg, "shared-"+alg.name, callers)
			st, err := alg.holder(e.silo.Caller(), "shared-"+alg.name, 0, 0, false).Statistics(context.Background())
			require.NoError(t, err)
			assert.EqualValues(t, 16*8, st.TotalSuccessfulLeases+st.TotalFailedLeases, "every attempt was counted once")
		})
	}
}

// The same on a cluster of three silos: sixteen goroutines entering
// through the three gateways and the silos' own callers share one limiter
// per key, wherever it lives. The clients hold the admin right: whichever
// holder comes first sets the limiter's options.
func TestEachAlgorithmsLimitHoldsAcrossACluster(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Silos: 3,
		Configure: func(_ int, o *silo.Options) {
			o.Security.ClientTokens = []silo.ClientToken{{Name: fixtureToken.Name, Secret: fixtureToken.Secret, Rights: actor.RightAdmin}}
		},
		Register: func(s *silo.Silo) error { return ratelimit.Register(s, ratelimit.Defaults{}) }})
	var callers []proxy.Caller
	for _, gw := range c.Gateways() {
		callers = append(callers, c.NewClient(client.Options{Gateways: []string{gw}, Token: &fixtureToken}))
	}
	for _, i := range c.Live() {
		callers = append(callers, c.Silo(i).Caller())
	}
	for _, alg := range algorithms {
		t.Run(alg.name, func(t *testing.T) {
			key := "cluster-" + alg.name
			limitHolds(t, alg, key, callers)
			h := alg.holder(callers[0], key, 0, 0, false)
			st, err := h.Statistics(context.Background())
			require.NoError(t, err)
			assert.EqualValues(t, 16*8, st.TotalSuccessfulLeases+st.TotalFailedLeases, "one limiter counted every attempt")
			assert.Equal(t, 1, c.Activations(h.GrainID()), "one limiter cluster-wide")
		})
	}
}
