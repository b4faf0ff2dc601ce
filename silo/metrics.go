package silo

import (
	"go.opentelemetry.io/otel/metric"

	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/metrics"
)

// WithMeterProvider makes the silo report its metrics through mp, an
// OpenTelemetry meter provider: calls by grain type, method and outcome,
// call durations, activations, the directory, transport traffic and
// rejections, state writes (docs/operations.md lists them). Only the call
// durations cost the call path anything (two clock reads and a histogram
// record per call); everything else is read from the counters the silo
// keeps anyway, at each collection. Without it the silo keeps its
// counters (Stats) and reads no clock for calls.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(d *deps) { d.meters = mp } }

// registerMetrics registers the silo's instruments with the meter
// provider it was given, if any.
func (s *Silo) registerMetrics() error {
	if s.deps.meters == nil {
		return nil
	}
	m, err := metrics.Register(s.deps.meters, s.opts.Name, s.metricStats)
	if err != nil {
		return err
	}
	s.metrics = m
	return nil
}

// metricsHostOptions are the host's options for metrics: it times calls
// when the silo has a meter provider.
func (s *Silo) metricsHostOptions() []host.HostOption {
	if s.metrics == nil {
		return nil
	}
	return []host.HostOption{host.WithCallObserver(s.metrics.CallObserver)}
}

// metricStats is what the metrics bridge reads at each collection: the
// silo's counters, with the closed connections' added so that no counter
// goes back.
func (s *Silo) metricStats() metrics.Stats {
	st := s.Stats()
	st.Gateway.Add(st.ClosedGateway)
	st.Links.Add(st.ClosedLinks)
	return metrics.Stats{
		Host: st.Host, Calls: st.Calls, Gateway: st.Gateway, Clients: st.Clients,
		Links: st.Links, Directory: st.Directory, Flusher: st.Flusher,
	}
}

// closeMetrics unregisters the silo's instruments once it has stopped.
func (s *Silo) closeMetrics() {
	if s.metrics != nil {
		if err := s.metrics.Close(); err != nil {
			s.log.Warn("metrics", "err", err)
		}
	}
}
