package ratelimitapi_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi"
	apiv1 "github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1"
)

func TestJSONAcquireUntilRejectedWithRetryAfter(t *testing.T) {
	fake := clock.NewFake(epoch)
	e := newEnv(t, envConfig{fake: fake, configs: mustConfigs(t,
		ratelimit.Named("login", ratelimit.FixedWindowOptions{PermitLimit: 2, Window: 10 * time.Second}),
	)})
	body := `{"algorithm":"ALGORITHM_FIXED_WINDOW","key":"user:42","config":"login"}`
	for range 2 {
		got := e.ok("Acquire", body)
		assert.Equal(t, true, got["acquired"])
		assert.Equal(t, true, got["releaseOptional"], "a time-based lease needs no release")
	}
	fake.Advance(2500 * time.Millisecond)
	r := e.call("Acquire", body)
	require.Equal(t, http.StatusOK, r.status, "a rejection is an answer: %s", r.raw)
	assert.Nil(t, r.body["acquired"], "false is left out of proto3 JSON")
	assert.Equal(t, ratelimit.ReasonRateLimitExceeded, r.body["reason"])
	assert.Equal(t, "7.500s", r.body["retryAfter"])
	assert.Equal(t, "8", r.header.Get("Retry-After"), "whole seconds, rounded up")
	assert.Equal(t, map[string]any{ratelimit.MetadataRetryAfter: "7.5s"}, r.body["metadata"])
}

func TestGRPCAcquireUntilRejected(t *testing.T) {
	fake := clock.NewFake(epoch)
	var mu sync.Mutex
	protocols := map[string]bool{}
	record := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			mu.Lock()
			protocols[req.Peer().Protocol] = true
			mu.Unlock()
			return next(ctx, req)
		}
	})
	e := newEnv(t, envConfig{fake: fake, handlers: []ratelimitapi.Option{ratelimitapi.WithHandlerOptions(connect.WithInterceptors(record))}})
	c := e.grpc()
	ctx := context.Background()
	req := &apiv1.AcquireRequest{Key: "grpc", Options: &apiv1.Options{Algorithm: &apiv1.Options_TokenBucket{TokenBucket: &apiv1.TokenBucketOptions{
		TokenLimit: 3, TokensPerPeriod: 1, ReplenishmentPeriod: durationFor(4 * time.Second),
	}}}}
	for range 3 {
		resp, err := c.Acquire(ctx, connect.NewRequest(req))
		require.NoError(t, err)
		require.True(t, resp.Msg.Acquired)
		assert.Empty(t, resp.Header().Get("Retry-After"))
	}
	resp, err := c.Acquire(ctx, connect.NewRequest(req))
	require.NoError(t, err)
	assert.False(t, resp.Msg.Acquired)
	assert.Equal(t, 4*time.Second, resp.Msg.RetryAfter.AsDuration(), "one period for one token")
	assert.Equal(t, "4", resp.Header().Get("Retry-After"), "as gRPC response metadata")
	assert.Equal(t, map[string]bool{connect.ProtocolGRPC: true}, protocols, "spoken as gRPC over HTTP/2")
}

func TestConnectProtocolOverHTTP1(t *testing.T) {
	e := newEnv(t, envConfig{})
	c := apiClient(e.http1, e.url)
	resp, err := c.Statistics(context.Background(), connect.NewRequest(&apiv1.StatisticsRequest{Algorithm: apiv1.Algorithm_ALGORITHM_CONCURRENCY, Key: "h1"}))
	require.NoError(t, err)
	assert.EqualValues(t, ratelimit.DefaultPermitLimit, resp.Msg.AvailablePermits, "the silo's defaults")
}

