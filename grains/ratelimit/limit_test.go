package ratelimit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/proxy"
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
