package httplimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/httplimit"
	"github.com/granary-go/granary/proxy"
)

// everyone keys every request alike.
func everyone(*http.Request) (string, bool) { return "all", true }

var poolKey = httplimit.Key(httplimit.DefaultKeyPrefix, "key", "everyone", "all")

func statistics(t *testing.T, l ratelimit.Limiter) ratelimit.Statistics {
	t.Helper()
	st, err := l.Statistics(context.Background())
	require.NoError(t, err)
	return st
}

func TestDisconnectingClientCancelsItsQueuedAcquisition(t *testing.T) {
	s := startSilo(t, nil)
	configs := mustConfigs(t, ratelimit.Named("pool", ratelimit.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1}))
	m := mustMiddleware(t, s.Caller(), configs, httplimit.Options{Rules: []httplimit.Rule{httplimit.ByKey("everyone", "pool", everyone)}})
	pool := ratelimit.Concurrency(s.Caller(), poolKey)

	inside, leave := make(chan struct{}, 2), make(chan struct{})
	var ran atomic.Int32
	srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		ran.Add(1)
		inside <- struct{}{}
		<-leave
		w.WriteHeader(http.StatusNoContent)
	})))
	defer srv.Close()
	get := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	holder := make(chan error, 1)
	go func() { holder <- get(context.Background()) }()
	<-inside // the first request holds the pool's permit

	ctx, hangUp := context.WithCancel(context.Background())
	queued := make(chan error, 1)
	go func() { queued <- get(ctx) }()
	require.Eventually(t, func() bool { return statistics(t, pool).WaitingCalls == 1 }, 10*time.Second, time.Millisecond,
		"the second request waits in the limiter's queue")

	hangUp()
	assert.ErrorIs(t, <-queued, context.Canceled)
	require.Eventually(t, func() bool { return statistics(t, pool).WaitingCalls == 0 }, 10*time.Second, time.Millisecond,
		"the client went away: its wait is cancelled, not left to run out its budget")
	st, _ := ratelimit.SiloStats(s)
	assert.Equal(t, uint64(1), st.Cancelled)

	close(leave)
	require.NoError(t, <-holder)
	assert.Equal(t, int32(1), ran.Load(), "the cancelled request never reached the handler")
	require.Eventually(t, func() bool { return statistics(t, pool).AvailablePermits == 1 }, 10*time.Second, time.Millisecond,
		"and took no permit")
}

func TestConcurrencyPermitIsHeldForTheHandlerAndReleasedAfterItPanics(t *testing.T) {
	s := startSilo(t, nil)
	configs := mustConfigs(t, ratelimit.Named("pool", ratelimit.ConcurrencyOptions{PermitLimit: 1}))
	m := mustMiddleware(t, s.Caller(), configs, httplimit.Options{Rules: []httplimit.Rule{httplimit.ByKey("everyone", "pool", everyone)}})
	pool := ratelimit.Concurrency(s.Caller(), poolKey)

	var during ratelimit.Statistics
	boom := errors.New("boom")
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		during = statistics(t, pool)
		panic(boom)
	}))
	assert.PanicsWithError(t, boom.Error(), func() { serve(h, "192.0.2.1:1") }, "the panic goes on")
	assert.Zero(t, during.AvailablePermits, "the handler ran holding the permit")
	assert.EqualValues(t, 1, during.ActiveLeases)
	after := statistics(t, pool)
	assert.EqualValues(t, 1, after.AvailablePermits, "released before the panic went on: %v", after)
	assert.Zero(t, after.ActiveLeases)

	w := serve(m.Handler(ok), "192.0.2.1:1")
	assert.Equal(t, http.StatusNoContent, w.Code, "the next request gets the permit")
	assert.EqualValues(t, 1, statistics(t, pool).AvailablePermits, "released after a handler that returns, too")
}

