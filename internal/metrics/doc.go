// Package metrics is the bridge between a silo's counters and the
// OpenTelemetry metric API. It uses the API only, never the SDK: whoever
// runs the silo chooses the provider and the exporter (the granary binary
// uses the SDK with the Prometheus exporter).
//
// Almost every instrument is asynchronous: at each collection the bridge
// reads the counters the runtime keeps anyway (silo.Stats: the host, the
// gateway's and the links' endpoints, the directory, the flusher), so the
// call path gains nothing from being observed. The one synchronous
// instrument, the call duration histogram, records only when the silo was
// given a meter provider; without one the host reads no clock for calls.
//
// The package is internal because nobody needs to call it: a program that
// hosts a silo passes silo.WithMeterProvider, and the silo registers here.
package metrics
