package silo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/directory"
	"github.com/granary-go/granary/internal/links"
	"github.com/granary-go/granary/internal/membership"
	"github.com/granary-go/granary/internal/ring"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/placement"
	"github.com/granary-go/granary/proxy"
)

// ErrNotInCluster is returned by what only a silo of a cluster can do.
var ErrNotInCluster = errors.New("silo: not a member of a cluster")

// newDirectory builds this silo's part of the grain directory.
func (s *Silo) newDirectory() *directory.Directory {
	strategies := s.opts.Cluster.Placement
	return directory.New(directory.Options{
		Self:        ring.Silo{ID: s.opts.Name, Generation: s.gen},
		CallTimeout: s.opts.Cluster.DirectoryTimeout,
		HandoffWait: s.opts.Cluster.HandoffWait,
		DeathGrace:  max(s.opts.Cluster.DeathGrace, 0),
		Strategy:    func(grainType string) placement.Strategy { return strategies[grainType] },
	}, directoryPeers{s}, directoryHost{s}, s.deps.clock, s.log)
}

// directoryPeers lets the directory call other silos' partitions over
// the links.
type directoryPeers struct{ s *Silo }

func (p directoryPeers) Caller(silo string) (proxy.Caller, error) {
	ctx, cancel := context.WithTimeout(context.Background(), links.DialTimeout)
	defer cancel()
	ep, err := p.s.links.Ensure(ctx, silo)
	if err != nil {
		return nil, err
	}
	return linkCaller{ep}, nil
}

// linkCaller calls over a link with the silo's own response timeout for
// system calls: the directory sets its own per call.
type linkCaller struct{ *rpc.Endpoint }

// directoryHost is what the directory asks of the activation host.
type directoryHost struct{ s *Silo }

func (h directoryHost) Registered() []actor.GrainID {
	if host := h.s.host.Load(); host != nil {
		return host.Registered()
	}
	return nil
}

func (h directoryHost) Deactivate(id actor.GrainID) bool {
	if host := h.s.host.Load(); host != nil {
		return host.Deactivate(id)
	}
	return false
}

// newMembership makes the silo's wiring to its cluster's membership
// (internal/membership); Start joins through it.
func (s *Silo) newMembership() *membership.Wiring {
	fo := s.opts.Cluster.Fence
	// Often enough to see the stability period end on time, and to
	// deactivate what a call that raced the fence activated.
	every := s.opts.Cluster.Timings.ProbeInterval
	if every <= 0 {
		every = cluster.LANTimings().ProbeInterval
	}
	return membership.New(membership.Options{
		Self: s.opts.Name,
		Fence: membership.FenceOptions{Disabled: fo.Disabled, MinSilos: fo.MinSilos, Stability: fo.Stability, Every: every,
			Death: membership.DeathFenceOptions{Disabled: fo.Death.Disabled, Stall: fo.Death.Stall, Hold: fo.Death.Hold,
				Grace: s.opts.Cluster.DeathGrace}},
		Links:        s.links,
		Host:         s.host.Load,
		Go:           s.goBackground,
		Stopping:     s.stoppingCluster,
		Reachability: s.deps.reachability,
		Clock:        s.deps.clock,
		Log:          s.log,
	})
}

// joinCluster listens for other silos, joins the membership through the
// seeds, takes the directory's view, and announces the silo active.
func (s *Silo) joinCluster(ctx context.Context, gateway net.Listener) error {
	co := s.opts.Cluster
	linkListener, err := s.links.Listen(co.SiloAddress)
	if err != nil {
		return fmt.Errorf("silo: listen for silos: %w", err)
	}
	address := co.AdvertiseAddress
	if address == "" {
		address = linkListener.Addr().String()
	}
	gatewayAddr := ""
	if gateway != nil {
		gatewayAddr = gateway.Addr().String()
	}
	return s.membership.Join(ctx, s.dir, cluster.Options{
		SiloID: s.opts.Name, Generation: s.gen, Address: address, Gateway: gatewayAddr,
		BindAddress: co.GossipAddress, AdvertiseAddress: co.AdvertiseGossipAddress, Seeds: co.Seeds, Bootstrap: co.Bootstrap,
		ClusterID: s.opts.Security.ClusterID, Secret: s.opts.Security.Secret, Timings: co.Timings,
	})
}

// stoppingCluster reports whether the silo announced that it leaves.
func (s *Silo) stoppingCluster() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.stopped
}

// leaveCluster ends a graceful leave, once the silo's activations are
// gone: it waits for their unregistrations, leaves the membership, and
// closes its links.
func (s *Silo) leaveCluster(ctx context.Context) {
	s.membership.Leave(ctx)
	s.unjoin()
}

// unjoin closes the cluster's parts, gracefully or not.
func (s *Silo) unjoin() {
	s.membership.Kill() // a no-op after Leave
	s.links.CloseListener()
	s.links.CloseAll()
	s.stopBackground()
	if s.dir != nil {
		s.dir.Close()
	}
}

// kill stops the silo as a crash would, for tests: its membership and its
// links die without a goodbye, and nothing more reaches its activations.
// The activations are then stopped without waiting; what they write on
// the way out is up to the store.
func (s *Silo) kill() {
	s.mu.Lock()
	s.mu.stopped = true
	s.gateway.StopAccepting()
	s.mu.Unlock()
	s.membership.Kill()
	s.gateway.Kill()
	s.unjoin()
	s.caller.Close()
	if h := s.host.Load(); h != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = h.Stop(ctx)
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = s.flusher.Stop(ctx)
	cancel()
}

// Members returns the silo's membership view: every silo of the cluster,
// this one included, as this silo sees them. It fails with
// ErrNotInCluster for a silo that stands alone.
func (s *Silo) Members() (cluster.View, error) {
	members := s.membership.Members()
	if members == nil {
		return cluster.View{}, ErrNotInCluster
	}
	return members.View(), nil
}

// Locate returns the silo that holds the grain's activation, asking the
// grain directory; found is false when the grain has no activation. A
// silo that stands alone answers from its own activations.
func (s *Silo) Locate(ctx context.Context, id actor.GrainID) (silo string, found bool, err error) {
	h := s.host.Load()
	if h == nil {
		return "", false, ErrNotStarted
	}
	if h.IsActive(id) {
		return s.opts.Name, true, nil
	}
	if s.dir == nil {
		return "", false, nil
	}
	return s.dir.Find(ctx, id)
}
