package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/granary-go/granary/internal/dashboard"
	"github.com/granary-go/granary/silo"
)

// mountDashboard routes the dashboard of s on mux. The public port's
// shows what /cluster and /metrics already do; the admin port's adds the
// hottest limiter keys, which name the callers (docs/operations.md, "The
// dashboard").
func mountDashboard(mux *http.ServeMux, s *silo.Silo, prom *prometheusMetrics, showKeys bool) error {
	var gatherer prometheus.Gatherer
	if prom != nil {
		gatherer = prom.silo
	}
	d, err := dashboard.New(s, gatherer, dashboard.Options{ShowKeys: showKeys})
	if err != nil {
		return err
	}
	d.Register(mux)
	return nil
}
