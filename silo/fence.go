package silo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/directory"
	"github.com/granary-go/granary/internal/fence"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/proxy"
)

// ErrFenced is wrapped by Ready's answer, and by the error of every grain
// call the silo refuses, while the minority fence is up: the silo cannot
// reach a majority of the last stable membership of its cluster.
var ErrFenced = errors.New("silo: fenced off from the majority of the cluster")

// FenceOptions configure a silo's minority fence (docs/cluster.md): a silo
// that cannot reach a majority of the last stable membership of its
// cluster refuses every grain call with proxy.ErrUnavailable, starts no
// activation and deactivates those it has, until it reaches a majority
// again, so that the silos on both sides of a network partition do not
// serve the same grain. The fence trades the minority's availability for
// single activations.
type FenceOptions struct {
	// Disabled turns the fence off: a cut-off silo goes on serving what
	// reaches it.
	Disabled bool
	// MinSilos is the smallest stable membership in which the fence acts;
	// in smaller clusters a silo never fences. Default 3. With 2, each
	// silo of a pair fences when it loses the other, a crash included.
	MinSilos int
	// Stability is how long the reachable silos must stay the same, while
	// a majority is in reach, before they become the stable membership:
	// how long after a crash the survivors stop counting the dead silo.
	// Default (SuspicionMult+2) probe intervals of Cluster.Timings, a bit
	// longer than memberlist takes to declare a silo dead: 6 s with the
	// LAN timings, 300 ms with the fast ones.
	Stability time.Duration
}

// ensureDefaults fills the fence's zero fields from the cluster's timings.
func (f *FenceOptions) ensureDefaults(t cluster.Timings) {
	if f.MinSilos == 0 {
		f.MinSilos = fence.DefaultMinSilos
	}
	if f.Stability == 0 {
		co := cluster.Options{Timings: t}
		co.EnsureDefaults()
		f.Stability = time.Duration(co.Timings.SuspicionMult+2) * co.Timings.ProbeInterval
	}
}

// reachabilitySource is what the fence watches: the membership, or what a
// test puts in its place.
type reachabilitySource interface {
	Reachability() []cluster.Reachability
	ReachabilityChanged() <-chan struct{}
}

// siloFence is the silo's side of the fence: the core, the goroutine that
// feeds it, and the refusal every call checks.
type siloFence struct {
	// refusal is the error calls are refused with while the fence is up,
	// nil otherwise: the one atomic load the call path pays.
	refusal atomic.Pointer[error]
	refused atomic.Int64 // calls refused
	// fencings counts the times the fence went up.
	fencings atomic.Int64
	stable   atomic.Pointer[[]string] // the last stable membership
}

// fenced returns the error calls are refused with, or nil.
func (f *siloFence) fenced() error {
	if p := f.refusal.Load(); p != nil {
		return *p
	}
	return nil
}

// FenceStats are the fence's counters.
type FenceStats struct {
	// Fenced is true while the fence is up.
	Fenced bool
	// Fencings counts the times the fence went up since Start.
	Fencings int64
	// Refused counts the grain calls refused because of it.
	Refused int64
	// Stable is the last stable membership, sorted: the silos whose
	// majority this silo must reach to serve.
	Stable []string
}

func (f *siloFence) stats() FenceStats {
	st := FenceStats{Fenced: f.refusal.Load() != nil, Fencings: f.fencings.Load(), Refused: f.refused.Load()}
	if p := f.stable.Load(); p != nil {
		st.Stable = *p
	}
	return st
}

// refuse answers req, arriving while the fence is up, with err.
func (s *Silo) refuse(req *host.Request, err error) {
	s.fence.refused.Add(1)
	req.Reply.Reply(req, nil, err)
	req.Release()
}

// fencedInbound is the activation host as the silo's connections reach it:
// while the fence is up, it refuses every grain call. Requests to the
// directory go through; it refuses new registrations itself.
type fencedInbound struct {
	*host.Host
	s *Silo
}

// Deliver implements rpc.Inbound.
func (f fencedInbound) Deliver(req *host.Request) {
	if err := f.s.fence.fenced(); err != nil && req.Target.Type != directory.ServiceType {
		f.s.refuse(req, err)
		return
	}
	f.Host.Deliver(req)
}

// DeliverInline implements rpc.InlineInbound.
func (f fencedInbound) DeliverInline(reqs []*host.Request) (run func()) {
	if f.s.fence.refusal.Load() == nil {
		return f.Host.DeliverInline(reqs)
	}
	for _, req := range reqs {
		f.Deliver(req)
	}
	return nil
}

// readerRoute is the router's FromReader behind the fence: while it is
// up, every request goes the usual way, to be refused there.
func (s *Silo) readerRoute(req *host.Request, whether bool) rpc.Where {
	if s.fence.refusal.Load() != nil {
		return rpc.WhereDeliver
	}
	return s.router.FromReader(req, whether)
}

