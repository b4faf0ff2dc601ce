package silo

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/granary-go/granary/internal/directory"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/proxy"
)

// A silo of a cluster serves system services to the other silos over the
// links: the directory, and what internal packages add before it starts
// (the dashboard's statistics). Clients never reach them (rpc.Router).

// peerCaller implements silohost.PeerCaller.
func (s *Silo) peerCaller(ctx context.Context, peer string) (proxy.Caller, error) {
	ep, err := s.links.Ensure(ctx, peer)
	if err != nil {
		return nil, err
	}
	return linkCaller{ep}, nil
}

// serveSystem implements silohost.ServeSystem.
func (s *Silo) serveSystem(serviceType string, serve func(*host.Request)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.mu.starting || s.mu.started || s.mu.stopped:
		return fmt.Errorf("silo: system service %s: %w", serviceType, ErrStarted)
	case serviceType == "" || serve == nil:
		return fmt.Errorf("silo: system service %q: no type or no handler", serviceType)
	case serviceType == directory.ServiceType || s.mu.systems[serviceType] != nil:
		return fmt.Errorf("silo: system service %s is served already", serviceType)
	}
	if s.mu.systems == nil {
		s.mu.systems = map[string]func(*host.Request){}
	}
	s.mu.systems[serviceType] = serve
	return nil
}

// systemServices are the router's system services, by grain type: the
// directory's and those added.
func (s *Silo) systemServices() map[string]func(*host.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := maps.Clone(s.mu.systems)
	if out == nil {
		out = map[string]func(*host.Request){}
	}
	out[directory.ServiceType] = s.dir.Serve
	return out
}

// systemTypes are the system services' grain types, for the interner.
func (s *Silo) systemTypes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(slices.Sorted(maps.Keys(s.mu.systems)), directory.ServiceType)
}