func TestEveryCallOverJSON(t *testing.T) {
	fake := clock.NewFake(epoch)
	e := newEnv(t, envConfig{fake: fake})
	pool := `"algorithm":"ALGORITHM_CONCURRENCY","key":"pool"`

	e.ok("Configure", `{`+pool+`,"options":{"concurrency":{"permitLimit":2,"queueLimit":1,"queueOrder":"QUEUE_ORDER_NEWEST_FIRST"}}}`)
	assert.Equal(t, map[string]any{"options": map[string]any{"concurrency": map[string]any{
		"permitLimit": "2", "queueLimit": "1", "queueOrder": "QUEUE_ORDER_NEWEST_FIRST",
	}}}, e.ok("GetConfiguration", `{`+pool+`}`))

	lease := e.ok("Acquire", `{`+pool+`,"permits":2}`)
	require.Equal(t, true, lease["acquired"])
	assert.Nil(t, lease["releaseOptional"], "a concurrency lease must be released")
	id, _ := lease["leaseId"].(string)
	require.NotEmpty(t, id, "64-bit integers are JSON strings")
	assert.Equal(t, map[string]any{"totalSuccessfulLeases": "1", "activeLeases": "1"}, e.ok("Statistics", `{`+pool+`}`))

	assert.Equal(t, map[string]any{"released": true}, e.ok("Release", `{`+pool+`,"leaseId":"`+id+`"}`))
	assert.Equal(t, map[string]any{}, e.ok("Release", `{`+pool+`,"leaseId":"`+id+`"}`), "released once")
	assert.Equal(t, "2", e.ok("Statistics", `{`+pool+`}`)["availablePermits"])

	e.ok("Acquire", `{`+pool+`}`)
	e.ok("Reset", `{`+pool+`}`)
	assert.Equal(t, map[string]any{"availablePermits": "2"}, e.ok("Statistics", `{`+pool+`}`), "full quota, counters afresh")

	e.ok("DeleteState", `{`+pool+`}`)
	assert.Equal(t, map[string]any{"options": map[string]any{"concurrency": map[string]any{"permitLimit": "10"}}},
		e.ok("GetConfiguration", `{`+pool+`}`), "back to the silo's defaults")

	manual := `"algorithm":"ALGORITHM_FIXED_WINDOW","key":"manual"`
	e.ok("Configure", `{`+manual+`,"options":{"fixedWindow":{"permitLimit":1,"window":"3600s","manualReplenishment":true}}}`)
	e.ok("Acquire", `{`+manual+`}`)
	assert.Nil(t, e.ok("Acquire", `{`+manual+`}`)["acquired"])
	fake.Advance(time.Hour) // a manual replenishment still waits out the window
	assert.Equal(t, map[string]any{"replenished": true}, e.ok("TryReplenish", `{`+manual+`}`))
	assert.Equal(t, true, e.ok("Acquire", `{`+manual+`}`)["acquired"], "the replenishment gave the permit back")
	assert.Equal(t, map[string]any{}, e.ok("Release", `{`+manual+`,"leaseId":"1"}`), "time-based limiters keep nothing to release")

	sliding := `"key":"slide"`
	e.ok("Configure", `{`+sliding+`,"options":{"slidingWindow":{"permitLimit":4,"window":"60s","segmentsPerWindow":6}}}`)
	assert.Equal(t, map[string]any{"options": map[string]any{"slidingWindow": map[string]any{
		"permitLimit": "4", "window": "60s", "segmentsPerWindow": "6",
	}}}, e.ok("GetConfiguration", `{"algorithm":"ALGORITHM_SLIDING_WINDOW",`+sliding+`}`), "the options said the algorithm")
}

func TestBadRequestsGetConnectCodes(t *testing.T) {
	configs := mustConfigs(t,
		ratelimit.Named("both", ratelimit.FixedWindowOptions{PermitLimit: 1, Window: time.Second}),
		ratelimit.Named("both", ratelimit.TokenBucketOptions{TokenLimit: 1, TokensPerPeriod: 1, ReplenishmentPeriod: time.Second}),
		ratelimit.Named("small", ratelimit.ConcurrencyOptions{PermitLimit: 2}),
	)
	e := newEnv(t, envConfig{configs: configs, options: ratelimitapi.Options{MaxKeyBytes: 8}})
	for _, tc := range []struct {
		name, method, body string
		status             int
		code               string
	}{
		{"no key", "Acquire", `{"algorithm":"ALGORITHM_CONCURRENCY"}`, 400, "invalid_argument"},
		{"key too long", "Statistics", `{"algorithm":"ALGORITHM_CONCURRENCY","key":"123456789"}`, 400, "invalid_argument"},
		{"no algorithm", "Reset", `{"key":"k"}`, 400, "invalid_argument"},
		{"unknown algorithm number", "Statistics", `{"algorithm":9,"key":"k"}`, 400, "invalid_argument"},
		{"unknown field", "Statistics", `{"key":"k","bogus":1}`, 400, "invalid_argument"},
		{"not JSON", "Acquire", `{"key":`, 400, "invalid_argument"},
		{"unknown configuration", "Acquire", `{"key":"k","config":"nope"}`, 404, "not_found"},
		{"configuration of another algorithm", "Acquire", `{"algorithm":"ALGORITHM_CONCURRENCY","key":"k","config":"both"}`, 404, "not_found"},
		{"ambiguous configuration", "Acquire", `{"key":"k","config":"both"}`, 400, "invalid_argument"},
		{"config and options", "Configure", `{"key":"k","config":"small","options":{"concurrency":{"permitLimit":1}}}`, 400, "invalid_argument"},
		{"options of another algorithm", "Acquire", `{"algorithm":"ALGORITHM_FIXED_WINDOW","key":"k","options":{"concurrency":{"permitLimit":1}}}`, 400, "invalid_argument"},
		{"empty options", "Configure", `{"key":"k","options":{}}`, 400, "invalid_argument"},
		{"invalid options", "Configure", `{"key":"k","options":{"fixedWindow":{"permitLimit":-1,"window":"0.0001s"}}}`, 400, "invalid_argument"},
		{"no window", "Configure", `{"key":"k","options":{"fixedWindow":{"permitLimit":1}}}`, 400, "invalid_argument"},
		{"unknown queue order", "Configure", `{"key":"k","options":{"concurrency":{"permitLimit":1,"queueOrder":7}}}`, 400, "invalid_argument"},
		{"Configure without options", "Configure", `{"algorithm":"ALGORITHM_CONCURRENCY","key":"k"}`, 400, "invalid_argument"},
		{"negative permits", "Acquire", `{"algorithm":"ALGORITHM_CONCURRENCY","key":"k","permits":-1}`, 400, "invalid_argument"},
		{"more permits than the limit", "Acquire", `{"key":"k","config":"small","permits":3}`, 400, "invalid_argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.call(tc.method, tc.body)
			assert.Equal(t, tc.status, r.status, r.raw)
			assert.Equal(t, tc.code, r.body["code"], r.raw)
		})
	}
}

