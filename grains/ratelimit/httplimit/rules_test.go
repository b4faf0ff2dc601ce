package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/httplimit"
)

// header returns an extractor of the named request header.
func header(name string) httplimit.Extractor {
	return func(r *http.Request) (string, bool) {
		v := r.Header.Get(name)
		return v, v != ""
	}
}

// oncePerKey allows one request per key, for good.
var oncePerKey = ratelimit.Named("once", ratelimit.FixedWindowOptions{PermitLimit: 1, Window: never, ManualReplenishment: true})

func TestEachRuleKindLimitsEachKeyOnItsOwn(t *testing.T) {
	s := startSilo(t, nil)
	configs := mustConfigs(t, oncePerKey)
	for _, tc := range []struct {
		kind string
		rule httplimit.Rule
		// as makes a request from "who": a client, user, route...
		as func(r *http.Request, who string)
	}{
		{"ip", httplimit.ByIP("once"), func(r *http.Request, who string) { r.RemoteAddr = who + ":1000" }},
		{"user", httplimit.ByUser("once", header("X-User")), func(r *http.Request, who string) { r.Header.Set("X-User", who) }},
		{"group", httplimit.ByGroup("once", header("X-Group")), func(r *http.Request, who string) { r.Header.Set("X-Group", who) }},
		{"tenant", httplimit.ByTenant("once", header("X-Tenant")), func(r *http.Request, who string) { r.Header.Set("X-Tenant", who) }},
		{"role", httplimit.ByRole("once", header("X-Role")), func(r *http.Request, who string) { r.Header.Set("X-Role", who) }},
		{"custom", httplimit.ByKey("by-query", "once", func(r *http.Request) (string, bool) {
			v := r.URL.Query().Get("account")
			return v, v != ""
		}), func(r *http.Request, who string) { r.URL.RawQuery = "account=" + who }},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			m := mustMiddleware(t, s.Caller(), configs, httplimit.Options{Rules: []httplimit.Rule{tc.rule}, KeyPrefix: "kinds"})
			h := m.Handler(ok)
			send := func(who string) int {
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				tc.as(r, who)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w.Code
			}
			one, other := "192.0.2.1", "192.0.2.2" // addresses, so that they serve as every kind of value
			assert.Equal(t, http.StatusNoContent, send(one))
			assert.Equal(t, http.StatusTooManyRequests, send(one), "the same %s again", tc.kind)
			assert.Equal(t, http.StatusNoContent, send(other), "another %s has a limiter of its own", tc.kind)
		})
	}
}

func TestEndpointRuleLimitsEachRoutePattern(t *testing.T) {
	s := startSilo(t, nil)
	configs := mustConfigs(t, oncePerKey)
	send := func(h http.Handler, method, path string) int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		return w.Code
	}

	t.Run("wrapping the handlers", func(t *testing.T) {
		m := mustMiddleware(t, s.Caller(), configs, httplimit.Options{Rules: []httplimit.Rule{httplimit.ByEndpoint("once", nil)}, KeyPrefix: "inner"})
		mux := http.NewServeMux()
		mux.Handle("GET /items/{id}", m.Handler(ok))
		mux.Handle("GET /users/{id}", m.Handler(ok))
		assert.Equal(t, http.StatusNoContent, send(mux, http.MethodGet, "/items/1"))
		assert.Equal(t, http.StatusTooManyRequests, send(mux, http.MethodGet, "/items/2"), "one route, whatever the id")
		assert.Equal(t, http.StatusNoContent, send(mux, http.MethodGet, "/users/1"), "another route")
	})
	t.Run("wrapping the mux", func(t *testing.T) {
		mux := http.NewServeMux()
		mux.Handle("GET /items/{id}", ok)
		m := mustMiddleware(t, s.Caller(), configs, httplimit.Options{Rules: []httplimit.Rule{httplimit.ByEndpoint("once", mux)}, KeyPrefix: "outer"})
		h := m.Handler(mux)
		assert.Equal(t, http.StatusNoContent, send(h, http.MethodGet, "/items/1"))
		assert.Equal(t, http.StatusTooManyRequests, send(h, http.MethodGet, "/items/2"), "the mux names the route")
		assert.Equal(t, http.StatusNotFound, send(h, http.MethodGet, "/nowhere"), "no route: the rule does not apply")
		assert.Equal(t, http.StatusNotFound, send(h, http.MethodGet, "/nowhere"))
	})
}

