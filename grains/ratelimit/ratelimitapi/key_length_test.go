package ratelimitapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/grains/ratelimit/internal/silotest"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi"
	apiv1 "github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1/ratelimitv1connect"
	"github.com/granary-go/granary/proxy"
)

// countingCaller counts the grain calls that pass through it.
type countingCaller struct {
	proxy.Caller
	calls atomic.Int64
}

func (c *countingCaller) Call(ctx context.Context, call proxy.Call, in, out proto.Message) error {
	c.calls.Add(1)
	return c.Caller.Call(ctx, call, in, out)
}

// jsonCall posts body to method of h over HTTP/JSON and returns the status
// and the body.
func jsonCall(h http.Handler, method, body string) (int, string) {
	req := httptest.NewRequest(http.MethodPost, "/"+ratelimitv1connect.RateLimitServiceName+"/"+method, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

// A limiter key longer than the service takes is answered 400
// invalid_argument by every method, saying how long it was and what the
// limit is, and no grain is called; a key at the limit is served. The
// limit is the default one or the configured one.
func TestOverLongKeyIsABadRequestThatReachesNoGrain(t *testing.T) {
	s := silotest.Start(t, "keys", nil)
	for _, tc := range []struct {
		name  string
		limit int // Options.MaxKeyBytes
		want  int // the limit that applies
	}{
		{"default", 0, ratelimitapi.DefaultMaxKeyBytes},
		{"configured", 16, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caller := &countingCaller{Caller: s.Caller()}
			_, h, err := ratelimitapi.NewHandler(caller, nil, ratelimitapi.Options{MaxKeyBytes: tc.limit})
			require.NoError(t, err)
			long := strings.Repeat("k", tc.want+1)
			bodies := map[string]string{
				"Acquire":          `{"algorithm":"ALGORITHM_CONCURRENCY","key":"%s"}`,
				"Release":          `{"algorithm":"ALGORITHM_CONCURRENCY","key":"%s","leaseId":"1"}`,
				"Statistics":       `{"algorithm":"ALGORITHM_CONCURRENCY","key":"%s"}`,
				"Configure":        `{"key":"%s","options":{"concurrency":{"permitLimit":1}}}`,
				"GetConfiguration": `{"algorithm":"ALGORITHM_CONCURRENCY","key":"%s"}`,
				"Reset":            `{"algorithm":"ALGORITHM_CONCURRENCY","key":"%s"}`,
				"DeleteState":      `{"algorithm":"ALGORITHM_CONCURRENCY","key":"%s"}`,
				"TryReplenish":     `{"algorithm":"ALGORITHM_TOKEN_BUCKET","key":"%s"}`,
			}
			require.Len(t, bodies, len(methods), "every method")
			for _, method := range methods {
				status, body := jsonCall(h, method, fmt.Sprintf(bodies[method], long))
				assert.Equal(t, http.StatusBadRequest, status, "%s: %s", method, body)
				assert.Contains(t, body, `"code":"invalid_argument"`, method)
				assert.Contains(t, body, fmt.Sprintf("a key of %d bytes, more than %d", tc.want+1, tc.want), method)
			}
			assert.Zero(t, caller.calls.Load(), "no grain was called")

			status, body := jsonCall(h, "Statistics", fmt.Sprintf(bodies["Statistics"], long[1:]))
			assert.Equal(t, http.StatusOK, status, "a key at the limit is served: %s", body)
			assert.Positive(t, caller.calls.Load())
		})
	}
}

// The same over gRPC: INVALID_ARGUMENT, with no grain called.
func TestOverLongKeyIsInvalidArgumentOverGRPC(t *testing.T) {
	e := newEnv(t, envConfig{options: ratelimitapi.Options{MaxKeyBytes: 8}})
	_, err := e.grpc().Statistics(context.Background(), connect.NewRequest(&apiv1.StatisticsRequest{
		Algorithm: apiv1.Algorithm_ALGORITHM_CONCURRENCY, Key: "123456789"}))
	require.Error(t, err)
	assert.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	assert.Contains(t, err.Error(), "a key of 9 bytes, more than 8")
}

// A service over a client of a gateway that takes shorter grain keys than
// the service's own limit answers the gateway's refusal of a long key as
// 400 invalid_argument too, not as an error of its own.
func TestGatewaysRefusalOfALongKeyIsABadRequest(t *testing.T) {
	s := silotest.Start(t, "gateway", nil)
	c, err := client.New(client.Options{Gateways: []string{s.GatewayAddr().String()}}, client.WithLogger(silotest.Quiet))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.Connect(ctx))
	t.Cleanup(func() { _ = c.Close() })
	_, h, err := ratelimitapi.NewHandler(c, nil, ratelimitapi.Options{MaxKeyBytes: 64 << 10})
	require.NoError(t, err)
	long := strings.Repeat("k", 8<<10) // over the gateway's 4 KiB
	status, body := jsonCall(h, "Statistics", `{"algorithm":"ALGORITHM_CONCURRENCY","key":"`+long+`"}`)
	assert.Equal(t, http.StatusBadRequest, status, body)
	assert.Contains(t, body, `"code":"invalid_argument"`)
	assert.Contains(t, body, "grain key of")
}
