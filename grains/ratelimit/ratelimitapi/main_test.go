package ratelimitapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/internal/silotest"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1/ratelimitv1connect"
	"github.com/granary-go/granary/silo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	quiet = silotest.Quiet
	epoch = silotest.Epoch
)

// never is a window no test waits out.
const never = 1000 * time.Hour

// env is a silo hosting the limiter grains and, in front of it, an HTTP
// server on loopback serving the API over HTTP/1.1 and unencrypted
// HTTP/2, as the silo binary serves it.
type env struct {
	t       testing.TB
	silo    *silo.Silo
	url     string
	handler http.Handler
	http1   *http.Client // HTTP/1.1 only
	h2c     *http.Client // unencrypted HTTP/2 only, as gRPC clients speak it
}

type envConfig struct {
	fake     *clock.Fake
	configs  *ratelimit.Configs
	options  ratelimitapi.Options
	handlers []ratelimitapi.Option
}

func newEnv(t testing.TB, cfg envConfig) *env {
	t.Helper()
	s := silotest.Start(t, "api", cfg.fake)

	path, h, err := ratelimitapi.NewHandler(s.Caller(), cfg.configs, cfg.options, cfg.handlers...)
	require.NoError(t, err)
	require.Equal(t, "/"+ratelimitv1connect.RateLimitServiceName+"/", path)
	mux := http.NewServeMux()
	mux.Handle(path, h)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()

	h1 := &http.Transport{Protocols: new(http.Protocols)}
	h1.Protocols.SetHTTP1(true)
	h2 := &http.Transport{Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(func() {
		h1.CloseIdleConnections()
		h2.CloseIdleConnections()
		srv.Close()
	})
	return &env{t: t, silo: s, url: srv.URL, handler: mux, http1: &http.Client{Transport: h1}, h2c: &http.Client{Transport: h2}}
}

// grpc returns a gRPC client of the API over unencrypted HTTP/2.
func (e *env) grpc() ratelimitv1connect.RateLimitServiceClient {
	return ratelimitv1connect.NewRateLimitServiceClient(e.h2c, e.url, connect.WithGRPC())
}

// reply is an HTTP/JSON answer.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// post calls method with a JSON body over HTTP/1.1, as curl would.
func (e *env) post(ctx context.Context, method, body string, header ...string) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/"+ratelimitv1connect.RateLimitServiceName+"/"+method, strings.NewReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.http1.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	require.NoError(e.t, json.Unmarshal(raw, &r.body), "a JSON body: %s", raw)
	return r, nil
}

// call posts and requires an answer.
func (e *env) call(method, body string) reply {
	e.t.Helper()
	r, err := e.post(context.Background(), method, body)
	require.NoError(e.t, err)
	return r
}

// ok calls and requires success.
func (e *env) ok(method, body string) map[string]any {
	e.t.Helper()
	r := e.call(method, body)
	require.Equal(e.t, http.StatusOK, r.status, "%s %s: %s", method, body, r.raw)
	return r.body
}
