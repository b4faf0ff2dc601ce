package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
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
}

func defineEnvoyFlags(s *settings, f *envoyFlags) {
	s.stringVar(&f.addr, "envoy-rls", "GRANARY_ENVOY_RLS", "none", "where Envoy's rate limit service (gRPC, envoy.service.ratelimit.v3) listens, host:port; none: off")
	s.stringVar(&f.config, "envoy-rls-config", "GRANARY_ENVOY_RLS_CONFIG", "", "the service's limits: an envoyproxy/ratelimit YAML file, or a directory of them")
	s.durationVar(&f.reload, "envoy-rls-reload", "GRANARY_ENVOY_RLS_RELOAD", envoyrls.DefaultReloadInterval, "how often -envoy-rls-config is looked at, and reloaded when it changed (0: never)")
	s.boolVar(&f.headers, "envoy-rls-headers", "GRANARY_ENVOY_RLS_HEADERS", false, "add RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset to every answer")
	s.boolVar(&f.remaining, "envoy-rls-remaining", "GRANARY_ENVOY_RLS_REMAINING", true, "fill limit_remaining of the descriptors within their limit (the limiters' answers carry it; silos that predate it are asked again)")
	s.boolVar(&f.shadow, "envoy-rls-shadow", "GRANARY_ENVOY_RLS_SHADOW", false, "answer OK whatever the limits say (they still count), to try limits out")
}

// check reports the problems of the settings and of the limits file.
func (f *envoyFlags) check() error {
	if err := checkAddress("-envoy-rls", f.addr); err != nil {
		return err
	}
	switch {
	case f.reload < 0:
		return fmt.Errorf("-envoy-rls-reload must not be negative, got %v", f.reload)
	case f.addr == "none":
		return nil
	case f.config == "":
		return fmt.Errorf("-envoy-rls needs -envoy-rls-config, the limits to serve")
	}
	_, err := envoyrls.Load(f.config)
	return err
}

// envoyPort is Envoy's rate limit service on its own gRPC port.
type envoyPort struct {
	ln      net.Listener
	server  *grpc.Server
	watcher *envoyrls.Watcher
	served  chan struct{}
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
	server := grpc.NewServer(
		grpc.MaxRecvMsgSize(envoyMaxMessage),
		grpc.MaxConcurrentStreams(envoyMaxStreams),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 5 * time.Minute}),
	)
	rlsv3.RegisterRateLimitServiceServer(server, service)
	p := &envoyPort{ln: ln, server: server, watcher: w, served: make(chan struct{})}
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
	return "Envoy rate limit service on " + p.ln.Addr().String() + ", "
}
