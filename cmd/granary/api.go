package main

import (
	"encoding/json"
	"net/http"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/proxy"
)

// serviceAPI is the rate-limit service API the HTTP port serves at its
// root, over the silo's own caller with the named configurations.
//
// SEAM: the API itself (grains/ratelimit/ratelimitapi: gRPC and HTTP/JSON
// from one connect-go handler) is being built on another branch. Until it
// is merged this answers every request 501 Not Implemented with a JSON
// body saying so; the merge replaces the body of this function with the
// real handler and nothing else in the binary changes.
func serviceAPI(caller proxy.Caller, configs *ratelimit.Configs) http.Handler {
	_, _ = caller, configs
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotImplemented)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"status": http.StatusNotImplemented,
			"error":  "not implemented",
			"reason": "the rate-limit service API is not in this build yet",
		})
	})
}
