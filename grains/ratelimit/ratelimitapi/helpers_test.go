package ratelimitapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi/ratelimitv1/ratelimitv1connect"
)

func mustConfigs(t testing.TB, configs ...ratelimit.Config) *ratelimit.Configs {
	t.Helper()
	set, err := ratelimit.NewConfigs(configs...)
	require.NoError(t, err)
	return set
}

func durationFor(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// apiClient returns a client of the API speaking the Connect protocol.
func apiClient(c *http.Client, url string) ratelimitv1connect.RateLimitServiceClient {
	return ratelimitv1connect.NewRateLimitServiceClient(c, url)
}
