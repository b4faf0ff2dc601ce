package ratelimitapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grains/ratelimit"
	apiv1 "github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1"
)

func TestJSONTryAcquireAnswersAtOnceWhereAcquireWouldQueue(t *testing.T) {
	e := newEnv(t, envConfig{configs: mustConfigs(t,
		ratelimit.Named("pool", ratelimit.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 5}),
	)})
	body := `{"algorithm":"ALGORITHM_CONCURRENCY","key":"jobs","config":"pool"}`
	got := e.ok("TryAcquire", body)
	assert.Equal(t, true, got["acquired"])
	assert.NotEmpty(t, got["leaseId"], "a concurrency lease to release")

	r := e.call("TryAcquire", body)
	require.Equal(t, http.StatusOK, r.status, "a rejection is an answer: %s", r.raw)
	assert.Nil(t, r.body["acquired"])
	assert.Equal(t, ratelimit.ReasonRateLimitExceeded, r.body["reason"], "an attempt's concurrency rejection names no queue")
	assert.Equal(t, "1", r.header.Get("Retry-After"), "no hint: the shortest wait a header can say")

	st := e.ok("Statistics", `{"algorithm":"ALGORITHM_CONCURRENCY","key":"jobs"}`)
	assert.Nil(t, st["queuedPermits"], "nothing queued although the queue has room")
	assert.Equal(t, "1", st["totalFailedLeases"])
}

func TestGRPCTryAcquireCarriesTheAttemptsRetryAfter(t *testing.T) {
	fake := clock.NewFake(epoch)
	e := newEnv(t, envConfig{fake: fake})
	c := e.grpc()
	ctx := context.Background()
	zero := int64(0)
	req := &apiv1.AcquireRequest{Key: "window", Options: &apiv1.Options{Algorithm: &apiv1.Options_FixedWindow{FixedWindow: &apiv1.FixedWindowOptions{
		PermitLimit: 1, QueueLimit: 3, Window: durationFor(10 * time.Second),
	}}}}
	resp, err := c.TryAcquire(ctx, connect.NewRequest(req))
	require.NoError(t, err)
	require.True(t, resp.Msg.Acquired)

	fake.Advance(2500 * time.Millisecond)
	req.Permits = &zero
	resp, err = c.TryAcquire(ctx, connect.NewRequest(req))
	require.NoError(t, err)
	assert.False(t, resp.Msg.Acquired, "a zero-permit attempt fails with nothing free")
	assert.Equal(t, 7500*time.Millisecond, resp.Msg.RetryAfter.AsDuration(), "the rest of the window")
	assert.Equal(t, "8", resp.Header().Get("Retry-After"))
}

func TestJSONAcquireManyGivesBackWhatOthersGrantedWhenOneRefuses(t *testing.T) {
	e := newEnv(t, envConfig{configs: mustConfigs(t,
		ratelimit.Named("pool", ratelimit.ConcurrencyOptions{PermitLimit: 2}),
		ratelimit.Named("hourly", ratelimit.FixedWindowOptions{PermitLimit: 3, Window: time.Hour}),
		ratelimit.Named("strict", ratelimit.TokenBucketOptions{TokenLimit: 1, TokensPerPeriod: 1, ReplenishmentPeriod: time.Hour}),
	)})
	strict := `{"key":"k","config":"strict"}`
	e.ok("Acquire", strict) // the bucket's only token
	body := `{"acquisitions":[{"key":"k","config":"pool"},{"key":"k","config":"hourly"},` + strict + `]}`
	r := e.call("AcquireMany", body)
	require.Equal(t, http.StatusOK, r.status, "%s", r.raw)
	assert.Nil(t, r.body["acquired"])
	leases := r.body["leases"].([]any)
	require.Len(t, leases, 3)
	assert.Equal(t, true, leases[0].(map[string]any)["acquired"])
	assert.Equal(t, true, leases[1].(map[string]any)["acquired"])
	assert.Nil(t, leases[2].(map[string]any)["acquired"])
	assert.Equal(t, []any{float64(0), float64(1)}, r.body["givenBack"])
	assert.Equal(t, "3600", r.header.Get("Retry-After"), "the refusing limit's hint")
	for alg, full := range map[string]string{"ALGORITHM_CONCURRENCY": "2", "ALGORITHM_FIXED_WINDOW": "3"} {
		st := e.ok("Statistics", `{"algorithm":"`+alg+`","key":"k"}`)
		assert.Equal(t, full, st["availablePermits"], "%s has its permits back", alg)
	}

	got := e.ok("AcquireMany", `{"attempt":true,"acquisitions":[{"key":"k","config":"pool"},{"key":"k","config":"hourly"}]}`)
	assert.Equal(t, true, got["acquired"])
	assert.Nil(t, got["givenBack"])

	bad := e.call("AcquireMany", `{"acquisitions":[]}`)
	assert.Equal(t, http.StatusBadRequest, bad.status)
}

func TestJSONRenewKeepsARemoteCallersLeaseAlive(t *testing.T) {
	fake := clock.NewFake(epoch)
	e := newEnv(t, envConfig{fake: fake})
	got := e.ok("Acquire", `{"algorithm":"ALGORITHM_CONCURRENCY","key":"remote"}`)
	require.Equal(t, true, got["acquired"])
	assert.Equal(t, "30s", got["leaseTtl"], "the default time to live")
	id := got["leaseId"].(string)
	renew := `{"algorithm":"ALGORITHM_CONCURRENCY","key":"remote","leaseIds":["` + id + `"]}`
	for range 4 {
		fake.Advance(20 * time.Second)
		assert.Nil(t, e.ok("Renew", renew)["unknown"], "renewed in time")
	}
	st := e.ok("Statistics", `{"algorithm":"ALGORITHM_CONCURRENCY","key":"remote"}`)
	assert.Equal(t, "1", st["activeLeases"], "80 s later, the renewed lease is held")
	// A second at a time, with a call between: a timer the grain arms in
	// a turn that a timer's callback posted must be armed before the
	// clock moves on, or it is armed from a later time than the grain
	// read, and fires late.
	for range 29 {
		fake.Advance(time.Second)
		st = e.ok("Statistics", `{"algorithm":"ALGORITHM_CONCURRENCY","key":"remote"}`)
	}
	assert.Equal(t, "1", st["activeLeases"], "held until its time to live after the last renewal")
	fake.Advance(time.Second)
	st = e.ok("Statistics", `{"algorithm":"ALGORITHM_CONCURRENCY","key":"remote"}`)
	assert.Nil(t, st["activeLeases"], "without renewals it expires at its time to live")
	assert.Equal(t, []any{id}, e.ok("Renew", renew)["unknown"])
}