func TestRequestDeadlineBoundsTheQueuedWait(t *testing.T) {
	s := startSilo(t, nil)
	configs := mustConfigs(t, ratelimit.Named("pool", ratelimit.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1}))
	m := mustMiddleware(t, s.Caller(), configs, httplimit.Options{Rules: []httplimit.Rule{httplimit.ByKey("everyone", "pool", everyone)}})
	pool := ratelimit.Concurrency(s.Caller(), poolKey, ratelimit.ConcurrencyOptions{PermitLimit: 1, QueueLimit: 1})
	held, err := pool.Acquire(context.Background(), 1)
	require.NoError(t, err)
	defer held.Release(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	w := httptest.NewRecorder()
	m.Handler(ok).ServeHTTP(w, r)
	// The budget is the time left before the deadline: the grain gives up
	// on the wait as the request's time runs out, and whichever notices
	// first, the request is refused as not acquired.
	assert.Equal(t, http.StatusTooManyRequests, w.Code)
	var got body
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	assert.Equal(t, ratelimit.ReasonLeaseNotAcquired, got.Reason)
	require.Eventually(t, func() bool { return statistics(t, pool).WaitingCalls == 0 }, 10*time.Second, time.Millisecond,
		"the wait ends with the request's time")
}

func TestNewFailsForEveryBadRule(t *testing.T) {
	configs := mustConfigs(t, oncePerKey,
		ratelimit.Named("twice", ratelimit.FixedWindowOptions{PermitLimit: 2, Window: time.Second}),
		ratelimit.Named("twice", ratelimit.ConcurrencyOptions{PermitLimit: 2}),
	)
	_, err := httplimit.New(failingCaller{}, configs, httplimit.Options{Rules: []httplimit.Rule{
		httplimit.ByIP("once"),
		httplimit.ByIP("missing"),
		httplimit.ByUser("twice", header("X-User")),
	}})
	require.Error(t, err)
	assert.ErrorIs(t, err, ratelimit.ErrConfigNotFound, "an unknown configuration fails at construction")
	assert.ErrorIs(t, err, ratelimit.ErrAmbiguousConfig)

	_, err = httplimit.New(failingCaller{}, configs, httplimit.Options{
		Rules: []httplimit.Rule{
			httplimit.ByIP("once"),
			httplimit.ByUser("once", header("X-User")),
			httplimit.ByUser("", header("X-User")),
			httplimit.ByTenant("once", nil).WithName("tenants"),
			httplimit.ByKey("bad\nname", "once", everyone),
			{},
		},
		TrustedProxies:  []string{"10.0.0.0/8", "not-an-address"},
		ForwardedHeader: "Bad Header",
	})
	require.ErrorIs(t, err, httplimit.ErrInvalidOptions)
	for _, want := range []string{
		`both named "once"`, "names no configuration", "no extractor", "not printable ASCII",
		"not built by a rule constructor", "TrustedProxies[1]", "ForwardedHeader",
	} {
		assert.Contains(t, err.Error(), want)
	}

	_, err = httplimit.New(failingCaller{}, configs, httplimit.Options{})
	assert.ErrorIs(t, err, httplimit.ErrInvalidOptions, "no rules")
	_, err = httplimit.New(nil, configs, httplimit.Options{Rules: []httplimit.Rule{httplimit.ByIP("once")}})
	assert.ErrorIs(t, err, httplimit.ErrInvalidOptions, "no caller")
}

// failingReleases fails every Release call, as a silo that went away
// between acquisition and release does.
type failingReleases struct{ proxy.Caller }

func (c failingReleases) Call(ctx context.Context, call proxy.Call, in, out proto.Message) error {
	if call.Method.Name == "Release" {
		return proxy.ErrUnavailable
	}
	return c.Caller.Call(ctx, call, in, out)
}

func TestFailedReleaseIsLoggedAndTheResponseStands(t *testing.T) {
	s := startSilo(t, nil)
	var logged bytes.Buffer
	configs := mustConfigs(t, ratelimit.Named("pool", ratelimit.ConcurrencyOptions{PermitLimit: 5}))
	rule := httplimit.ByKey("everyone", "pool", everyone)
	assert.Equal(t, "pool", rule.Config())
	m, err := httplimit.New(failingReleases{s.Caller()}, configs, httplimit.Options{Rules: []httplimit.Rule{rule}},
		httplimit.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, err)
	assert.Equal(t, http.StatusNoContent, serve(m.Handler(ok), "192.0.2.1:1").Code)
	assert.Contains(t, logged.String(), "httplimit: release failed")
	assert.EqualValues(t, 1, statistics(t, ratelimit.Concurrency(s.Caller(), poolKey)).ActiveLeases, "the permit is still held")
}
