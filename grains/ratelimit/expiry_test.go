package ratelimit_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
)

// A client holding concurrency permits dies without releasing them: its
// leases expire one time to live after their last renewal, and the queue
// is served. While it lives, under load, its leases never expire.
func TestTheLeasesOfAClientThatDiesExpireAndServeTheQueue(t *testing.T) {
	const ttl = 900 * time.Millisecond
	e := newEnv(t)
	o := ratelimit.ConcurrencyOptions{PermitLimit: 2, QueueLimit: 4, LeaseTTL: ttl}
	doomed := e.client()
	holder := ratelimit.Concurrency(doomed, "expiring", o)
	for range 2 {
		l, err := holder.Acquire(context.Background(), 1)
		require.NoError(t, err)
		require.True(t, l.Acquired())
	}

	// Load on the same client and silo meanwhile: another key, 16 workers.
	busy := ratelimit.Concurrency(doomed, "busy", ratelimit.ConcurrencyOptions{PermitLimit: 8, QueueLimit: 64, LeaseTTL: ttl})
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				l, err := busy.Acquire(ctx, 1)
				if err != nil {
					return
				}
				_ = l.Release(context.Background())
			}
		}()
	}
	observer := ratelimit.Concurrency(e.client(), "expiring", o)
	assert.Never(t, func() bool {
		st, err := observer.Statistics(context.Background())
		return err != nil || st.ActiveLeases != 2
	}, 4*ttl, 20*time.Millisecond, "a live holder's leases outlive several times to live")
	stop()
	wg.Wait()

	got := make(chan *ratelimit.Lease, 1)
	go func() {
		l, err := observer.Acquire(context.Background(), 2)
		assert.NoError(t, err)
		got <- l
	}()
	waitForWaiting(t, observer, 1)
	require.NoError(t, doomed.Close()) // the client dies: nothing is released, renewals stop
	killed := time.Now()
	select {
	case l := <-got:
		require.True(t, l.Acquired(), "the waiter got both expired permits")
		t.Logf("permits back %v after the client died (time to live %v, renewal every %v)", time.Since(killed), ttl, ttl/3)
		require.NoError(t, l.Release(context.Background()))
	case <-time.After(ttl + ttl/3 + 5*time.Second): // a generous bound for a loaded machine
		t.Fatal("the dead client's permits did not come back")
	}
}

func TestAReleasedLeaseIsNoLongerRenewed(t *testing.T) {
	e := newEnv(t)
	h := ratelimit.Concurrency(e.client(), "renewed", ratelimit.ConcurrencyOptions{PermitLimit: 1, LeaseTTL: 300 * time.Millisecond})
	l, err := h.Acquire(context.Background(), 1)
	require.NoError(t, err)
	eventually(t, func() bool { return e.calls.count("", "Renew") >= 2 }, "the held lease is renewed")
	require.NoError(t, l.Release(context.Background()))
	n := e.calls.count("", "Renew")
	assert.Never(t, func() bool { return e.calls.count("", "Renew") > n+1 }, time.Second, 50*time.Millisecond,
		"at most a renewal already on its way after the release")
}

// BenchmarkRenewalTraffic holds 1, 10 and 100 concurrency leases through
// one holder for a second with a 300 ms time to live and reports the
// Renew calls the silo received per held lease per second: renewals are
// batched per grain reference, so the figure falls as leases are added.
func BenchmarkRenewalTraffic(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("leases-%d", n), func(b *testing.B) {
			e := newEnv(b)
			h := ratelimit.Concurrency(e.client(), "traffic", ratelimit.ConcurrencyOptions{PermitLimit: 1000, LeaseTTL: 300 * time.Millisecond})
			var leases []*ratelimit.Lease
			for range n {
				l, err := h.Acquire(context.Background(), 1)
				if err != nil || !l.Acquired() {
					b.Fatal(err)
				}
				leases = append(leases, l)
			}
			before := e.calls.count("", "Renew")
			start := time.Now()
			for i := 0; i < b.N; i++ {
				time.Sleep(time.Second / time.Duration(b.N))
			}
			calls := e.calls.count("", "Renew") - before
			elapsed := time.Since(start)
			for _, l := range leases {
				_ = l.Release(context.Background())
			}
			b.ReportMetric(float64(calls)/elapsed.Seconds(), "renew-calls/s")
			b.ReportMetric(float64(calls)/elapsed.Seconds()/float64(n), "renew-calls/lease/s")
		})
	}
}
