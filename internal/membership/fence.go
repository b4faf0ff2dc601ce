package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
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

// ErrDeclaredDead is wrapped by the error of every grain call the silo
// refuses while the death fence is up. Package silo exports it, hence its
// text.
var ErrDeclaredDead = errors.New("silo: taken for dead by the cluster")

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
	// Death is the death fence, which acts whether or not the minority
	// fence is disabled.
	Death DeathFenceOptions
}

// DeathFenceOptions configure the death fence: a silo that another
// declared dead while it ran (a death verdict of its probes) and did not
// take back within the death's grace, or that finds it did not run for
// Stall (long enough for the others to declare it dead and end its
// grace), may have had its grains placed anew elsewhere. It refuses grain
// calls and deactivates its grains, and serves again once Hold has passed
// since the last verdict or stall, no member still says it lost the silo,
// and its directory has settled.
type DeathFenceOptions struct {
	// Disabled turns the death fence off.
	Disabled bool
	// Stall is the longest the silo may find it did not run without
	// taking itself for dead; zero or less: stalls are not watched.
	Stall time.Duration
	// Hold is the shortest the fence stays up.
	Hold time.Duration
	// Grace is the cluster's DeathGrace: how long a silo that lost this
	// one keeps its grains from being placed elsewhere. A verdict raises
	// the fence once its age nears Grace, unless its declarer has taken
	// the silo back by then; zero or less: at once.
	Grace time.Duration
}

// Reachability is what the fences watch: the membership, or what a test
// puts in its place.
type Reachability interface {
	Reachability() []cluster.Reachability
	ReachabilityChanged() <-chan struct{}
	DeathVerdicts() <-chan cluster.DeathVerdict
}

// fenceState is what the silo's calls read of the fences: the refusal,
// and the counters.
type fenceState struct {
	// refusal is the error calls are refused with while a fence is up,
	// nil otherwise: the one atomic load the call path pays. It is the
	// minority fence's refusal if that fence is up, else the death
	// fence's.
	refusal atomic.Pointer[error]
	refused atomic.Int64 // calls refused
	// fencings counts the times the minority fence went up, deaths the
	// times the death fence did, verdicts the death verdicts heard.
	fencings, deaths, verdicts atomic.Int64
	stable                     atomic.Pointer[[]string] // the last stable membership
	// ran is when the watch last ran, on the elapsed clock: the death
	// fence's watch of stalls.
	ran atomic.Int64
	// elapsed is the death fence's clock: the monotonic time since the
	// wiring was made, real whatever the silo's clock, since the others
	// declare a silent silo dead in real time and a test's fake clock
	// jumps. It reads the monotonic clock once; time.Now reads two.
	elapsed  func() time.Duration
	watching atomic.Bool   // ran is kept: the watch runs
	raised   chan struct{} // cap 1: the death fence went up
	// due is the earliest pending death verdict, nil for none.
	due atomic.Pointer[verdictDue]

	mu struct {
		sync.Mutex
		minority, death error         // each fence's refusal while it is up
		deathSince      time.Duration // on the elapsed clock
	}
}

// refuseLocked publishes the refusal of the fences that are up, to calls
// and to the directory. f.mu must be held.
func (w *Wiring) refuseLocked() {
	f := &w.fence
	err := f.mu.minority
	if err == nil {
		err = f.mu.death
	}
	if err == nil {
		f.refusal.Store(nil)
	} else {
		f.refusal.Store(&err)
	}
	if w.dir != nil {
		w.dir.Refuse(err)
	}
}

