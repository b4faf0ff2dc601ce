package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/silo"
)

// stubSilo is a silo whose readiness the test sets.
type stubSilo struct{ err error }

func (s *stubSilo) Ready() error { return s.err }

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	return rec.Code, string(body)
}

// /readyz answers 503 with the reason until the silo is ready, 200 while
// it is, and 503 again once a stop signal arrived; /healthz answers 200
// throughout.
func TestReadyzFollowsTheSilo(t *testing.T) {
	stub := &stubSilo{err: silo.ErrNotStarted}
	ready := &readiness{silo: stub}
	mux := newMux(http.NotFoundHandler(), ready, http.NotFoundHandler())

	code, body := get(t, mux, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "not ready: silo: not started\n", body)
	code, _ = get(t, mux, "/healthz")
	assert.Equal(t, http.StatusOK, code, "the process is up")

	stub.err = nil
	code, body = get(t, mux, "/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ready\n", body)

	ready.stopping.Store(true)
	code, body = get(t, mux, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "stopping")
	code, _ = get(t, mux, "/healthz")
	assert.Equal(t, http.StatusOK, code)
}

// The service API gets every path but the operator's: /metrics in
// Prometheus' text format, and the profiles.
func TestMuxRoutesTheAPIAndTheOperatorsEndpoints(t *testing.T) {
	metrics, err := newPrometheusMetrics()
	require.NoError(t, err)
	defer func() { _ = metrics.provider.Shutdown(context.Background()) }()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "api "+r.URL.Path) })
	mux := newMux(api, &readiness{silo: &stubSilo{}}, metrics.handler)

	_, body := get(t, mux, "/granary.ratelimit.v1.RateLimitService/Acquire")
	assert.Equal(t, "api /granary.ratelimit.v1.RateLimitService/Acquire", body)
	code, body := get(t, mux, "/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "# TYPE go_goroutines gauge", "the Go runtime's collector")
	code, body = get(t, mux, "/debug/pprof/")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "goroutine")
}

// Until the service API is merged, its seam says so in the API's JSON
// error shape.
func TestServiceAPISeamAnswersNotImplemented(t *testing.T) {
	code, body := get(t, serviceAPI(nil, nil), "/anything")
	assert.Equal(t, http.StatusNotImplemented, code)
	assert.True(t, strings.HasPrefix(body, `{"error":"not implemented"`), body)
}