func TestDisableChangesRefusesChangesOnly(t *testing.T) {
	configs := mustConfigs(t, ratelimit.Named("small", ratelimit.ConcurrencyOptions{PermitLimit: 2}))
	e := newEnv(t, envConfig{configs: configs, options: ratelimitapi.Options{DisableChanges: true}})
	key := `"algorithm":"ALGORITHM_CONCURRENCY","key":"k"`
	for method, body := range map[string]string{
		"Configure":    `{` + key + `,"config":"small"}`,
		"Reset":        `{` + key + `}`,
		"DeleteState":  `{` + key + `}`,
		"TryReplenish": `{` + key + `}`,
		"Acquire":      `{` + key + `,"options":{"concurrency":{"permitLimit":5}}}`,
	} {
		r := e.call(method, body)
		assert.Equal(t, http.StatusForbidden, r.status, "%s: %s", method, r.raw)
		assert.Equal(t, "permission_denied", r.body["code"], method)
	}
	assert.Equal(t, true, e.ok("Acquire", `{`+key+`,"config":"small"}`)["acquired"], "named configurations still apply")
	assert.Equal(t, "1", e.ok("Statistics", `{`+key+`}`)["availablePermits"])
}

func TestNewHandlerValidatesOptions(t *testing.T) {
	_, _, err := ratelimitapi.NewHandler(nil, nil, ratelimitapi.Options{MaxKeyBytes: -1, MaxRequestBytes: -1})
	require.ErrorIs(t, err, ratelimitapi.ErrInvalidOptions)
	assert.Contains(t, err.Error(), "MaxKeyBytes")
	assert.Contains(t, err.Error(), "MaxRequestBytes", "every bad field")
	_, _, err = ratelimitapi.NewHandler(nil, nil, ratelimitapi.Options{})
	assert.ErrorIs(t, err, ratelimitapi.ErrInvalidOptions, "no caller")
}

