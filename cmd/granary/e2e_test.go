package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	apiv1 "github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1/ratelimitv1connect"
)

// e2eWindow is the window of the test's limiter: long enough that every
// rejection's Retry-After is well above zero.
const (
	e2eWindow  = time.Minute
	e2ePermits = 4
	apiPath    = "/granary.ratelimit.v1.RateLimitService/"
)

// Three silo processes of the built binary serve the rate-limit API on
// their HTTP ports: a real HTTP client drives the HTTP/JSON API through one
// silo, and a gRPC client another, until each gets a rejected lease whose
// Retry-After is the retry hint rounded up to whole seconds; each silo's
// /metrics counts the acquisitions its limiter grains answered; SIGTERM
// stops each process, which exits 0.
func TestThreeSilosServeTheRateLimitAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three processes")
	}
	bin := buildBinary(t)
	config := writeFile(t, "granary.yaml", fmt.Sprintf(`
silo:
  stop-timeout: 20s
ratelimit:
  configurations:
    e2e:
      fixed-window: {permit-limit: %d, window: %s}
`, e2ePermits, e2eWindow))

	var procs []*process
	var ports []string
	seed := ""
	for _, name := range []string{"a", "b", "c"} {
		port := freeAddr(t)
		p, gossip := startProcess(t, bin, name, seed, "-config", config, "-http", port)
		if seed == "" {
			seed = gossip
		}
		procs, ports = append(procs, p), append(ports, port)
	}

	web := &http.Transport{}
	t.Cleanup(web.CloseIdleConnections)
	httpClient := &http.Client{Transport: web, Timeout: 5 * time.Second}
	for i, port := range ports {
		require.Eventually(t, func() bool {
			resp, err := httpClient.Get("http://" + port + "/readyz")
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}, 30*time.Second, 20*time.Millisecond, "silo %s ready", procs[i].name)
	}

	// HTTP/JSON through a, until the limit of the key is reached.
	acquireJSON := func(key string) (acquired bool, retryAfterHeader string, retryAfter time.Duration) {
		t.Helper()
		body := fmt.Sprintf(`{"algorithm":"ALGORITHM_FIXED_WINDOW","key":%q,"config":"e2e"}`, key)
		resp, err := httpClient.Post("http://"+ports[0]+apiPath+"Acquire", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
		var lease struct {
			Acquired   bool   `json:"acquired"`
			Reason     string `json:"reason"`
			RetryAfter string `json:"retryAfter"`
		}
		require.NoError(t, json.Unmarshal(raw, &lease), "%s", raw)
		if lease.Acquired {
			return true, resp.Header.Get("Retry-After"), 0
		}
		assert.Equal(t, "Rate limit exceeded", lease.Reason)
		retryAfter, err = time.ParseDuration(lease.RetryAfter)
		require.NoError(t, err, "retryAfter %q", lease.RetryAfter)
		return false, resp.Header.Get("Retry-After"), retryAfter
	}
	granted := 0
	for {
		acquired, header, retryAfter := acquireJSON("json-key")
		if acquired {
			granted++
			require.LessOrEqual(t, granted, 3*e2ePermits, "no rejection after %d acquisitions", granted)
			assert.Empty(t, header, "no Retry-After on a granted lease")
			continue
		}
		checkRetryAfter(t, header, retryAfter)
		break
	}
	assert.GreaterOrEqual(t, granted, e2ePermits, "the limit's permits were granted first")

	// gRPC through b, on the same key (its limiter lives on one silo
	// whichever is asked) and on a key of its own.
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(h2c.CloseIdleConnections)
	grpc := ratelimitv1connect.NewRateLimitServiceClient(&http.Client{Transport: h2c}, "http://"+ports[1], connect.WithGRPC())
	acquireGRPC := func(key string) *connect.Response[apiv1.AcquireResponse] {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := grpc.Acquire(ctx, connect.NewRequest(&apiv1.AcquireRequest{
			Algorithm: apiv1.Algorithm_ALGORITHM_FIXED_WINDOW, Key: key, Config: "e2e",
		}))
		require.NoError(t, err)
		return resp
	}
	resp := acquireGRPC("json-key")
	require.False(t, resp.Msg.GetAcquired(), "the key's limit, reached over HTTP/JSON through a, holds over gRPC through b")
	checkRetryAfter(t, resp.Header().Get("Retry-After"), durationOf(resp.Msg.GetRetryAfter()))
	grpcGranted := 0
	for {
		resp := acquireGRPC("grpc-key")
		if resp.Msg.GetAcquired() {
			grpcGranted++
			require.LessOrEqual(t, grpcGranted, 3*e2ePermits)
			continue
		}
		assert.Equal(t, "Rate limit exceeded", resp.Msg.GetReason())
		checkRetryAfter(t, resp.Header().Get("Retry-After"), durationOf(resp.Msg.GetRetryAfter()))
		break
	}

	// Each silo counts what its limiter grains answered; together they
	// answered every acquisition above.
	var total map[string]float64 = map[string]float64{}
	for i, port := range ports {
		resp, err := httpClient.Get("http://" + port + "/metrics")
		require.NoError(t, err)
		raw, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.NoError(t, err)
		for result, v := range acquisitionsScraped(t, string(raw), procs[i].name) {
			total[result] += v
		}
	}
	assert.EqualValues(t, granted+grpcGranted, total["granted"], "granted acquisitions on /metrics")
	assert.EqualValues(t, 3, total["rejected"], "rejected acquisitions on /metrics")

	for _, p := range []*process{procs[2], procs[1], procs[0]} {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		select {
		case err := <-p.exited:
			require.NoError(t, err, "%s exits 0 on SIGTERM", p.name)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop", p.name)
		}
		require.NotEmpty(t, p.stdout)
		assert.Equal(t, "stopped", p.stdout[len(p.stdout)-1], "%s stopped gracefully", p.name)
	}
}

// checkRetryAfter checks a rejection's Retry-After header: the hint in
// whole seconds, rounded up, and within the window.
func checkRetryAfter(t *testing.T, header string, hint time.Duration) {
	t.Helper()
	require.NotEmpty(t, header, "a rejection carries Retry-After")
	seconds, err := strconv.Atoi(header)
	require.NoError(t, err, "Retry-After %q in whole seconds", header)
	assert.Positive(t, hint)
	assert.LessOrEqual(t, hint, e2eWindow)
	assert.Equal(t, int(math.Ceil(hint.Seconds())), seconds, "Retry-After is the hint %v rounded up", hint)
}

func durationOf(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

var acquisitionLine = regexp.MustCompile(`(?m)^granary_ratelimit_acquisitions_total\{([^}]*)\} (\S+)$`)

// acquisitionsScraped returns one silo's acquisitions by result from its
// /metrics.
func acquisitionsScraped(t *testing.T, body, silo string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range acquisitionLine.FindAllStringSubmatch(body, -1) {
		require.Contains(t, m[1], `silo="`+silo+`"`)
		result := regexp.MustCompile(`result="([a-z]+)"`).FindStringSubmatch(m[1])
		require.NotNil(t, result, m[0])
		v, err := strconv.ParseFloat(m[2], 64)
		require.NoError(t, err)
		out[result[1]] = v
	}
	require.Len(t, out, 4, "every result is reported by silo %s", silo)
	return out
}
