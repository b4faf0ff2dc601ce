package ratelimitapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

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
// connections) and gRPC (over one unencrypted HTTP/2 connection). Run
// with -count to interleave the three; the ratio of ns/op is the cost of
// the HTTP edge against the native protocol.
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
		b.Run(c.name, func(b *testing.B) {
			if !c.acquire() {
				b.Fatal("not acquired")
			}
			b.ReportAllocs()
			b.SetParallelism(8) // 16 clients on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !c.acquire() {
						b.Error("not acquired")
						return
					}
				}
			})
		})
	}
}
