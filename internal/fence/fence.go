package fence

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultMinSilos is the smallest stable membership the fence acts in.
const DefaultMinSilos = 3

// Options configure a Fence.
type Options struct {
	// Self is this silo's id. It always counts as reachable.
	Self string
	// MinSilos is the smallest stable membership in which the fence
	// fences: with fewer members a silo never fences. Zero means
	// DefaultMinSilos. With 2, both silos of a pair fence when they lose
	// each other, a crash included: one of two can never tell its peer's
	// crash from a cut.
	MinSilos int
	// Stability is how long the reachable members must stay the same,
	// while this silo reaches a majority of the stable membership, before
	// they become the stable membership. Must be positive.
	Stability time.Duration
}

// Observation is one member as this silo sees it now.
type Observation struct {
	// ID is the member's silo id: a silo that restarts is the same member.
	ID string
	// Reachable is true when this silo reaches the member now (it is alive
	// and answers); false when it is suspected, unreachable, or dead.
	Reachable bool
}

// Status is the fence's verdict after an event.
type Status struct {
	// Fenced is true when this silo must not serve: the stable membership
	// has at least MinSilos members and this silo reaches no majority of
	// them.
	Fenced bool
	// Changed is true when Fenced differs from the verdict before the
	// event.
	Changed bool
	// Reason says why the silo is fenced, naming the unreachable members
	// of the stable membership; "" when it is not.
	Reason string
	// Stable is the last stable membership, sorted.
	Stable []string
	// Reached counts the members of Stable this silo reaches (itself
	// included).
	Reached int
}

// Fence decides whether this silo is cut off from the majority of the last
// stable membership. It is a deterministic state machine: the shell feeds
// it observations of the membership and the current time, and acts on the
// Status it returns. It owns no goroutine, lock or clock and is not safe
// for concurrent use.
//
// The last stable membership is the set of reachable members once it has
// stayed unchanged for Options.Stability while this silo reached a
// majority of the stable membership before it (the first observation's
// reachable members to begin with). A silo cut off from the
// majority therefore cannot shrink it, and stays fenced until it reaches a
// majority again; the majority side shrinks it to itself after the
// stability period, and a member that leaves gracefully is removed at
// once.
type Fence struct {
	opts Options

	stable    map[string]struct{}
	reachable map[string]struct{} // as last observed, self included
	// since is when reachable last changed or a majority was last regained:
	// the start of the current stability period.
	since   time.Time
	started bool
	fenced  bool
}

// New returns a fence with an empty stable membership. The first
// observation's reachable members become the stable membership at once:
// the shell makes it as soon as the silo has joined its cluster, when the
// members it reaches are the cluster it joined, so that a silo cut off
// right after joining is fenced too.
func New(opts Options) *Fence {
	if opts.MinSilos <= 0 {
		opts.MinSilos = DefaultMinSilos
	}
	return &Fence{
		opts:      opts,
		stable:    map[string]struct{}{},
		reachable: map[string]struct{}{opts.Self: {}},
	}
}

// Observe feeds the fence what this silo sees at now: each member it knows
// of, reachable or not. Members of the stable membership that obs leaves
// out count as unreachable; this silo always counts as reachable.
func (f *Fence) Observe(now time.Time, obs []Observation) Status {
	reachable := map[string]struct{}{f.opts.Self: {}}
	for _, o := range obs {
		if o.Reachable {
			reachable[o.ID] = struct{}{}
		}
	}
	// A change of the reachable members is the only way an observation
	// can give back a majority, so the stability period also starts with
	// the majority.
	if !f.started {
		// The first observation comes from a silo that has just joined:
		// the members it reaches then are the cluster it joined.
		f.stable = cloneSet(reachable)
	}
	if !f.started || !sameSet(reachable, f.reachable) {
		f.reachable, f.since, f.started = reachable, now, true
	}
	return f.adopt(now)
}

// adopt makes the reachable members the stable membership once they have
// been stable long enough, and returns the verdict.
func (f *Fence) adopt(now time.Time) Status {
	if f.started && f.majority() && now.Sub(f.since) >= f.opts.Stability && !sameSet(f.stable, f.reachable) {
		f.stable = cloneSet(f.reachable)
	}
	return f.status()
}

// Left removes a member that left gracefully, at now, from the stable
// membership at once: it handed its work over and will not serve.
func (f *Fence) Left(now time.Time, id string) Status {
	if id != f.opts.Self {
		hadMajority := f.majority()
		delete(f.stable, id)
		delete(f.reachable, id)
		if !hadMajority && f.majority() {
			f.since = now
		}
	}
	return f.adopt(now)
}

// majority reports whether this silo reaches a majority of the stable
// membership; an empty one needs no majority.
func (f *Fence) majority() bool {
	return len(f.stable) == 0 || 2*f.reached() > len(f.stable)
}

func (f *Fence) reached() int {
	n := 0
	for id := range f.stable {
		if _, ok := f.reachable[id]; ok {
			n++
		}
	}
	return n
}

func (f *Fence) status() Status {
	fenced := len(f.stable) >= f.opts.MinSilos && !f.majority()
	st := Status{Fenced: fenced, Changed: fenced != f.fenced, Stable: sortedIDs(f.stable), Reached: f.reached()}
	f.fenced = fenced
	if fenced {
		var missing []string
		for _, id := range st.Stable {
			if _, ok := f.reachable[id]; !ok {
				missing = append(missing, id)
			}
		}
		st.Reason = fmt.Sprintf("sees %d of %d silos of the last stable membership: %s unreachable",
			st.Reached, len(st.Stable), strings.Join(missing, ", "))
	}
	return st
}

func sameSet(a, b map[string]struct{}) bool {
	if len(a) != len(b) {
		return false
	}
	for id := range a {
		if _, ok := b[id]; !ok {
			return false
		}
	}
	return true
}

func cloneSet(s map[string]struct{}) map[string]struct{} {
	out := make(map[string]struct{}, len(s))
	for id := range s {
		out[id] = struct{}{}
	}
	return out
}

func sortedIDs(s map[string]struct{}) []string {
	if len(s) == 0 {
		return nil
	}
	out := make([]string, 0, len(s))
	for id := range s {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}
