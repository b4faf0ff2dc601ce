package silo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/directory"
	"github.com/granary-go/granary/internal/links"
	"github.com/granary-go/granary/internal/ring"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/placement"
	"github.com/granary-go/granary/proxy"
)

// loadInterval is how often a silo of a cluster publishes its activation
// count for placement (the membership rate-limits it further).
const loadInterval = time.Second

// ErrNotInCluster is returned by what only a silo of a cluster can do.
var ErrNotInCluster = errors.New("silo: not a member of a cluster")

// newDirectory builds this silo's part of the grain directory.
func (s *Silo) newDirectory() *directory.Directory {
	strategies := s.opts.Cluster.Placement
	return directory.New(directory.Options{
		Self:        ring.Silo{ID: s.opts.Name, Generation: s.gen},
		CallTimeout: s.opts.Cluster.DirectoryTimeout,
		HandoffWait: s.opts.Cluster.HandoffWait,
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
	members, err := cluster.New(cluster.Options{
		SiloID: s.opts.Name, Generation: s.gen, Address: address, Gateway: gatewayAddr,
		BindAddress: co.GossipAddress, AdvertiseAddress: co.AdvertiseGossipAddress, Seeds: co.Seeds, Bootstrap: co.Bootstrap,
		ClusterID: s.opts.Security.ClusterID, Secret: s.opts.Security.Secret, Timings: co.Timings,
	}, cluster.WithLogger(s.log))
	if err != nil {
		return fmt.Errorf("silo: membership: %w", err)
	}
	if err := members.Start(ctx); err != nil {
		return fmt.Errorf("silo: join: %w", err)
	}
	s.members = members
	view, sub := members.Subscribe()
	s.applyView(view)
	if err := s.goBackground(func(ctx context.Context) { s.watchMembership(ctx, sub) }); err != nil {
		sub.Close()
		return fmt.Errorf("silo: join: %w", err)
	}
	s.startFence(members)
	if err := members.SetStatus(cluster.StatusActive); err != nil {
		return fmt.Errorf("silo: join: %w", err)
	}
	s.applyView(s.viewWithSelf(cluster.StatusActive))
	peers := make([]string, 0, len(view.Members))
	for _, m := range view.Members {
		if m.ID != s.opts.Name {
			peers = append(peers, m.ID)
		}
	}
	s.log.Info("joined the cluster", slog.String("cluster", s.opts.Security.ClusterID),
		slog.String("gossip", members.GossipAddress()), slog.String("silo_address", address), slog.Any("peers", peers))
	return nil
}

// viewWithSelf is the membership view with this silo's status as it just
// set it: the silo acts on its own announcement at once, before gossip
// brings it back.
func (s *Silo) viewWithSelf(status cluster.Status) cluster.View {
	v := s.members.View()
	members := slices.Clone(v.Members)
	for i := range members {
		if members[i].ID == s.opts.Name {
			members[i].Status = status
		}
	}
	v.Members = members
	return v
}

// watchMembership follows the membership: the directory's view, links to
// silos that joined and left, and this silo's published load.
func (s *Silo) watchMembership(ctx context.Context, sub *cluster.Subscription) {
	defer sub.Close()
	load := time.NewTicker(loadInterval)
	defer load.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-load.C:
			if h := s.host.Load(); h != nil {
				s.members.SetLoad(int64(h.Stats().Active))
			}
			continue
		case _, ok := <-sub.Ready():
			if !ok {
				return
			}
		}
		events, err := sub.Take()
		if err != nil {
			return
		}
		if len(events) == 0 {
			continue
		}
		for _, ev := range events {
			s.log.Info("membership", slog.String("event", ev.Kind.String()), slog.String("peer", ev.Member.ID),
				slog.String("status", ev.Member.Status.String()), slog.Uint64("view", ev.Version))
		}
		s.applyView(s.members.View())
	}
}

// applyView moves the silo to a membership view: the directory takes it,
// links to silos no longer in it close, and links to new silos are dialled
// by the silo the tie-break says dials.
func (s *Silo) applyView(v cluster.View) {
	if s.stoppingCluster() {
		// A leaving silo keeps its own status in the view it gives the
		// directory, whatever gossip says meanwhile.
		for i := range v.Members {
			if v.Members[i].ID == s.opts.Name {
				v.Members[i].Status = cluster.StatusShuttingDown
			}
		}
	}
	s.mu.Lock()
	s.mu.view = v
	s.mu.Unlock()
	s.dir.SetView(v)
	keep := make(map[string]int64, len(v.Members))
	for _, m := range v.Members {
		keep[m.ID] = m.Generation
	}
	s.links.CloseExcept(keep)
	for _, m := range v.Members {
		if m.ID == s.opts.Name || m.ID > s.opts.Name {
			continue // the silo with the smaller name dials
		}
		if _, err := s.links.Link(m.ID); err != nil {
			s.links.LinkLater(m.ID, func(*rpc.Endpoint, error) {})
		}
	}
}

// stoppingCluster reports whether the silo announced that it leaves.
func (s *Silo) stoppingCluster() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.stopped
}

// memberAddress returns the silo-to-silo address of a member of the view.
func (s *Silo) memberAddress(silo string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.mu.view.Member(silo)
	return m.Address, ok && m.Address != ""
}

// announceLeaving starts a graceful leave: the silo tells the cluster it
// is shutting down, so that no new activation is placed on it and its part
// of the directory moves to the others, and hands that part over.
func (s *Silo) announceLeaving(ctx context.Context) {
	if s.members == nil {
		return
	}
	if err := s.members.SetStatus(cluster.StatusShuttingDown); err != nil {
		s.log.Warn("leave: announcing it failed", slog.Any("err", err))
	}
	s.applyView(s.viewWithSelf(cluster.StatusShuttingDown))
	if err := s.dir.Handover(ctx); err != nil {
		s.log.Warn("leave: handing the directory over failed; the new owners rebuild it", slog.Any("err", err))
	}
}

// leaveCluster ends a graceful leave, once the silo's activations are
// gone: it waits for their unregistrations, leaves the membership, and
// closes its links.
func (s *Silo) leaveCluster(ctx context.Context) {
	if s.members != nil {
		if err := s.dir.Wait(ctx); err != nil {
			s.log.Warn("leave: the directory's last requests did not finish", slog.Any("err", err))
		}
		if err := s.members.Stop(ctx); err != nil {
			s.log.Warn("leave: membership", slog.Any("err", err))
		}
		s.log.Info("left the cluster")
	}
	s.unjoin()
}

// unjoin closes the cluster's parts, gracefully or not.
func (s *Silo) unjoin() {
	if s.members != nil {
		s.members.Kill() // a no-op after Stop
	}
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
	if s.members != nil {
		s.members.Kill()
	}
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
	if s.members == nil {
		return cluster.View{}, ErrNotInCluster
	}
	return s.members.View(), nil
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
