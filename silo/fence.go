package silo

import (
	"time"

	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/directory"
	"github.com/granary-go/granary/internal/fence"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/membership"
	"github.com/granary-go/granary/internal/rpc"
)

// ErrFenced is wrapped by Ready's answer, and by the error of every grain
// call the silo refuses, while the minority fence is up: the silo cannot
// reach a majority of the last stable membership of its cluster.
var ErrFenced = membership.ErrFenced

// ErrDeclaredDead is wrapped by Ready's answer, and by the error of every
// grain call the silo refuses, while the death fence is up: another silo
// declared this one dead while it ran, or it did not run for long enough
// for that, and its grains may have been placed elsewhere.
var ErrDeclaredDead = membership.ErrDeclaredDead

// FenceOptions configure a silo's minority fence (docs/cluster.md): a silo
// that cannot reach a majority of the last stable membership of its
// cluster refuses every grain call with proxy.ErrUnavailable, starts no
// activation and deactivates those it has, until it reaches a majority
// again, so that the silos on both sides of a network partition do not
// serve the same grain. The fence trades the minority's availability for
// single activations.
type FenceOptions struct {
	// Disabled turns the minority fence off: a cut-off silo goes on
	// serving what reaches it. The death fence has a switch of its own.
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
	// Death is the death fence, on by default and whether or not the
	// minority fence is disabled.
	Death DeathFenceOptions
}

// DeathFenceOptions configure a silo's death fence (docs/cluster.md): a
// silo that another declared dead while it ran (that silo's view lost it,
// and says so, and since when, when this one probes it), or that finds it
// did not run for Stall (a paused process, a starved scheduler; a machine
// that slept is not seen, the monotonic clock stops with it, and the
// verdict comes), may have had its grains placed anew elsewhere once the
// death's grace (Cluster.DeathGrace) ended. A verdict whose silo takes
// this one back within the grace, as after a death refuted in time, costs
// nothing; otherwise the fence goes up a quarter of the grace before the
// grace ends. It refuses every grain call with proxy.ErrUnavailable and
// ErrDeclaredDead, runs no turn of grain code and deactivates its grains,
// until Hold has passed since the last verdict or stall, no member still
// says it lost the silo, and its directory has settled on its view. A silo
// the others declare dead while it runs serves nothing beside the
// activations placed in its stead. The silos of a cluster are meant to share DeathGrace: a
// silo judges the others' grace by its own.
type DeathFenceOptions struct {
	// Disabled turns the death fence off: a silo declared dead serves
	// what reaches it until it hears the verdict in memberlist's gossip
	// and refutes it.
	Disabled bool
	// Stall is how long the silo may find it did not run before it takes
	// itself for dead. Default DeathGrace plus SuspicionMult-1 (at least one) probe
	// intervals of Cluster.Timings, a little less than the others take to
	// declare a silent silo dead and end its grace: 7 s with the LAN
	// timings, 350 ms with the fast ones. Negative: stalls are not
	// watched, verdicts still are.
	Stall time.Duration
	// Hold is the shortest the fence stays up. Default Stability.
	Hold time.Duration
}

// ensureDefaults fills the fence's zero fields from the cluster's timings
// and its death's grace (already defaulted).
func (f *FenceOptions) ensureDefaults(t cluster.Timings, grace time.Duration) {
	t = timingsOrDefaults(t)
	if f.MinSilos == 0 {
		f.MinSilos = fence.DefaultMinSilos
	}
	if f.Stability == 0 {
		f.Stability = time.Duration(t.SuspicionMult+2) * t.ProbeInterval
	}
	if f.Death.Stall == 0 {
		f.Death.Stall = max(grace, 0) + time.Duration(max(t.SuspicionMult-1, 1))*t.ProbeInterval
	}
	if f.Death.Hold == 0 {
		f.Death.Hold = f.Stability
	}
}

// reachabilitySource is what the fence watches: the membership, or what a
// test puts in its place.
type reachabilitySource = membership.Reachability

// FenceStats are the fence's counters.
type FenceStats struct {
	// Fenced is true while a fence is up.
	Fenced bool
	// Fencings counts the times the minority fence went up since Start.
	Fencings int64
	// Deaths counts the times the death fence went up since Start.
	Deaths int64
	// Verdicts counts the death verdicts heard since Start: other silos
	// saying that their views lost this one. Those whose silo took this
	// one back within the death's grace raised no fence.
	Verdicts int64
	// Refused counts the grain calls refused because of the fences.
	Refused int64
	// Stable is the last stable membership, sorted: the silos whose
	// majority this silo must reach to serve.
	Stable []string
}

// refuse answers req, arriving while the fence is up, with err.
func (s *Silo) refuse(req *host.Request, err error) { s.membership.Refuse(req, err) }

// fencedInbound is the activation host as the silo's connections reach it:
// while the fence is up, it refuses every grain call. Requests to the
// directory go through; it refuses new registrations itself.
type fencedInbound struct {
	*host.Host
	s *Silo
}

// Deliver implements rpc.Inbound.
func (f fencedInbound) Deliver(req *host.Request) {
	if err := f.s.membership.Fenced(); err != nil && req.Target.Type != directory.ServiceType {
		f.s.refuse(req, err)
		return
	}
	f.Host.Deliver(req)
}

// DeliverInline implements rpc.InlineInbound.
func (f fencedInbound) DeliverInline(reqs []*host.Request) (run func()) {
	if f.s.membership.Fenced() == nil {
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
	if s.membership.Fenced() != nil {
		return rpc.WhereDeliver
	}
	return s.router.FromReader(req, whether)
}

// fenced reports whether the silo has a fence: it is in a cluster, and
// one of its fences is on.
func (s *Silo) fenced() bool {
	f := s.opts.Cluster.Fence
	return s.opts.Cluster.Enabled && !(f.Disabled && f.Death.Disabled)
}

// inbound is what the silo's connections deliver requests to: the host,
// behind the fences when the silo has one.
func (s *Silo) inbound(h *host.Host) rpc.Inbound {
	if !s.fenced() {
		return h
	}
	return fencedInbound{Host: h, s: s}
}
