package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/granary-go/granary/internal/dashboard"
	"github.com/granary-go/granary/silo"
)

// newDashboard makes the dashboard of s, before s starts: every silo
// answers the other silos' requests for its part, so that any silo's page
// shows the whole cluster, even a silo with no HTTP port. The public
// port's page shows what /cluster and /metrics show; the admin port's
// adds the cluster's hottest limiter keys, which name the callers
// (docs/operations.md, "The dashboard").
func newDashboard(s *silo.Silo, prom *prometheusMetrics) (*dashboard.Dashboard, error) {
	var gatherer prometheus.Gatherer
	if prom != nil {
		gatherer = prom.silo
	}
	return dashboard.New(s, gatherer, dashboard.Options{})
}
