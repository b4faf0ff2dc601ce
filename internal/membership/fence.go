package membership

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
	"github.com/granary-go/granary/internal/fence"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/proxy"
)

// ErrFenced is wrapped by the error of every grain call the silo refuses
// while the minority fence is up. Package silo exports it, hence its
// text.
var ErrFenced = errors.New("silo: fenced off from the majority of the cluster")

// FenceOptions configure the silo's side of the minority fence, whose
// decisions internal/fence's core makes.
type FenceOptions struct {
	// Disabled turns the fence off.
	Disabled bool
	// MinSilos and Stability are the core's (fence.Options).
	MinSilos  int
	Stability time.Duration
	// Every is how often the core is fed without news: often enough to
	// see the stability period end on time, and to deactivate what a call
	// that raced the fence activated.
	Every time.Duration
}

// Reachability is what the fence watches: the membership, or what a test
// puts in its place.
type Reachability interface {
	Reachability() []cluster.Reachability
	ReachabilityChanged() <-chan struct{}
}

// fenceState is what the silo's calls read of the fence: the refusal,
// and the counters.
type fenceState struct {
	// refusal is the error calls are refused with while the fence is up,
	// nil otherwise: the one atomic load the call path pays.
	refusal atomic.Pointer[error]
	refused atomic.Int64 // calls refused
	// fencings counts the times the fence went up.
	fencings atomic.Int64
	stable   atomic.Pointer[[]string] // the last stable membership
}

// Fenced returns the error grain calls are refused with while the fence
// is up, or nil.
func (w *Wiring) Fenced() error {
	if p := w.fence.refusal.Load(); p != nil {
		return *p
	}
	return nil
}

// Refuse answers req, arriving while the fence is up, with err, and
// counts it.
func (w *Wiring) Refuse(req *host.Request, err error) {
	w.fence.refused.Add(1)
	req.Reply.Reply(req, nil, err)
	req.Release()
}

// FenceStats are the fence's counters.
type FenceStats struct {
	Fenced   bool     // the fence is up
	Fencings int64    // the times it went up
	Refused  int64    // the grain calls refused because of it
	Stable   []string // the last stable membership, sorted
}

// FenceStats returns the fence's counters.
func (w *Wiring) FenceStats() FenceStats {
	f := &w.fence
	st := FenceStats{Fenced: f.refusal.Load() != nil, Fencings: f.fencings.Load(), Refused: f.refused.Load()}
	if p := f.stable.Load(); p != nil {
		st.Stable = *p
	}
	return st
}

// startFence starts watching the membership for the fence, unless it is
// disabled.
func (w *Wiring) startFence(members *cluster.Membership) {
	if w.opts.Fence.Disabled {
		return
	}
	var src Reachability = members
	if w.opts.Reachability != nil {
		src = w.opts.Reachability(w.opts.Self, members)
	}
	_, sub := members.Subscribe()
	if err := w.opts.Go(func(ctx context.Context) { w.watchFence(ctx, src, sub) }); err != nil {
		sub.Close() // stopping already
	}
}

// watchFence feeds the fence's core with what the membership reaches, and
// applies its verdicts, until ctx ends.
func (w *Wiring) watchFence(ctx context.Context, src Reachability, sub *cluster.Subscription) {
	defer sub.Close()
	opts := w.opts.Fence
	core := fence.New(fence.Options{Self: w.opts.Self, MinSilos: opts.MinSilos, Stability: opts.Stability})
	tick := time.NewTicker(opts.Every)
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
			w.opts.Log.Info("fence: this silo reaches a majority of its cluster again; it serves once its directory has caught up",
				slog.Int("reached", st.Reached), slog.String("stable_membership", strings.Join(st.Stable, ",")))
		}
		w.applyFence(st)
		if lifting != nil && w.directoryHealed(lifting.Stable) {
			w.unfence()
			w.opts.Log.Info("fence lifted: this silo reaches a majority of its cluster again and serves",
				slog.Int("reached", lifting.Reached), slog.String("stable_membership", strings.Join(lifting.Stable, ",")))
			lifting = nil
		}
	}
	for {
		now := w.opts.Clock.Now()
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
					verdict(core.Left(w.opts.Clock.Now(), e.Member.ID))
				}
			}
		}
	}
}

// applyFence carries out a verdict of the fence.
func (w *Wiring) applyFence(st fence.Status) {
	f := &w.fence
	if old := f.stable.Load(); old == nil || !slices.Equal(*old, st.Stable) {
		f.stable.Store(&st.Stable)
		w.opts.Log.Debug("fence: stable membership", slog.String("silos", strings.Join(st.Stable, ",")))
	}
	switch {
	case st.Fenced && st.Changed:
		err := fmt.Errorf("%w: silo %s %s", proxy.ErrUnavailable, w.opts.Self, st.Reason)
		refusal := fmt.Errorf("%w: %w", ErrFenced, err)
		f.refusal.Store(&refusal)
		f.fencings.Add(1)
		if w.dir != nil {
			w.dir.Refuse(refusal)
		}
		w.opts.Log.Warn("fenced: this silo cannot reach a majority of its cluster; it refuses grain calls and deactivates its grains until it can",
			slog.String("reason", st.Reason), slog.String("stable_membership", strings.Join(st.Stable, ",")))
		w.deactivateAll()
	case st.Fenced:
		w.deactivateAll() // what a call that raced the fence may have activated
	}
}

// directoryHealed reports whether the silo may serve again after a fence:
// the view it acts on has a majority of the stable membership active, and
// its directory has settled on that view (no range held for a handoff or
// a rebuild, no handoff of its own on the way). Reachability comes back
// before the membership view does: a silo that served at once still had
// its own side's ring, owned every grain, and placed on itself grains the
// majority hosts, a duplicate until the directories merged.
func (w *Wiring) directoryHealed(stable []string) bool {
	v := w.View()
	if !majorityActive(stable, v) {
		return false
	}
	return w.dir == nil || w.dir.Settled(v.Version)
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
func (w *Wiring) unfence() {
	w.fence.refusal.Store(nil)
	if w.dir != nil {
		w.dir.Refuse(nil)
	}
}

// deactivateAll deactivates every activation of the host; each flushes
// its state on the way out.
func (w *Wiring) deactivateAll() {
	h := w.opts.Host()
	if h == nil {
		return
	}
	for _, id := range h.Active() {
		h.Deactivate(id)
	}
}