func TestRuleWithoutAValueDoesNotApply(t *testing.T) {
	s := startSilo(t, nil)
	keys := record(s.Caller())
	m := mustMiddleware(t, keys, mustConfigs(t, oncePerKey), httplimit.Options{Rules: []httplimit.Rule{httplimit.ByUser("once", header("X-User"))}})
	h := m.Handler(ok)
	for range 3 {
		assert.Equal(t, http.StatusNoContent, serve(h, "192.0.2.1:1").Code, "an anonymous request passes a user rule")
	}
	assert.Empty(t, keys.calledKeys(), "and calls no limiter")
}

func TestGroupReleasesTakenPermitsWhenALaterRuleRejects(t *testing.T) {
	s := startSilo(t, nil)
	configs := mustConfigs(t,
		ratelimit.Named("pool", ratelimit.ConcurrencyOptions{PermitLimit: 1}),
		oncePerKey,
	)
	m := mustMiddleware(t, s.Caller(), configs, httplimit.Options{Rules: []httplimit.Rule{
		httplimit.ByKey("everyone", "pool", func(*http.Request) (string, bool) { return "all", true }),
		httplimit.ByUser("once", header("X-User")),
	}})
	h := m.Handler(ok)
	pool := ratelimit.Concurrency(s.Caller(), httplimit.Key(httplimit.DefaultKeyPrefix, "key", "everyone", "all"))

	require.Equal(t, http.StatusNoContent, serve(h, "192.0.2.1:1", "X-User", "alice").Code)
	assert.Equal(t, http.StatusTooManyRequests, serve(h, "192.0.2.1:1", "X-User", "alice").Code, "the second rule rejects")
	st, err := pool.Statistics(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.AvailablePermits, "the first rule's permit went back: %v", st)
	assert.Zero(t, st.ActiveLeases)
	assert.EqualValues(t, 2, st.TotalSuccessfulLeases, "the rejected request did take it first")
	assert.Equal(t, http.StatusNoContent, serve(h, "192.0.2.1:1", "X-User", "bob").Code, "so the pool still admits others")
}

func TestATimeBasedRulesQuotaIsRefundedWhenAnotherRuleRejects(t *testing.T) {
	s := startSilo(t, nil)
	configs := mustConfigs(t,
		ratelimit.Named("hourly", ratelimit.FixedWindowOptions{PermitLimit: 2, Window: time.Hour}),
		oncePerKey,
	)
	m := mustMiddleware(t, s.Caller(), configs, httplimit.Options{Rules: []httplimit.Rule{
		httplimit.ByKey("everyone", "hourly", func(*http.Request) (string, bool) { return "all", true }),
		httplimit.ByUser("once", header("X-User")),
	}})
	h := m.Handler(ok)
	window := ratelimit.FixedWindow(s.Caller(), httplimit.Key(httplimit.DefaultKeyPrefix, "key", "everyone", "all"))

	require.Equal(t, http.StatusNoContent, serve(h, "192.0.2.1:1", "X-User", "alice").Code)
	for range 3 {
		assert.Equal(t, http.StatusTooManyRequests, serve(h, "192.0.2.1:1", "X-User", "alice").Code, "the user rule rejects")
	}
	st, err := window.Statistics(context.Background())
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.AvailablePermits, "the rejected requests' permits were refunded: %v", st)
	assert.Equal(t, http.StatusNoContent, serve(h, "192.0.2.1:1", "X-User", "bob").Code, "so the window still admits another user")
}