func TestEveryCallOverGRPC(t *testing.T) {
	e := newEnv(t, envConfig{configs: mustConfigs(t, ratelimit.Named("pool", ratelimit.ConcurrencyOptions{PermitLimit: 3}))})
	c := e.grpc()
	ctx := context.Background()
	pool, manual := apiv1.Algorithm_ALGORITHM_CONCURRENCY, apiv1.Algorithm_ALGORITHM_TOKEN_BUCKET

	_, err := c.Configure(ctx, connect.NewRequest(&apiv1.ConfigureRequest{Algorithm: pool, Key: "g", Config: "pool"}))
	require.NoError(t, err)
	conf, err := c.GetConfiguration(ctx, connect.NewRequest(&apiv1.GetConfigurationRequest{Algorithm: pool, Key: "g"}))
	require.NoError(t, err)
	assert.EqualValues(t, 3, conf.Msg.GetOptions().GetConcurrency().GetPermitLimit())

	lease, err := c.Acquire(ctx, connect.NewRequest(&apiv1.AcquireRequest{Algorithm: pool, Key: "g"}))
	require.NoError(t, err)
	require.True(t, lease.Msg.Acquired)
	st, err := c.Statistics(ctx, connect.NewRequest(&apiv1.StatisticsRequest{Algorithm: pool, Key: "g"}))
	require.NoError(t, err)
	assert.EqualValues(t, 2, st.Msg.AvailablePermits)
	released, err := c.Release(ctx, connect.NewRequest(&apiv1.ReleaseRequest{Algorithm: pool, Key: "g", LeaseId: lease.Msg.LeaseId}))
	require.NoError(t, err)
	assert.True(t, released.Msg.Released)

	_, err = c.Reset(ctx, connect.NewRequest(&apiv1.ResetRequest{Algorithm: pool, Key: "g"}))
	require.NoError(t, err)
	_, err = c.DeleteState(ctx, connect.NewRequest(&apiv1.DeleteStateRequest{Algorithm: pool, Key: "g"}))
	require.NoError(t, err)
	conf, err = c.GetConfiguration(ctx, connect.NewRequest(&apiv1.GetConfigurationRequest{Algorithm: pool, Key: "g"}))
	require.NoError(t, err)
	assert.EqualValues(t, ratelimit.DefaultPermitLimit, conf.Msg.GetOptions().GetConcurrency().GetPermitLimit(), "deleted: the defaults")

	replenished, err := c.TryReplenish(ctx, connect.NewRequest(&apiv1.TryReplenishRequest{Algorithm: manual, Key: "g"}))
	require.NoError(t, err)
	assert.False(t, replenished.Msg.Replenished, "the default token bucket replenishes by itself")

	_, err = c.Acquire(ctx, connect.NewRequest(&apiv1.AcquireRequest{Key: "g", Config: "missing"}))
	assert.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "errors carry their codes over gRPC too")
}

// testRightsKey carries a test caller's rights in its request's context.
type testRightsKey struct{}

// With WithChangeRights, a change needs the admin right of its caller:
// one without is refused with permission_denied naming the right, the
// refusal is counted and changes nothing; one with it changes the
// limiter. Acquisitions under the limiter's options need no right.
func TestChangesNeedTheCallersAdminRight(t *testing.T) {
	var refusals atomic.Int64
	// Stands for the binary's middleware: the rights a request's
	// credential grants, from a header.
	fromHeader := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			r, err := actor.ParseRights(req.Header().Get("X-Test-Rights"))
			if err != nil {
				return nil, err
			}
			return next(context.WithValue(ctx, testRightsKey{}, r), req)
		}
	})
	e := newEnv(t, envConfig{handlers: []ratelimitapi.Option{
		ratelimitapi.WithHandlerOptions(connect.WithInterceptors(fromHeader)),
		ratelimitapi.WithChangeRights(func(ctx context.Context) actor.Rights { r, _ := ctx.Value(testRightsKey{}).(actor.Rights); return r }),
		ratelimitapi.WithRefusals(func(reason string) {
			assert.Equal(t, ratelimitapi.RefusedNoAdminRight, reason)
			refusals.Add(1)
		}),
	}})
	key := `"algorithm":"ALGORITHM_CONCURRENCY","key":"k"`
	changes := map[string]string{
		"Configure":    `{` + key + `,"options":{"concurrency":{"permitLimit":5}}}`,
		"Reset":        `{` + key + `}`,
		"DeleteState":  `{` + key + `}`,
		"TryReplenish": `{"algorithm":"ALGORITHM_TOKEN_BUCKET","key":"k"}`,
		"Acquire":      `{` + key + `,"options":{"concurrency":{"permitLimit":5}}}`,
	}
	for method, body := range changes {
		r, err := e.post(context.Background(), method, body)
		require.NoError(t, err)
		assert.Equal(t, http.StatusForbidden, r.status, "%s: %s", method, r.raw)
		assert.Equal(t, "permission_denied", r.body["code"], method)
		assert.Contains(t, r.body["message"], "admin right", method)
	}
	assert.EqualValues(t, len(changes), refusals.Load())
	before := e.ok("GetConfiguration", `{`+key+`}`)
	assert.Equal(t, true, e.ok("Acquire", `{`+key+`}`)["acquired"], "acquiring under the limiter's options needs no right")

	r, err := e.post(context.Background(), "Configure", changes["Configure"], "X-Test-Rights", "admin")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, r.status, r.raw)
	after := e.ok("GetConfiguration", `{`+key+`}`)
	assert.NotEqual(t, before, after, "the admin's change took")
	assert.EqualValues(t, len(changes), refusals.Load(), "the admin was not refused")
}