// Admit returns the error a grain turn is refused with, or nil: the
// activation host asks it before each batch of requests. It is the fences'
// refusal; and, when the death fence watches stalls or waits for a
// verdict's grace, Admit looks for a stall or a verdict due itself, since
// after a pause the calls that waited may run before the watch does. It
// only reads what the watch writes.
func (w *Wiring) Admit() error {
	if p := w.fence.refusal.Load(); p != nil {
		return *p
	}
	due := w.fence.due.Load()
	watching := w.fence.watching.Load()
	if !watching && due == nil {
		return nil
	}
	now := w.fence.elapsed()
	if watching {
		w.stalled(now)
	}
	if due != nil && now >= due.at {
		w.raiseDeath(now, due.reason())
	}
	// Again: a watch that raised the fence between the first load and
	// the read of ran has stored a newer time, which hides the stall.
	return w.Fenced()
}

// stalled raises the death fence if the watch last ran longer than the
// fence's Stall before now.
func (w *Wiring) stalled(now time.Duration) {
	if gap := now - time.Duration(w.fence.ran.Load()); gap > w.opts.Fence.Death.Stall {
		w.raiseDeath(now, fmt.Sprintf("did not run for %v, long enough for the others to declare it dead and place its grains anew",
			gap.Round(time.Millisecond)))
	}
}

// beat is the watch's: it looks for a stall, then records that the silo
// runs at now. The fence goes up before the newer time is seen, so that a
// call that finds the newer time finds the fence too.
func (w *Wiring) beat(now time.Duration) {
	w.stalled(now)
	w.fence.ran.Store(int64(now))
}

// raiseDeath raises the death fence, or keeps it up from now, and has the
// watch deactivate the grains.
func (w *Wiring) raiseDeath(now time.Duration, reason string) {
	f := &w.fence
	f.mu.Lock()
	raised := f.mu.death == nil
	if raised {
		err := fmt.Errorf("%w: silo %s %s", proxy.ErrUnavailable, w.opts.Self, reason)
		f.mu.death = fmt.Errorf("%w: %w", ErrDeclaredDead, err)
		f.deaths.Add(1)
		w.refuseLocked()
	}
	f.mu.deathSince = now
	f.mu.Unlock()
	if raised {
		w.opts.Log.Warn("death fence: this silo may have been taken for dead and its grains placed elsewhere; it refuses grain calls and deactivates its grains until its cluster has taken it back",
			slog.String("reason", reason))
		// The watch deactivates the grains, not a call that found the
		// stall; the host refuses their turns meanwhile.
		select {
		case f.raised <- struct{}{}:
		default:
		}
	}
}

// verdictMargin is how long before a death verdict's grace ends the
// fence goes up: the verdict's age bounds its own delays, and Admit sees
// a verdict due without the watch, so this covers the turns already
// running and a pause of less than Stall.
func verdictMargin(grace time.Duration) time.Duration { return grace / 4 }

// pendingVerdict is a death verdict heard whose grace has not ended yet.
type pendingVerdict struct {
	due   time.Duration // when it raises the fence, on the elapsed clock
	round uint64        // the probe round the declarer answered
	// back: the declarer took the silo back since. It is kept until the
	// grace it dates from is over, so that a verdict of the same declarer
	// that follows is dated from this one: the declarer's directory may
	// not have seen the silo back in between, and its grace runs from the
	// first loss.
	back bool
}

// graceOver reports whether the grace that v's due time was drawn from
// is over at now: due is a margin before it.
func (v *pendingVerdict) graceOver(now, grace time.Duration) bool {
	return now >= v.due+verdictMargin(grace)
}

// pendingVerdicts are the death verdicts waiting for their grace, by
// declarer. Only the watch uses them.
type pendingVerdicts map[string]*pendingVerdict

// verdictDue is when a pending verdict falls due, on the elapsed clock,
// and whose it is.
type verdictDue struct {
	at time.Duration
	by string
}

func (d *verdictDue) reason() string {
	return "was declared dead by " + d.by + " while it ran, and not taken back within the death's grace"
}

