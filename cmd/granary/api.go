package main

import (
	"net/http"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/grains/ratelimit/ratelimitapi"
	"github.com/granary-go/granary/proxy"
)

// serviceAPI returns the rate-limit service API (gRPC, gRPC-Web and
// HTTP/JSON from one connect-go handler) over the silo's own caller with
// the named configurations, and the path the HTTP port mounts it at.
// Changes are refused when disableChanges is set.
func serviceAPI(caller proxy.Caller, configs *ratelimit.Configs, f *siloFlags, disableChanges bool, opts ...ratelimitapi.Option) (string, http.Handler, error) {
	return ratelimitapi.NewHandler(caller, configs, ratelimitapi.Options{DisableChanges: disableChanges, MaxKeyBytes: f.apiMaxKeyBytes}, opts...)
}
