package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/httplimit"
	"github.com/granary-go/granary/silo"
)

func Example() {
	ctx := context.Background()
	s, _ := silo.New(silo.Options{DisableGateway: true}, silo.WithLogger(quiet))
	_ = ratelimit.Register(s, ratelimit.Defaults{})
	_ = s.Start(ctx)
	defer s.Stop(ctx)

	configs, _ := ratelimit.NewConfigs(
		ratelimit.Named("per-user", ratelimit.FixedWindowOptions{PermitLimit: 2, Window: time.Hour}),
	)
	// The user comes from whatever authenticates requests; a header here.
	user := func(r *http.Request) (string, bool) {
		u := r.Header.Get("X-User")
		return u, u != ""
	}
	m, err := httplimit.New(s.Caller(), configs, httplimit.Options{
		Rules: []httplimit.Rule{httplimit.ByUser("per-user", user)},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("GET /reports", m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "report")
	})))

	for range 3 {
		r := httptest.NewRequest(http.MethodGet, "/reports", nil)
		r.Header.Set("X-User", "alice")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code == http.StatusTooManyRequests {
			fmt.Println(w.Code, "retry after", w.Header().Get("Retry-After"), "s:", w.Body.String())
		} else {
			fmt.Println(w.Code, w.Body.String())
		}
	}
	// Output:
	// 200 report
	//
	// 200 report
	//
	// 429 retry after 3600 s: {"status":429,"error":"Too Many Requests","reason":"Rate limit exceeded","retry_after":3600}
}
