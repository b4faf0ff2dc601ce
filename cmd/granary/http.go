package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// readiness is what /readyz answers from: the silo's own readiness until
// the process is asked to stop, and the silos it sees against
// -expect-silos.
type readiness struct {
	silo     interface{ Ready() error }
	expected expectedSilos
	stopping atomic.Bool
}

// errProcessStopping is /readyz's reason once a stop signal arrived.
var errProcessStopping = errors.New("stopping: the process was asked to stop")

func (r *readiness) ready() error {
	if r.stopping.Load() {
		return errProcessStopping
	}
	if err := r.silo.Ready(); err != nil {
		return err
	}
	return r.expected.check()
}

// serveReadyz answers 200 "ready" while the silo serves, 503 with the
// reason otherwise.
func (r *readiness) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := r.ready(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: %v\n", err)
		return
	}
	fmt.Fprintln(w, "ready")
}

// serveHealthz answers 200 as long as the process serves HTTP at all.
func serveHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprintln(w, "ok")
}

// newMux routes the HTTP port: the service API under apiPath, health and
// metrics beside it. The profiles are on the admin port (newAdminMux).
func newMux(apiPath string, api http.Handler, ready *readiness, metrics http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(apiPath, api)
	mux.HandleFunc("GET /healthz", serveHealthz)
	mux.HandleFunc("GET /readyz", ready.serveReadyz)
	mux.Handle("GET /metrics", metrics)
	return mux
}

// prometheusMetrics is the meter provider the silo reports to and the
// handler of /metrics: the OpenTelemetry SDK with its Prometheus exporter,
// on a registry of its own beside the Go runtime's and the process's
// collectors.
type prometheusMetrics struct {
	provider *sdkmetric.MeterProvider
	handler  http.Handler
	// silo gathers the silo's own instruments only, without the runtime's
	// and the process's: what the dashboard reads.
	silo prometheus.Gatherer
}

func newPrometheusMetrics() (*prometheusMetrics, error) {
	reg := prometheus.NewRegistry()
	if err := errors.Join(
		reg.Register(collectors.NewGoCollector()),
		reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})),
	); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	siloReg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(siloReg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return &prometheusMetrics{
		provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter)),
		handler:  promhttp.HandlerFor(prometheus.Gatherers{reg, siloReg}, promhttp.HandlerOpts{}),
		silo:     siloReg,
	}, nil
}

// httpPort is the silo's HTTP port, served on a goroutine of its own.
type httpPort struct {
	server *http.Server
	ln     net.Listener
	served chan error // the Serve goroutine's end
}

// The HTTP port's bounds on slow and idle clients: how long a client may
// take to send a request's headers, then the whole request (the API's
// bodies are 64 KiB at most), and how long a keep-alive connection may
// sit idle. None bounds the handler once the request is in: a queued
// acquisition waits as long as its budget says.
const (
	httpReadHeaderTimeout = 10 * time.Second
	httpReadTimeout       = 30 * time.Second
	httpIdleTimeout       = 2 * time.Minute
)

// listenHTTP binds the HTTP port, so that a taken port fails the start
// before the silo starts.
func listenHTTP(addr string, handler http.Handler, tlsConfig *tls.Config, log *slog.Logger) (*httpPort, error) {
	return listenHTTPAs("-http", addr, handler, tlsConfig, log)
}

// listenHTTPAs binds an HTTP port whose errors name the flag that set it;
// with tlsConfig it serves HTTPS only.
func listenHTTPAs(flag, addr string, handler http.Handler, tlsConfig *tls.Config, log *slog.Logger) (*httpPort, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	if tlsConfig != nil {
		// A server adds what HTTP/2 needs to its configuration: the two
		// ports must not share one.
		tlsConfig = tlsConfig.Clone()
		protocols.SetHTTP2(true)
	} else {
		// gRPC without TLS needs HTTP/2 in clear text (h2c) beside HTTP/1.1.
		protocols.SetUnencryptedHTTP2(true)
	}
	return &httpPort{
		server: &http.Server{
			Handler: handler, Protocols: protocols, TLSConfig: tlsConfig,
			ReadHeaderTimeout: httpReadHeaderTimeout, ReadTimeout: httpReadTimeout, IdleTimeout: httpIdleTimeout,
			ErrorLog: slog.NewLogLogger(log.With("component", "http").Handler(), slog.LevelWarn),
		},
		ln: ln, served: make(chan error, 1),
	}, nil
}

// serve serves the port until shutdown.
func (p *httpPort) serve() {
	if p.server.TLSConfig != nil {
		go func() { p.served <- p.server.ServeTLS(p.ln, "", "") }()
		return
	}
	go func() { p.served <- p.server.Serve(p.ln) }()
}

// shutdown stops taking requests and waits, within ctx, for those in
// flight; then it closes what is left and waits for the Serve goroutine.
func (p *httpPort) shutdown(ctx context.Context) error {
	err := p.server.Shutdown(ctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("http: %w", err), p.server.Close())
	}
	if serveErr := <-p.served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, fmt.Errorf("http: %w", serveErr))
	}
	return err
}
