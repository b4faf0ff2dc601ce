package ratelimitapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
	apiv1 "github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1"
)

// takeThePool configures the concurrency limiter of key with one permit
// and a queue of one, takes the permit and returns the holder.
func takeThePool(t *testing.T, e *env, key string) *ratelimit.Holder[ratelimit.ConcurrencyOptions] {
	t.Helper()
	pool := ratelimit.Concurrency(e.silo.Caller(), key, ratelimit.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
	held, err := pool.Acquire(context.Background(), 1)
	require.NoError(t, err)
	require.True(t, held.Acquired())
	t.Cleanup(func() { _ = held.Release(context.Background()) })
	return pool
}

func waiting(t *testing.T, l ratelimit.Limiter) int64 {
	t.Helper()
	st, err := l.Statistics(context.Background())
	require.NoError(t, err)
	return st.WaitingCalls
}

func TestClientThatGoesAwayCancelsItsQueuedAcquisition(t *testing.T) {
	for _, via := range []string{"json", "grpc"} {
		t.Run(via, func(t *testing.T) {
			e := newEnv(t, envConfig{})
			pool := takeThePool(t, e, "cancel-"+via)
			ctx, hangUp := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				if via == "json" {
					_, err := e.post(ctx, "Acquire", `{"algorithm":"ALGORITHM_CONCURRENCY","key":"cancel-json"}`)
					done <- err
					return
				}
				_, err := e.grpc().Acquire(ctx, connect.NewRequest(&apiv1.AcquireRequest{Algorithm: apiv1.Algorithm_ALGORITHM_CONCURRENCY, Key: "cancel-grpc"}))
				done <- err
			}()
			require.Eventually(t, func() bool { return waiting(t, pool) == 1 }, 10*time.Second, time.Millisecond, "the acquisition waits in the queue")
			hangUp()
			assert.ErrorIs(t, <-done, context.Canceled)
			require.Eventually(t, func() bool { return waiting(t, pool) == 0 }, 10*time.Second, time.Millisecond,
				"the grain dropped the wait as the client left")
			require.Eventually(t, func() bool {
				st, _ := ratelimit.SiloStats(e.silo)
				return st.Cancelled == 1
			}, 10*time.Second, time.Millisecond, "counted as cancelled, not expired")
		})
	}
}

func TestCallDeadlineBoundsTheQueuedWait(t *testing.T) {
	e := newEnv(t, envConfig{})
	pool := takeThePool(t, e, "deadline")
	r, err := e.post(context.Background(), "Acquire", `{"algorithm":"ALGORITHM_CONCURRENCY","key":"deadline"}`, "Connect-Timeout-Ms", "100")
	require.NoError(t, err)
	// The wait ends with the call's time: as the client's deadline, or as
	// the grain's budget, derived from it, whichever the server sees first.
	if r.status == http.StatusOK {
		assert.Equal(t, ratelimit.ReasonLeaseNotAcquired, r.body["reason"], r.raw)
	} else {
		assert.Equal(t, "deadline_exceeded", r.body["code"], r.raw)
	}
	require.Eventually(t, func() bool { return waiting(t, pool) == 0 }, 10*time.Second, time.Millisecond, "nothing is left waiting")
}
