package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/granary-go/granary/grains/ratelimit"
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
	mux := newMux("/api/", http.NotFoundHandler(), ready, http.NotFoundHandler())

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

// The service API gets its path, the operator's endpoints theirs: /metrics
// in Prometheus' text format on the public port, the profiles on the admin
// port alone.
func TestMuxRoutesTheAPIAndTheOperatorsEndpoints(t *testing.T) {
	metrics, err := newPrometheusMetrics()
	require.NoError(t, err)
	defer func() { _ = metrics.provider.Shutdown(context.Background()) }()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "api "+r.URL.Path) })
	mux := newMux("/granary.ratelimit.v1.RateLimitService/", api, &readiness{silo: &stubSilo{}}, metrics.handler)

	_, body := get(t, mux, "/granary.ratelimit.v1.RateLimitService/Acquire")
	assert.Equal(t, "api /granary.ratelimit.v1.RateLimitService/Acquire", body)
	code, _ := get(t, mux, "/elsewhere")
	assert.Equal(t, http.StatusNotFound, code)
	code, body = get(t, mux, "/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "# TYPE go_goroutines gauge", "the Go runtime's collector")
	code, _ = get(t, mux, "/debug/pprof/")
	assert.Equal(t, http.StatusNotFound, code, "the profiles are on the admin port only")

	admin := newAdminMux("/granary.ratelimit.v1.RateLimitService/", api)
	code, body = get(t, admin, "/debug/pprof/")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "goroutine")
	code, _ = get(t, admin, "/metrics")
	assert.Equal(t, http.StatusNotFound, code, "metrics stay where scrapers expect them")
}

func post(t *testing.T, h http.Handler, path, body string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	out, err := io.ReadAll(rec.Result().Body)
	require.NoError(t, err)
	return rec.Code, rec.Header(), string(out)
}

// The binary's service API reaches the silo's limiter grains with the
// configured named configurations, and -api-disable-changes refuses
// changes from outside.
func TestServiceAPIServesTheSilosLimiters(t *testing.T) {
	s, err := silo.New(silo.Options{Name: "api", DisableGateway: true}, silo.WithLogger(quietLog))
	require.NoError(t, err)
	require.NoError(t, ratelimit.Register(s, ratelimit.Defaults{}))
	require.NoError(t, s.Start(context.Background()))
	defer func() { require.NoError(t, s.Stop(context.Background())) }()
	configs, err := ratelimit.NewConfigs(ratelimit.Named("login", ratelimit.FixedWindowOptions{PermitLimit: 1, Window: time.Minute}))
	require.NoError(t, err)

	path, api, err := serviceAPI(s.Caller(), configs, parseSiloFlags(t), true)
	require.NoError(t, err)
	mux := newMux(path, api, &readiness{silo: s}, http.NotFoundHandler())
	acquire := `{"algorithm":"ALGORITHM_FIXED_WINDOW","key":"user:1","config":"login"}`
	code, _, body := post(t, mux, path+"Acquire", acquire)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"acquired":true`)
	code, header, body := post(t, mux, path+"Acquire", acquire)
	require.Equal(t, http.StatusOK, code, body)
	assert.NotContains(t, body, `"acquired":true`, "one permit a minute")
	retryAfter, err := strconv.Atoi(header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After in whole seconds")
	assert.True(t, retryAfter >= 1 && retryAfter <= 60, "the rest of the minute, rounded up: %d", retryAfter)

	code, _, body = post(t, mux, path+"Reset", `{"algorithm":"ALGORITHM_FIXED_WINDOW","key":"user:1"}`)
	assert.Equal(t, http.StatusForbidden, code, body)
	assert.Contains(t, body, "permission_denied")
}

// -api-max-key-bytes bounds the limiter keys of the HTTP port's API: a
// longer key is answered 400 invalid_argument, saying why, and a key at the
// bound is served.
func TestAPIMaxKeyBytesBoundsTheAPIsKeys(t *testing.T) {
	s, err := silo.New(silo.Options{Name: "api", DisableGateway: true}, silo.WithLogger(quietLog))
	require.NoError(t, err)
	require.NoError(t, ratelimit.Register(s, ratelimit.Defaults{}))
	require.NoError(t, s.Start(context.Background()))
	defer func() { require.NoError(t, s.Stop(context.Background())) }()
	f := parseSiloFlags(t, "-api-max-key-bytes", "8")
	path, api, err := serviceAPI(s.Caller(), nil, f, true)
	require.NoError(t, err)
	mux := newMux(path, api, &readiness{silo: s}, http.NotFoundHandler())
	code, _, body := post(t, mux, path+"Statistics", `{"algorithm":"ALGORITHM_CONCURRENCY","key":"123456789"}`)
	assert.Equal(t, http.StatusBadRequest, code, body)
	assert.Contains(t, body, "invalid_argument")
	assert.Contains(t, body, "a key of 9 bytes, more than 8")
	code, _, body = post(t, mux, path+"Statistics", `{"algorithm":"ALGORITHM_CONCURRENCY","key":"12345678"}`)
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, 512, parseSiloFlags(t).apiMaxKeyBytes, "the default is the API's")
}

// The HTTP port does not hold a slow or idle client for ever: headers,
// whole requests and idle keep-alive connections each have a bound.
func TestTheHTTPPortBoundsSlowAndIdleClients(t *testing.T) {
	port, err := listenHTTP("127.0.0.1:0", http.NotFoundHandler(), nil, quietLog)
	require.NoError(t, err)
	t.Cleanup(func() { _ = port.ln.Close() })
	assert.Positive(t, port.server.ReadHeaderTimeout)
	assert.Positive(t, port.server.ReadTimeout)
	assert.Positive(t, port.server.IdleTimeout)
}

// The port's read bound, shortened: a client that trickles a request's
// body fails its read once the time is up, while a handler that has its
// body and then waits longer (a queued acquisition) keeps its request's
// context and answers.
func TestTheReadBoundEndsSlowBodiesNotSlowAnswers(t *testing.T) {
	const bound = 50 * time.Millisecond
	readErr := make(chan error, 1)
	port, err := listenHTTP("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		if r.URL.Path == "/slow-body" {
			readErr <- err
			return
		}
		select {
		case <-r.Context().Done():
			return // cancelled: the client gets no answer
		case <-time.After(4 * bound): // well past the read bound
		}
		_, _ = io.WriteString(w, "answered")
	}), nil, quietLog)
	require.NoError(t, err)
	port.server.ReadTimeout = bound
	port.serve()
	t.Cleanup(func() { _ = port.server.Close() })
	addr := port.ln.Addr().String()

	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = io.WriteString(conn, "POST /slow-body HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly a little")
	require.NoError(t, err)
	select {
	case err := <-readErr:
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
	case <-time.After(10 * time.Second):
		t.Fatal("the handler still waits for the body")
	}

	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Post("http://"+addr+"/slow-answer", "text/plain", strings.NewReader("a body"))
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "answered", string(body))
}
