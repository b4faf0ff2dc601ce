package ratelimitapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1/ratelimitv1connect"
)

var methods = []string{"Acquire", "Release", "Statistics", "Configure", "GetConfiguration", "Reset", "DeleteState", "TryReplenish"}

// FuzzServiceJSON sends what a hostile HTTP client can: any JSON body to
// any method. Whatever it is, the service answers, with a result or an
// error that blames the request (4xx) or its time (504), never with an
// error of its own (5xx unknown or internal), and without panicking.
func FuzzServiceJSON(f *testing.F) {
	seeds := map[string][]string{
		"Acquire": {
			`{"algorithm":"ALGORITHM_FIXED_WINDOW","key":"k","config":"login"}`,
			`{"algorithm":1,"key":"k","permits":"3"}`,
			`{"key":"k","options":{"tokenBucket":{"tokenLimit":"2","tokensPerPeriod":1,"replenishmentPeriod":"1s","queueLimit":1}}}`,
			`{"key":"k","options":{"slidingWindow":{"permitLimit":2,"window":"-5s","segmentsPerWindow":70000}}}`,
			`{"key":"k","options":{"fixedWindow":{"permitLimit":"9223372036854775807","window":"315576000000s"}}}`,
			`{"algorithm":"ALGORITHM_CONCURRENCY","key":"k","permits":-9223372036854775808}`,
		},
		"Release": {`{"algorithm":"ALGORITHM_CONCURRENCY","key":"k","leaseId":"18446744073709551615"}`},
		"Statistics": {`{"algorithm":"ALGORITHM_SLIDING_WINDOW","key":"\u0000:%"}`,
			// one byte over the default key limit, and far over it
			`{"algorithm":"ALGORITHM_CONCURRENCY","key":"` + strings.Repeat("k", ratelimitapi.DefaultMaxKeyBytes+1) + `"}`,
			`{"algorithm":"ALGORITHM_CONCURRENCY","key":"` + strings.Repeat("\u00e9", 16<<10) + `"}`},
		"Configure":        {`{"key":"k","options":{"concurrency":{"permitLimit":1,"queueLimit":5,"queueOrder":"QUEUE_ORDER_NEWEST_FIRST"}}}`, `{"key":"k","config":"login"}`},
		"GetConfiguration": {`{"algorithm":"ALGORITHM_TOKEN_BUCKET","key":"k"}`},
		"Reset":            {`{"algorithm":"ALGORITHM_CONCURRENCY","key":"k"}`},
		"DeleteState":      {`{"algorithm":"ALGORITHM_FIXED_WINDOW","key":"k"}`},
		"TryReplenish":     {`{"algorithm":"ALGORITHM_TOKEN_BUCKET","key":"k"}`, `{}`, `[]`, `null`, ``},
	}
	for i, m := range methods {
		for _, body := range seeds[m] {
			f.Add(uint8(i), body)
		}
	}
	e := newEnv(f, envConfig{configs: mustConfigs(f,
		ratelimit.Named("login", ratelimit.FixedWindowOptions{PermitLimit: 3, Window: time.Minute}),
	)})
	f.Fuzz(func(t *testing.T, method uint8, body string) {
		name := methods[int(method)%len(methods)]
		req := httptest.NewRequest(http.MethodPost, "/"+ratelimitv1connect.RateLimitServiceName+"/"+name, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Connect-Timeout-Ms", "50") // a queued acquisition waits no longer
		w := httptest.NewRecorder()
		e.handler.ServeHTTP(w, req)
		if w.Code == http.StatusOK {
			return
		}
		var answer struct {
			Code string `json:"code"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &answer); err != nil {
			t.Fatalf("%s %q: status %d, body %q is no connect error: %v", name, body, w.Code, w.Body, err)
		}
		switch answer.Code {
		case "invalid_argument", "not_found", "deadline_exceeded":
		default:
			t.Fatalf("%s %q: status %d, %s", name, body, w.Code, w.Body)
		}
	})
}
