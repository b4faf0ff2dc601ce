package ratelimitapi_test

import (
	"net/http"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/internal/silotest"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1/ratelimitv1connect"
)

func mustConfigs(t testing.TB, configs ...ratelimit.Config) *ratelimit.Configs {
	return silotest.Configs(t, configs...)
}

func durationFor(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// apiClient returns a client of the API speaking the Connect protocol.
func apiClient(c *http.Client, url string) ratelimitv1connect.RateLimitServiceClient {
	return ratelimitv1connect.NewRateLimitServiceClient(c, url)
}
