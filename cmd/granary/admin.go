package main

import (
	"log/slog"
	"net/http"
	"net/http/pprof"

	"github.com/granary-go/granary/internal/dashboard"
	"github.com/granary-go/granary/silo"
)

// adminDefault leaves the admin port off: the profiles show the program's
// internals and the API it serves changes limiters, so an operator opens
// it on purpose, on an address only operators reach.
const adminDefault = "none"

// newAdminMux routes the admin port: Go's profiles and, when api is set,
// the rate-limit service API at apiPath with changes allowed to callers
// with the admin right.
func newAdminMux(apiPath string, api http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	if api != nil {
		mux.Handle(apiPath, api)
	}
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// listenAdmin binds the admin port when -admin names one, and serves it.
func listenAdmin(cfg *config, s *silo.Silo, dash *dashboard.Dashboard, refusals httpRefusals, log *slog.Logger) (*httpPort, error) {
	if cfg.flags.admin == "none" {
		return nil, nil
	}
	auth := cfg.flags.credentials.auth
	if !auth.hasAdmin() {
		log.Warn("the admin port's rate-limit API refuses every change: no client token (-client-tokens-file) or certificate (-client-certs-file) has the admin right")
	}
	apiPath, api, err := serviceAPI(s.Caller(), cfg.limits.configs, cfg.flags, false, refusals.on("admin")...)
	if err != nil {
		return nil, err
	}
	mux := newAdminMux(apiPath, api)
	dash.Register(mux, true)
	handleLocate(mux, s)
	p, err := listenHTTPAs("-admin", cfg.flags.admin, auth.wrap(mux), cfg.flags.credentials.httpTLS, log)
	if err != nil {
		return nil, err
	}
	p.serve()
	return p, nil
}

// describeAdmin says where the admin port listens, for the startup line.
func describeAdmin(p *httpPort) string {
	if p == nil {
		return ""
	}
	return "admin on " + p.ln.Addr().String() + ", "
}
