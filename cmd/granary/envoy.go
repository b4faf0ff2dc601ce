package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/granary-go/granary/internal/envoyrls"
	"github.com/granary-go/granary/proxy"
)

// envoyFlags are the settings of Envoy's rate limit service (docs/envoy.md).
type envoyFlags struct {
	addr      string
	config    string
	reload    time.Duration
	headers   bool
	remaining bool
	shadow    bool

	tlsCert, tlsKey, clientCA string
	tls                       *tls.Config // built by check; nil: clear text
}

func defineEnvoyFlags(s *settings, f *envoyFlags) {
	s.stringVar(&f.addr, "envoy-rls", "GRANARY_ENVOY_RLS", "none", "where Envoy's rate limit service (gRPC, envoy.service.ratelimit.v3) listens, host:port; none: off")
	s.stringVar(&f.config, "envoy-rls-config", "GRANARY_ENVOY_RLS_CONFIG", "", "the service's limits: an envoyproxy/ratelimit YAML file, or a directory of them")
	s.durationVar(&f.reload, "envoy-rls-reload", "GRANARY_ENVOY_RLS_RELOAD", envoyrls.DefaultReloadInterval, "how often -envoy-rls-config is looked at, and reloaded when it changed (0: never)")
	s.boolVar(&f.headers, "envoy-rls-headers", "GRANARY_ENVOY_RLS_HEADERS", false, "add RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset to every answer")
	s.boolVar(&f.remaining, "envoy-rls-remaining", "GRANARY_ENVOY_RLS_REMAINING", true, "fill limit_remaining of the descriptors within their limit (the limiters' answers carry it; silos that predate it are asked again)")
	s.boolVar(&f.shadow, "envoy-rls-shadow", "GRANARY_ENVOY_RLS_SHADOW", false, "answer OK whatever the limits say (they still count), to try limits out")
	s.stringVar(&f.tlsCert, "envoy-rls-tls-cert", "GRANARY_ENVOY_RLS_TLS_CERT", "", "the certificate (PEM) of the Envoy port: it then serves gRPC over TLS only (may be -http-tls-cert's file)")
	s.stringVar(&f.tlsKey, "envoy-rls-tls-key", "GRANARY_ENVOY_RLS_TLS_KEY", "", "the key of -envoy-rls-tls-cert (PEM)")
	s.stringVar(&f.clientCA, "envoy-rls-client-ca", "GRANARY_ENVOY_RLS_CLIENT_CA", "", "the CA (PEM) of the Envoys' client certificates: with it the Envoy port answers only clients that show a certificate it signed (mutual TLS)")
}

// check reports the problems of the settings and of the limits file, all
// of them, and builds the port's TLS.
func (f *envoyFlags) check() error {
	if err := checkAddress("-envoy-rls", f.addr); err != nil {
		return err
	}
	var errs []error
	switch {
	case f.reload < 0:
		errs = append(errs, fmt.Errorf("-envoy-rls-reload must not be negative, got %v", f.reload))
	case f.addr == "none":
	case f.config == "":
		errs = append(errs, fmt.Errorf("-envoy-rls needs -envoy-rls-config, the limits to serve"))
	default:
		if _, err := envoyrls.Load(f.config); err != nil {
			errs = append(errs, err)
		}
	}
	if err := f.checkTLS(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkTLS builds the port's TLS from its flags: a certificate and key,
// and with a client CA, certificates required of every client.
func (f *envoyFlags) checkTLS() error {
	switch {
	case f.tlsCert == "" && f.tlsKey == "" && f.clientCA == "":
		return nil
	case f.addr == "none":
		return errors.New("-envoy-rls-tls-cert, -envoy-rls-tls-key and -envoy-rls-client-ca need -envoy-rls")
	case f.tlsCert == "" || f.tlsKey == "":
		return errors.New("-envoy-rls-tls-cert and -envoy-rls-tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
	if err != nil {
		return fmt.Errorf("-envoy-rls-tls-cert: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.clientCA != "" {
		pool, err := readCertPool("-envoy-rls-client-ca", f.clientCA)
		if err != nil {
			return err
		}
		// The port has no rights to grant: a certificate is what lets an
		// Envoy in, so one is required, not merely verified if given.
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, pool
	}
	f.tls = cfg
	return nil
}

// envoyPort is Envoy's rate limit service on its own gRPC port.
type envoyPort struct {
	ln      net.Listener
	server  *grpc.Server
	watcher *envoyrls.Watcher
	served  chan struct{}
	tls     bool
}

// Bounds of the gRPC port: Envoy's requests are a few hundred bytes, and
// its connections are long-lived.
const (
	envoyMaxMessage = 64 << 10
	envoyMaxStreams = 1024
)

// listenEnvoy binds the port and loads the limits; nil when the service
// is off.
func listenEnvoy(f *envoyFlags, caller proxy.Caller, log *slog.Logger) (*envoyPort, error) {
	if f.addr == "none" {
		return nil, nil
	}
	service := envoyrls.NewServer(caller, envoyrls.Options{ResponseHeaders: f.headers, SkipRemaining: !f.remaining, ShadowMode: f.shadow})
	w := envoyrls.NewWatcher(f.config, service, f.reload, envoyrls.WithLogger(log.With("component", "envoy-rls")))
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("-envoy-rls-config: %w", err)
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		w.Stop()
		return nil, fmt.Errorf("-envoy-rls: %w", err)
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(envoyMaxMessage),
		grpc.MaxConcurrentStreams(envoyMaxStreams),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 5 * time.Minute}),
	}
	if f.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(f.tls)))
	}
	server := grpc.NewServer(opts...)
	rlsv3.RegisterRateLimitServiceServer(server, service)
	p := &envoyPort{ln: ln, server: server, watcher: w, served: make(chan struct{}), tls: f.tls != nil}
	go func() {
		defer close(p.served)
		if err := server.Serve(ln); err != nil {
			log.Error("envoy rate limit service stopped", "err", err)
		}
	}()
	return p, nil
}

// shutdown drains the port within ctx, then closes what is left. It does
// nothing on a nil port, so that callers need not ask.
func (p *envoyPort) shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	p.watcher.Stop()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		p.server.GracefulStop()
	}()
	select {
	case <-drained:
	case <-ctx.Done():
		p.server.Stop()
		<-drained
	}
	<-p.served
	return nil
}

// describeEnvoy says where the service listens, for the startup line.
func describeEnvoy(p *envoyPort) string {
	if p == nil {
		return ""
	}
	if p.tls {
		return "Envoy rate limit service on " + p.ln.Addr().String() + " (TLS), "
	}
	return "Envoy rate limit service on " + p.ln.Addr().String() + ", "
}