// watchFence feeds the fence's core with what the membership reaches, and
// applies its verdicts, until ctx ends.
func (s *Silo) watchFence(ctx context.Context, src reachabilitySource, sub *cluster.Subscription) {
	defer sub.Close()
	opts := s.opts.Cluster.Fence
	core := fence.New(fence.Options{Self: s.opts.Name, MinSilos: opts.MinSilos, Stability: opts.Stability})
	// Often enough to see the stability period end on time, and to
	// deactivate what a call that raced the fence activated.
	every := s.opts.Cluster.Timings.ProbeInterval
	if every <= 0 {
		every = cluster.LANTimings().ProbeInterval
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var obs []fence.Observation
	// lifting is a lift the core decided that waits for the directory: the
	// silo reaches a majority again, but serves only once the view it acts
	// on has that majority and its directory has settled on it.
	var lifting *fence.Status
	verdict := func(st fence.Status) {
		switch {
		case st.Fenced:
			lifting = nil
		case st.Changed:
			lifting = &st
			s.log.Info("fence: this silo reaches a majority of its cluster again; it serves once its directory has caught up",
				slog.Int("reached", st.Reached), slog.String("stable_membership", strings.Join(st.Stable, ",")))
		}
		s.applyFence(st)
		if lifting != nil && s.directoryHealed(lifting.Stable) {
			s.unfence()
			s.log.Info("fence lifted: this silo reaches a majority of its cluster again and serves",
				slog.Int("reached", lifting.Reached), slog.String("stable_membership", strings.Join(lifting.Stable, ",")))
			lifting = nil
		}
	}
	for {
		now := s.deps.clock.Now()
		obs = obs[:0]
		for _, r := range src.Reachability() {
			obs = append(obs, fence.Observation{ID: r.ID, Reachable: r.Reachable})
		}
		verdict(core.Observe(now, obs))
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-src.ReachabilityChanged():
		case _, ok := <-sub.Ready():
			if !ok {
				return
			}
			events, err := sub.Take()
			if err != nil {
				return
			}
			for _, e := range events {
				if e.Kind == cluster.EventLeft {
					verdict(core.Left(s.deps.clock.Now(), e.Member.ID))
				}
			}
		}
	}
}

// applyFence carries out a verdict of the fence.
func (s *Silo) applyFence(st fence.Status) {
	if old := s.fence.stable.Load(); old == nil || !slices.Equal(*old, st.Stable) {
		s.fence.stable.Store(&st.Stable)
		s.log.Debug("fence: stable membership", slog.String("silos", strings.Join(st.Stable, ",")))
	}
	switch {
	case st.Fenced && st.Changed:
		err := fmt.Errorf("%w: silo %s %s", proxy.ErrUnavailable, s.opts.Name, st.Reason)
		refusal := fmt.Errorf("%w: %w", ErrFenced, err)
		s.fence.refusal.Store(&refusal)
		s.fence.fencings.Add(1)
		if s.dir != nil {
			s.dir.Refuse(refusal)
		}
		s.log.Warn("fenced: this silo cannot reach a majority of its cluster; it refuses grain calls and deactivates its grains until it can",
			slog.String("reason", st.Reason), slog.String("stable_membership", strings.Join(st.Stable, ",")))
		s.deactivateAll()
	case st.Fenced:
		s.deactivateAll() // what a call that raced the fence may have activated
	}
}

// directoryHealed reports whether the silo may serve again after a fence:
// the view it acts on has a majority of the stable membership active, and
// its directory has settled on that view (no range held for a handoff or
// a rebuild, no handoff of its own on the way). Reachability comes back
// before the membership view does: a silo that served at once still had
// its own side's ring, owned every grain, and placed on itself grains the
// majority hosts, a duplicate until the directories merged.
func (s *Silo) directoryHealed(stable []string) bool {
	s.mu.Lock()
	v := s.mu.view
	s.mu.Unlock()
	if !majorityActive(stable, v) {
		return false
	}
	return s.dir == nil || s.dir.Settled(v.Version)
}

// majorityActive reports whether a strict majority of the silos in stable
// are active in v.
func majorityActive(stable []string, v cluster.View) bool {
	n := 0
	for _, id := range stable {
		if m, ok := v.Member(id); ok && m.Status == cluster.StatusActive {
			n++
		}
	}
	return n > len(stable)/2
}

// unfence lets calls and registrations in again.
func (s *Silo) unfence() {
	s.fence.refusal.Store(nil)
	if s.dir != nil {
		s.dir.Refuse(nil)
	}
}

// deactivateAll deactivates every activation of the host; each flushes
// its state on the way out.
func (s *Silo) deactivateAll() {
	h := s.host.Load()
	if h == nil {
		return
	}
	for _, id := range h.Active() {
		h.Deactivate(id)
	}
}

// inbound is what the silo's connections deliver requests to: the host,
// behind the fence when the silo has one.
func (s *Silo) inbound(h *host.Host) rpc.Inbound {
	if !s.opts.Cluster.Enabled || s.opts.Cluster.Fence.Disabled {
		return h
	}
	return fencedInbound{Host: h, s: s}
}

// startFence starts watching the membership for the fence, unless it is
// disabled.
func (s *Silo) startFence(members *cluster.Membership) {
	if s.opts.Cluster.Fence.Disabled {
		return
	}
	var src reachabilitySource = members
	if s.deps.reachability != nil {
		src = s.deps.reachability(s.opts.Name, members)
	}
	_, sub := members.Subscribe()
	if err := s.goBackground(func(ctx context.Context) { s.watchFence(ctx, src, sub) }); err != nil {
		sub.Close() // stopping already
	}
}
