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
func serviceAPI(caller proxy.Caller, configs *ratelimit.Configs, disableChanges bool, opts ...ratelimitapi.Option) (string, http.Handler, error) {
	return ratelimitapi.NewHandler(caller, configs, ratelimitapi.Options{DisableChanges: disableChanges}, opts...)
}
