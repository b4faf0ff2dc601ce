package ratelimitapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/granary-go/granary/client"
	"github.com/granary-go/granary/grains/ratelimit"
	apiv1 "github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1/ratelimitv1connect"
)

// BenchmarkAcquireRoundTrip compares one fixed-window acquisition at 16
// concurrent clients three ways, all on loopback to one silo: the native
// client (a holder on a gateway client), HTTP/JSON (a POST to the API
// served in front of the silo's own caller, over HTTP/1.1 keep-alive
// connections) and gRPC (over one unencrypted HTTP/2 connection). The
// three take turns in slices of 2048 acquisitions, so that they see the
// same machine; it reports the mean time per acquisition of each
// (ns/native, ns/http-json, ns/grpc) and the ratios json/native and
// grpc/native. ns/op is the three together.
func BenchmarkAcquireRoundTrip(b *testing.B) {
	e := newEnv(b, envConfig{})
	open := ratelimit.FixedWindowOptions{PermitLimit: 1 << 62, Window: never, ManualReplenishment: true}
	gateway, err := client.New(client.Options{Gateways: []string{e.silo.GatewayAddr().String()}}, client.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	if err := gateway.Connect(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer gateway.Close()
	native := ratelimit.FixedWindow(gateway, "bench", open)
	e.ok("Configure", `{"key":"bench","options":{"fixedWindow":{"permitLimit":"4611686018427387904","window":"3600000s","manualReplenishment":true}}}`)
	body := []byte(`{"algorithm":"ALGORITHM_FIXED_WINDOW","key":"bench"}`)
	url := e.url + ratelimitv1connect.RateLimitServiceAcquireProcedure
	h1 := &http.Client{Transport: &http.Transport{Protocols: e.http1.Transport.(*http.Transport).Protocols, MaxIdleConnsPerHost: 32}}
	defer h1.CloseIdleConnections()
	grpc := e.grpc()

	cases := []struct {
		name    string
		acquire func() bool
	}{
		{"native", func() bool {
			l, err := native.Acquire(context.Background(), 1)
			return err == nil && l.Acquired()
		}},
		{"http-json", func() bool {
			resp, err := h1.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				return false
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK && bytes.Contains(raw, []byte(`"acquired":true`))
		}},
		{"grpc", func() bool {
			resp, err := grpc.Acquire(context.Background(), connect.NewRequest(&apiv1.AcquireRequest{Algorithm: apiv1.Algorithm_ALGORITHM_FIXED_WINDOW, Key: "bench"}))
			return err == nil && resp.Msg.Acquired
		}},
	}
	for _, c := range cases {
		if !c.acquire() { // activations and connections are up before the clock starts
			b.Fatal(c.name, ": not acquired")
		}
	}
	var spent [3]time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(2048, b.N-done)
		for i, c := range cases {
			spent[i] += concurrently(b, clients, n, c.acquire)
		}
		done += n
	}
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	for i, c := range cases {
		b.ReportMetric(per(spent[i]), "ns/"+c.name)
	}
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "json/native")
	b.ReportMetric(float64(spent[2])/float64(spent[0]), "grpc/native")
}

// clients is how many callers acquire at once.
const clients = 16

// concurrently runs n calls of op spread over k goroutines and returns how
// long they took together.
func concurrently(b *testing.B, k, n int, op func() bool) time.Duration {
	var wg sync.WaitGroup
	start := time.Now()
	for g := range k {
		calls := n / k
		if g < n%k {
			calls++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				if !op() {
					b.Error("not acquired")
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}