// heard takes verdict v in at now: it raises the fence at once if the
// grace has ended or is about to, or else waits for it.
func (w *Wiring) heard(p pendingVerdicts, v cluster.DeathVerdict, now time.Duration) {
	w.fence.verdicts.Add(1)
	age := v.Age
	if !v.At.IsZero() {
		// The time the verdict waited for the watch: a silo's membership
		// runs on the real clock.
		if wait := time.Since(v.At); wait > 0 && age <= math.MaxInt64-wait {
			age += wait
		}
	}
	grace := w.opts.Fence.Death.Grace
	left := grace - verdictMargin(grace)
	if grace <= 0 || age >= left {
		w.raiseDeath(now, fmt.Sprintf("was declared dead by %s while it ran, %v ago, past the grace of %v", v.By, ageString(age), grace))
		return
	}
	due := now + left - age
	if old := p[v.By]; old != nil && !old.graceOver(now, grace) {
		due = min(due, old.due)
	}
	p[v.By] = &pendingVerdict{due: due, round: v.Round}
	w.opts.Log.Info("death fence: declared dead by another silo while it ran; this silo fences unless taken back within the death's grace",
		slog.String("declarer", v.By), slog.Duration("age", age), slog.Duration("fences_in", due-now))
}

// settle raises the fence for each pending verdict that is due, and marks
// those whose declarer took the silo back; it publishes the next due to
// Admit, and returns when it is, zero for none.
func (w *Wiring) settle(p pendingVerdicts, now time.Duration, src Reachability) time.Duration {
	next := w.nextDue(p, now, src)
	if old := w.fence.due.Load(); next == nil || old == nil || *old != *next {
		w.fence.due.Store(next)
	}
	if next == nil {
		return 0
	}
	return next.at
}

func (w *Wiring) nextDue(p pendingVerdicts, now time.Duration, src Reachability) (next *verdictDue) {
	if len(p) == 0 {
		return nil
	}
	// Taken back is an answer to a later round than the verdict's: a
	// declarer that is gone from the view, or back in it but silent, has
	// not.
	acked := map[string]uint64{}
	for _, r := range src.Reachability() {
		acked[r.ID] = r.Acked
	}
	for by, v := range p {
		switch {
		case v.back:
			if v.graceOver(now, w.opts.Fence.Death.Grace) {
				delete(p, by)
			}
		case now >= v.due:
			// Due first: a take-back the watch sees only now may have
			// come after the grace.
			delete(p, by)
			w.raiseDeath(now, (&verdictDue{by: by}).reason())
		case acked[by] > v.round:
			v.back = true
			w.opts.Log.Info("death fence: taken back within the death's grace; no fence", slog.String("declarer", by))
		case next == nil || v.due < next.at:
			next = &verdictDue{at: v.due, by: by}
		}
	}
	return next
}

// ageString prints a verdict's age, which may be unknown.
func ageString(age time.Duration) string {
	if age == time.Duration(math.MaxInt64) {
		return "long"
	}
	return age.Round(time.Millisecond).String()
}

// liftDeath lifts the death fence once Hold has passed since it was last
// raised, no member says it lost the silo, and the directory has settled
// on the view; it reports whether the fence is down.
func (w *Wiring) liftDeath(now time.Duration, src Reachability) bool {
	f := &w.fence
	f.mu.Lock()
	up, since := f.mu.death != nil, f.mu.deathSince
	f.mu.Unlock()
	if !up {
		return true
	}
	if now-since < w.opts.Fence.Death.Hold {
		return false
	}
	for _, r := range src.Reachability() {
		if r.SaysDead {
			return false
		}
	}
	v := w.View()
	if self, ok := v.Member(w.opts.Self); !ok || self.Status != cluster.StatusActive || (w.dir != nil && !w.dir.Settled(v.Version)) {
		return false
	}
	f.mu.Lock()
	f.mu.death = nil
	w.refuseLocked()
	f.mu.Unlock()
	w.opts.Log.Info("death fence lifted: the cluster has taken this silo back, and it serves")
	return true
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
	Fenced   bool     // a fence is up
	Fencings int64    // the times the minority fence went up
	Deaths   int64    // the times the death fence went up
	Verdicts int64    // the death verdicts heard
	Refused  int64    // the grain calls refused because of the fences
	Stable   []string // the last stable membership, sorted
}

