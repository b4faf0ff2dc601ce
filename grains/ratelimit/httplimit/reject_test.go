package httplimit_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/httplimit"
)

type body struct {
	Status     int    `json:"status"`
	Error      string `json:"error"`
	Reason     string `json:"reason"`
	RetryAfter int64  `json:"retry_after"`
}

func TestRejectionAnswers429WithRetryAfterRateLimitHeadersAndBody(t *testing.T) {
	fake := clock.NewFake(epoch)
	s := startSilo(t, fake)
	configs := mustConfigs(t, ratelimit.Named("login", ratelimit.FixedWindowOptions{PermitLimit: 2, Window: 10 * time.Second}))
	h := mustMiddleware(t, s.Caller(), configs, httplimit.Options{Rules: []httplimit.Rule{httplimit.ByIP("login")}}).Handler(ok)

	require.Equal(t, http.StatusNoContent, serve(h, "192.0.2.1:1").Code)
	require.Equal(t, http.StatusNoContent, serve(h, "192.0.2.1:1").Code)
	fake.Advance(2500 * time.Millisecond) // 7.5 s of the window left
	w := serve(h, "192.0.2.1:1")

	require.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "8", w.Header().Get("Retry-After"), "7.5 s, rounded up")
	assert.Equal(t, `"login";q=2;w=10`, w.Header().Get("RateLimit-Policy"))
	assert.Equal(t, `"login";r=0;t=8`, w.Header().Get("RateLimit"))
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	var got body
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	assert.Equal(t, body{Status: 429, Error: "Too Many Requests", Reason: ratelimit.ReasonRateLimitExceeded, RetryAfter: 8}, got)
	assert.JSONEq(t, `{"status":429,"error":"Too Many Requests","reason":"Rate limit exceeded","retry_after":8}`, w.Body.String(),
		"exactly these fields")
}

func TestRetryAfterWithoutAHintIsOneSecond(t *testing.T) {
	s := startSilo(t, nil)
	configs := mustConfigs(t, ratelimit.Named("pool", ratelimit.ConcurrencyOptions{PermitLimit: 1}))
	m := mustMiddleware(t, s.Caller(), configs, httplimit.Options{Rules: []httplimit.Rule{httplimit.ByIP("pool")}})
	inside := make(chan struct{})
	leave := make(chan struct{})
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(inside)
		<-leave
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		serve(h, "192.0.2.1:1")
	}()
	<-inside
	w := serve(h, "192.0.2.1:1")
	close(leave)
	<-done

	require.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	assert.Equal(t, `"pool";q=1`, w.Header().Get("RateLimit-Policy"), "a concurrency limit has no window")
	assert.Equal(t, `"pool";r=0;t=1`, w.Header().Get("RateLimit"))
}

func TestTokenBucketPolicyWindowIsTheTimeToFill(t *testing.T) {
	s := startSilo(t, nil)
	configs := mustConfigs(t, ratelimit.Named("bucket", ratelimit.TokenBucketOptions{
		TokenLimit: 1, TokensPerPeriod: 1, ReplenishmentPeriod: never, ManualReplenishment: true,
	}), ratelimit.Named("wide", ratelimit.SlidingWindowOptions{PermitLimit: 5, Window: time.Minute, SegmentsPerWindow: 6}))
	h := mustMiddleware(t, s.Caller(), configs, httplimit.Options{Rules: []httplimit.Rule{
		httplimit.ByIP("wide"), httplimit.ByIP("bucket"),
	}}).Handler(ok)
	require.Equal(t, http.StatusNoContent, serve(h, "192.0.2.1:1").Code)
	w := serve(h, "192.0.2.1:1")
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	assert.Equal(t, `"bucket";q=1;w=3600000`, w.Header().Get("RateLimit-Policy"), "the headers name the rule that rejected")
}

func TestUnreachableLimiterAnswers503UnlessFailOpen(t *testing.T) {
	configs := mustConfigs(t, oncePerKey)
	closed := mustMiddleware(t, failingCaller{}, configs, httplimit.Options{Rules: []httplimit.Rule{httplimit.ByIP("once")}})
	w := serve(closed.Handler(ok), "192.0.2.1:1")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	var got body
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	assert.Equal(t, body{Status: 503, Error: "Service Unavailable", Reason: "Rate limiter unavailable", RetryAfter: 1}, got)

	open := mustMiddleware(t, failingCaller{}, configs, httplimit.Options{Rules: []httplimit.Rule{httplimit.ByIP("once")}, FailOpen: true})
	assert.Equal(t, http.StatusNoContent, serve(open.Handler(ok), "192.0.2.1:1").Code)
}
