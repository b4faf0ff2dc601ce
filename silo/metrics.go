package silo

import (
	"errors"
	"io"

	"go.opentelemetry.io/otel/metric"

	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/metrics"
)

// WithMeterProvider makes the silo report its metrics through mp, an
// OpenTelemetry meter provider: calls by grain type, method and outcome,
// call durations, activations, the directory, transport traffic and
// rejections, state writes, and the limiters' when grains/ratelimit is
// registered on it (docs/operations.md lists them). Only the call
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

// attachAcquisitions implements the hook through which grains/ratelimit
// reports the limiter instruments beside the silo's own.
func (s *Silo) attachAcquisitions(read func() metrics.Acquisitions) (bool, error) {
	return s.attachMetrics(func(mp metric.MeterProvider, silo string) (io.Closer, error) {
		return metrics.RegisterAcquisitions(mp, silo, read)
	})
}

// attachMetrics registers instruments through register with the silo's
// meter provider, if it has one, and closes them when the silo stops.
func (s *Silo) attachMetrics(register func(mp metric.MeterProvider, silo string) (io.Closer, error)) (bool, error) {
	if s.deps.meters == nil {
		return false, nil
	}
	s.mu.Lock()
	stopped := s.mu.stopped
	s.mu.Unlock()
	if stopped {
		return false, nil
	}
	// Not under s.mu: a collection runs the silo's callback, which takes
	// s.mu, while holding the provider's lock that registering takes.
	c, err := register(s.deps.meters, s.opts.Name)
	if err != nil {
		return true, err
	}
	s.mu.Lock()
	if !s.mu.stopped {
		s.mu.attached = append(s.mu.attached, c)
		c = nil
	}
	s.mu.Unlock()
	if c != nil { // the silo stopped meanwhile
		return false, c.Close()
	}
	return true, nil
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
	st := s.stats()
	st.Gateway.Add(st.ClosedGateway)
	st.Links.Add(st.ClosedLinks)
	view := s.ClusterView()
	return metrics.Stats{
		Host: st.Host, Calls: st.Calls, Gateway: st.Gateway, Clients: st.Clients,
		Links: st.Links, Directory: st.Directory, Flusher: st.Flusher,
		Members: metrics.MemberCounts{
			Joining:      view.Count(cluster.StatusJoining),
			Active:       view.Count(cluster.StatusActive),
			ShuttingDown: view.Count(cluster.StatusShuttingDown),
		},
		Fenced: st.Fence.Fenced, Refused: st.Fence.Refused,
	}
}

// closeMetrics unregisters the silo's instruments, and those attached to
// it, once it has stopped.
func (s *Silo) closeMetrics() {
	s.mu.Lock()
	attached := s.mu.attached
	s.mu.attached = nil
	s.mu.Unlock()
	var errs []error
	if s.metrics != nil {
		errs = append(errs, s.metrics.Close())
	}
	for _, c := range attached {
		errs = append(errs, c.Close())
	}
	if err := errors.Join(errs...); err != nil {
		s.log.Warn("metrics", "err", err)
	}
}