// FenceStats returns the fence's counters.
func (w *Wiring) FenceStats() FenceStats {
	f := &w.fence
	st := FenceStats{Fenced: f.refusal.Load() != nil, Fencings: f.fencings.Load(), Deaths: f.deaths.Load(), Verdicts: f.verdicts.Load(), Refused: f.refused.Load()}
	if p := f.stable.Load(); p != nil {
		st.Stable = *p
	}
	return st
}

// startFence starts watching the membership for the fences, unless both
// are disabled.
func (w *Wiring) startFence(members *cluster.Membership) {
	if w.opts.Fence.Disabled && w.opts.Fence.Death.Disabled {
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

// watchFence feeds the minority fence's core with what the membership
// reaches, and applies its verdicts; it raises the death fence on a death
// verdict or a stall, and lifts it; until ctx ends.
func (w *Wiring) watchFence(ctx context.Context, src Reachability, sub *cluster.Subscription) {
	defer sub.Close()
	opts := w.opts.Fence
	var core *fence.Fence
	if !opts.Disabled {
		core = fence.New(fence.Options{Self: w.opts.Self, MinSilos: opts.MinSilos, Stability: opts.Stability})
	}
	death := !opts.Death.Disabled
	if death && opts.Death.Stall > 0 {
		w.fence.ran.Store(int64(w.fence.elapsed()))
		w.fence.watching.Store(true)
		defer w.fence.watching.Store(false) // a stopping silo's calls are no stall
	}
	if death {
		defer w.fence.due.Store(nil) // nor does a stopping silo wait for verdicts
	}
	var verdicts <-chan cluster.DeathVerdict
	if death {
		verdicts = src.DeathVerdicts()
	}
	pending := pendingVerdicts{}
	// due wakes the watch when a pending verdict falls due, sooner than a
	// tick might.
	due := time.NewTimer(time.Hour)
	due.Stop()
	defer due.Stop()
	every := opts.Every
	if death && opts.Death.Stall > 0 {
		// Beats well within Stall, or the gap between two would be one.
		every = min(every, opts.Death.Stall/4)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var obs []fence.Observation
	// lifting is a lift the core decided that waits for the directory: the
	// silo reaches a majority again, but serves only once the view it acts
	// on has that majority and its directory has settled on it.
	var lifting *fence.Status
	verdict := func(st fence.Status) {
		if core == nil {
			return
		}
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
		if death {
			run := w.fence.elapsed()
			if w.fence.watching.Load() {
				w.beat(run)
			}
			if next := w.settle(pending, run, src); next > 0 {
				due.Reset(next - run)
			}
			if !w.liftDeath(run, src) {
				w.deactivateAll() // what a call that raced the fence may have activated
			}
		}
		if core != nil {
			obs = obs[:0]
			for _, r := range src.Reachability() {
				obs = append(obs, fence.Observation{ID: r.ID, Reachable: r.Reachable})
			}
			verdict(core.Observe(now, obs))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-w.fence.raised:
		case <-due.C:
		case v := <-verdicts:
			w.heard(pending, v, w.fence.elapsed())
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
				if e.Kind == cluster.EventLeft && core != nil {
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
		f.mu.Lock()
		f.mu.minority = fmt.Errorf("%w: %w", ErrFenced, err)
		w.refuseLocked()
		f.mu.Unlock()
		f.fencings.Add(1)
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

// unfence lets calls and registrations in again, unless the death fence
// is up.
func (w *Wiring) unfence() {
	f := &w.fence
	f.mu.Lock()
	f.mu.minority = nil
	w.refuseLocked()
	f.mu.Unlock()
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
