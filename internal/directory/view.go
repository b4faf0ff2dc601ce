package directory

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/directory/directorypb"
	"github.com/granary-go/granary/internal/ring"
)

// SetView moves the directory to a new membership view. The ring is made
// of the silos the view has as active. Entries and cached locations that
// point at a silo that is gone are dropped. Entries this silo no longer
// owns are handed to their new owners. Ranges it gains are held: from a
// live silo, until that silo hands them over (or HandoffWait passes);
// from a silo that died, until they are rebuilt from what the live silos
// host.
func (d *Directory) SetView(v cluster.View) {
	d.mu.Lock()
	if d.mu.closed || (v.Version != 0 && v.Version < d.mu.view.Version) {
		d.mu.Unlock()
		return
	}
	live := make(map[string]int64, len(v.Members))
	var active []ring.Silo
	for _, m := range v.Members {
		live[m.ID] = m.Generation
		if m.Status == cluster.StatusActive {
			active = append(active, ring.Silo{ID: m.ID, Generation: m.Generation})
		}
	}
	for _, m := range v.Members {
		if old, ok := d.mu.view.Member(m.ID); !ok || old.Load != m.Load {
			delete(d.mu.placed, m.ID) // a fresh figure counts what was placed before it
		}
	}
	// A silo declared dead by mistake comes back under the same
	// generation, its activations possibly still running while the
	// directory dropped them and their grains were activated elsewhere:
	// this silo's partition takes back from it what it hosts here, and
	// any duplicate loses to the entry already there.
	var returned []string
	for _, m := range v.Members {
		if _, now := d.mu.live[m.ID]; !now && d.mu.gone[m.ID] == m.Generation && m.ID != d.self.Silo {
			returned = append(returned, m.ID)
		}
	}
	var left []Activation
	for id, gen := range d.mu.live {
		if g, ok := live[id]; !ok || g != gen {
			d.mu.gone[id] = gen
			left = append(left, Activation{Silo: id, Generation: gen})
		}
	}
	for id := range live {
		if slices.Contains(returned, id) {
			delete(d.mu.gone, id)
		}
	}
	// A silo lost from the view may be alive and serving, declared dead by
	// mistake: its grains are placed nowhere else for DeathGrace, in case
	// it comes back. One that was shutting down unregistered what it ran,
	// and one seen restarted runs nothing of its old generation.
	// A grace ends when its silo is back, or seen restarted.
	var mourningEnded []*reclaiming
	for a, w := range d.mu.mourning {
		if _, seen := live[a.Silo]; seen {
			delete(d.mu.mourning, a)
			mourningEnded = append(mourningEnded, w)
		}
	}
	now := d.clock.Now()
	graces := make(map[Activation]*reclaiming)
	for _, a := range left {
		old, _ := d.mu.view.Member(a.Silo)
		if _, restarted := live[a.Silo]; d.opts.DeathGrace > 0 && !restarted && old.Status != cluster.StatusShuttingDown && a != d.self {
			graces[a] = d.awaitReclaimLocked(nil)
			graces[a].until = now.Add(d.opts.DeathGrace)
			graces[a].owned = graceRanges(d.mu.ring.Ranges(a.Silo))
			d.mu.mourning[a] = graces[a]
		}
	}
	oldRing := d.mu.ring
	newRing := ring.New(active, d.opts.VirtualNodes)
	d.mu.view, d.mu.live, d.mu.ring = v, live, newRing

	// What pointed at silos that are gone goes with them, but for those in
	// their grace.
	d.dropDeadEntriesLocked()
	for id, a := range d.mu.cache {
		if !d.liveLocked(a) {
			delete(d.mu.cache, id)
		}
	}
	// A silo seen at last is judged by the view from now on. One never
	// seen is remembered long past its grace, so that its entries stay
	// dead, and then forgotten, so that the memory stays bounded.
	// One seen only after its grace had its entries taken for dead, and
	// its grains may have been activated again elsewhere meanwhile: like a
	// silo back from a false death, it is asked what it hosts.
	for key, first := range d.mu.unseen {
		gen, ok := live[key.ID]
		seen := ok && gen == key.Generation
		if seen && now.Sub(first) >= d.opts.UnseenGrace && key.ID != d.self.Silo && !slices.Contains(returned, key.ID) {
			returned = append(returned, key.ID)
		}
		if seen || now.Sub(first) > unseenMemory*d.opts.UnseenGrace {
			delete(d.mu.unseen, key)
		}
	}

	// Ranges gained: wait for the handoff of a live previous owner, or
	// rebuild what a dead one held.
	var rebuild []ring.Range
	var wait uint64 // the holds this view makes wait for a handoff
	for _, m := range ring.Diff(oldRing, newRing) {
		if m.To.ID != d.self.Silo || m.From == m.To {
			continue
		}
		switch {
		case m.From.ID == "":
			// A new cluster: nobody owned the range before.
		case d.unfilledLocked(m.Range):
			// Handed over by a silo that held it still, waiting for
			// entries that had not come: what it sent may lack some.
			d.mu.holds = append(d.mu.holds, hold{r: m.Range, from: m.From, rebuilding: true})
			rebuild = append(rebuild, m.Range)
		case d.receivedLocked(m.From, m.Range):
			// Handed over already, before this silo's view caught up (the
			// silo may even be gone by now).
		case d.liveSiloLocked(m.From):
			if wait == 0 {
				d.mu.waits++
				wait = d.mu.waits
			}
			d.mu.holds = append(d.mu.holds, hold{r: m.Range, from: m.From, wait: wait})
		default:
			d.mu.holds = append(d.mu.holds, hold{r: m.Range, from: m.From, rebuilding: true})
			rebuild = append(rebuild, m.Range)
		}
		// The rebuild cannot find what a silo in its grace runs: the
		// range's grains with no entry wait for the grace too.
		if w := d.mu.mourning[Activation{Silo: m.From.ID, Generation: m.From.Generation}]; w != nil {
			w.ranges = append(w.ranges, m.Range)
		}
	}
	// A range handed over ahead of this silo's view is remembered until a
	// view gives it to this silo (the view caught up), the view has this
	// silo active (whatever it does not own by then, the view gives
	// others, and its entries go there), or its sender leaves.
	owned := newRing.Ranges(d.self.Silo)
	selfActive := false
	for _, s := range active {
		selfActive = selfActive || s.ID == d.self.Silo
	}
	for s, rs := range d.mu.received {
		if !d.liveSiloLocked(s) || selfActive {
			delete(d.mu.received, s)
			continue
		}
		if rs = slices.DeleteFunc(rs, func(r ring.Range) bool { return covered(r, owned) }); len(rs) == 0 {
			delete(d.mu.received, s)
		} else {
			d.mu.received[s] = rs
		}
	}
	if wait != 0 {
		// One timer for the view's holds: those still waiting when it
		// fires are rebuilt together, each live silo asked once. A hold
		// of a later view on the same range has a timer of its own.
		d.clock.AfterFunc(d.opts.HandoffWait, func() { d.handoffOverdue(wait) })
	}
	d.forgetUnfilledLocked(rebuild)
	// Holds on ranges another silo owns now end: what waited goes there.
	// The new owner must not take such a range for handed over: this silo
	// never had its entries (the handoff it waited for failed, or the
	// rebuild is still asking), so it hands it over as unfilled.
	held := make([]ring.Range, 0, len(d.mu.holds))
	for _, h := range d.mu.holds {
		held = append(held, h.r)
	}
	// A hold split by the new ring keeps the parts this silo still owns:
	// their entries have not come either.
	var released []ring.Range
	var kept []hold
	mineAll := merged(owned)
	for _, h := range d.mu.holds {
		mine := clip(h.r, mineAll)
		released = append(released, outside(h.r, mine)...)
		kept = h.cut(mine, kept)
	}
	d.mu.holds = kept
	// A live silo that was to hand a range over and died meanwhile will
	// not: rebuild what of it this silo still owns.
	for i := range d.mu.holds {
		h := &d.mu.holds[i]
		if !h.rebuilding && !d.liveSiloLocked(h.from) {
			h.rebuilding = true
			rebuild = append(rebuild, h.r)
		}
	}

	// Entries this silo no longer owns go to their owners, with the ranges
	// they came from, so that the owners stop holding them.
	type batch struct {
		ranges, unfilled []ring.Range
		entries          map[actor.GrainID]Activation
		mourning         []handedGrace
	}
	handoffs := make(map[string]*batch)
	batchFor := func(silo string) *batch {
		b := handoffs[silo]
		if b == nil {
			b = &batch{entries: make(map[actor.GrainID]Activation)}
			handoffs[silo] = b
		}
		return b
	}
	for _, m := range ring.Diff(oldRing, newRing) {
		if m.From.ID == d.self.Silo && m.To.ID != "" && m.To.ID != d.self.Silo {
			b := batchFor(m.To.ID)
			if overlapsAny(m.Range, held) {
				b.unfilled = append(b.unfilled, m.Range)
			} else {
				b.ranges = append(b.ranges, m.Range)
			}
		}
	}
	for id, a := range d.mu.partition {
		owner, ok := newRing.OwnerOf(id)
		if !ok || owner.ID == d.self.Silo || (len(d.mu.received) > 0 && d.aheadLocked(ring.Hash(id))) {
			continue
		}
		batchFor(owner.ID).entries[id] = a
		delete(d.mu.partition, id)
	}
	for _, b := range handoffs {
		b.mourning = d.handedGracesLocked(b.entries, b.ranges, b.unfilled)
	}
	again, againHere := d.registerAgainLocked(left)
	// The reclaims of returned silos start waiting here, with the view
	// that returned them: a grain placed between this and the request
	// would be the duplicate the wait is for.
	var waits []*reclaiming
	if len(returned) > 0 {
		mine := newRing.Ranges(d.self.Silo)
		for range returned {
			waits = append(waits, d.awaitReclaimLocked(mine))
		}
	}
	d.mu.Unlock()

	d.endReclaimWait(mourningEnded...)
	if len(graces) > 0 {
		d.clock.AfterFunc(d.opts.DeathGrace, func() { d.endMourning(graces) })
	}
	if len(released) > 0 {
		d.release(released)
	}
	if len(againHere) > 0 {
		d.merge(againHere)
	}
	for silo, entries := range again {
		d.untilAnswered(silo, "directory: registering again what a dead silo had registered", func(ctx context.Context) error {
			return d.handoff(ctx, silo, nil, nil, entries)
		}, nil)
	}
	// A handoff goes on until the new owner takes it or leaves: these
	// entries are nowhere else, and a new owner that gained the range
	// without holding it (it owned the range before this silo's view lost
	// it, as after a false death) would never rebuild it.
	for silo, b := range handoffs {
		d.mu.Lock()
		d.mu.handoffs++
		d.mu.Unlock()
		if !d.untilAnswered(silo, "directory: handoff", func(ctx context.Context) error {
			return d.handoff(ctx, silo, b.ranges, b.unfilled, b.entries, b.mourning...)
		}, d.handoffDone) {
			d.handoffDone()
		}
	}
	if len(rebuild) > 0 {
		d.goRemote(func(ctx context.Context) { d.rebuild(ctx, rebuild) })
	}
	for i, silo := range returned {
		d.log.Info("directory: a silo declared dead, or seen only after its grace, is in the view: taking back what it hosts", slog.String("silo", silo))
		d.reclaim(silo, waits[i].ranges, waits[i], "directory: a silo that came back did not say what it hosts")
	}
}

// endMourning ends the graces in graces that are still under way: their
// silos' entries are dropped, and what waited runs again. A silo back
// from a false death keeps its generation, so a grace it began again
// later has the same key and is not one of these.
func (d *Directory) endMourning(graces map[Activation]*reclaiming) {
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return
	}
	var ended []*reclaiming
	for a, w := range graces {
		if d.mu.mourning[a] == w {
			delete(d.mu.mourning, a)
			ended = append(ended, w)
		}
	}
	if len(ended) > 0 {
		d.dropDeadEntriesLocked()
	}
	d.mu.Unlock()
	d.endReclaimWait(ended...)
}

// handedGrace is a silo in its death's grace as a handoff tells its
// receiver: the handed ranges gained from it, and when the grace ends.
type handedGrace struct {
	a      Activation
	ranges []ring.Range
	until  time.Time
}

// handedGracesLocked returns the graces a handoff of ranges and entries
// must carry, or an answer to a rebuild of ranges (entries nil): those of
// the silos whose entries it hands, or whose ranges (gained from them, or
// owned by them when the view lost them) it overlaps. The receiver may
// never have seen such a silo, and would place its grains at once.
func (d *Directory) handedGracesLocked(entries map[actor.GrainID]Activation, handoff ...[]ring.Range) []handedGrace {
	if len(d.mu.mourning) == 0 {
		return nil
	}
	ranges := slices.Concat(handoff...)
	withEntries := make(map[Activation]bool)
	for _, a := range entries {
		if _, mourned := d.mu.mourning[a]; mourned {
			withEntries[a] = true
		}
	}
	var out []handedGrace
	for a, w := range d.mu.mourning {
		g := handedGrace{a: a, until: w.until, ranges: intersect(slices.Concat(w.ranges, w.owned), ranges)}
		if len(g.ranges) == 0 && !withEntries[a] {
			continue
		}
		out = append(out, g)
	}
	return out
}

// maxHandedGraces bounds the graces handed by other silos that this silo
// keeps at once, and maxGraceRanges the ranges of each: no more silos than
// that are lost at once in a cluster that still has a majority to hand
// ranges on, and a peer must not make this silo keep an unbounded number.
const (
	maxHandedGraces = 64
	maxGraceRanges  = 4096
)

// takeGracesLocked keeps, for the rest of their grace, the silos that a
// handoff's sender, or a silo answering a rebuild (from), was mourning and
// this silo is not: their entries in the handoff are kept, not dropped as
// dead or taken for an unseen silo's, the grains with no entry in the
// handed or rebuilt ranges wait, and a silo that comes back is asked what
// it hosts, as the sender would have done. A handed grace is the sender's
// word, so it is bounded: never longer than this silo's own DeathGrace,
// only over ranges the handoff hands or the rebuild asked about, only from
// a sender this silo takes for alive, never for a silo this silo already
// holds dead or alive, and at most maxHandedGraces at once. A lost silo
// this silo never saw is marked as one not seen for longer than
// UnseenGrace, whose entries are dead and which is asked what it hosts when
// it is seen; the mark is forgotten as every unseen silo's is. It returns
// the graces begun, for endGraces.
func (d *Directory) takeGracesLocked(from Activation, in []*directorypb.Mourning, handoff ...[]ring.Range) map[Activation]*reclaiming {
	if d.opts.DeathGrace <= 0 || len(in) == 0 || !d.liveLocked(from) {
		return nil
	}
	handed := slices.Concat(handoff...)
	kept := 0
	for _, w := range d.mu.mourning {
		if w.handed {
			kept++
		}
	}
	var graces map[Activation]*reclaiming
	now := d.clock.Now()
	for _, m := range in {
		a := activationOf(m.GetSilo())
		key := ring.Silo{ID: a.Silo, Generation: a.Generation}
		if a.Silo == "" || a.Silo == d.self.Silo {
			continue
		}
		if _, seen := d.mu.live[a.Silo]; seen {
			continue // alive in this view, or restarted: not dead here
		}
		ranges := intersect(rangesOf(m.GetRanges()), handed)
		if w := d.mu.mourning[a]; w != nil {
			w.ranges = graceRanges(append(w.ranges, ranges...))
			continue
		}
		if gen, gone := d.mu.gone[a.Silo]; gone && gen >= a.Generation {
			continue // dead here already, its grace over or never begun
		}
		if first, met := d.mu.unseen[key]; met && now.Sub(first) >= d.opts.UnseenGrace {
			continue // dead here already
		}
		d.mu.unseen[key] = now.Add(-d.opts.UnseenGrace)
		left := min(time.Duration(m.GetRemainingNanos()), d.opts.DeathGrace)
		if left <= 0 || kept == maxHandedGraces {
			continue // its entries are dead, and nothing waits
		}
		kept++
		w := d.awaitReclaimLocked(graceRanges(ranges))
		w.until, w.handed = now.Add(left), true
		d.mu.mourning[a] = w
		if graces == nil {
			graces = make(map[Activation]*reclaiming)
		}
		graces[a] = w
	}
	return graces
}

// graceRanges is the ranges a grace waits on: merged, and at most
// maxGraceRanges.
func graceRanges(rs []ring.Range) []ring.Range {
	rs = merged(rs)
	return rs[:min(len(rs), maxGraceRanges)]
}

// endGraces ends each of graces when it is due (endMourning).
func (d *Directory) endGraces(graces map[Activation]*reclaiming) {
	now := d.clock.Now()
	for a, w := range graces {
		d.clock.AfterFunc(w.until.Sub(now), func() { d.endMourning(map[Activation]*reclaiming{a: w}) })
	}
}

// intersect returns the parts of as that lie in bs, merged and sorted:
// a sweep of both lists, each merged first, so that ranges a peer sent
// cost their sorting and no more.
func intersect(as, bs []ring.Range) []ring.Range {
	as, bs = merged(as), merged(bs)
	var out []ring.Range
	for i, j := 0, 0; i < len(as) && j < len(bs); {
		a, b := as[i], bs[j]
		if first, last := max(a.First, b.First), min(a.Last, b.Last); first <= last {
			out = append(out, ring.Range{First: first, Last: last})
		}
		if a.Last < b.Last {
			i++
		} else {
			j++
		}
	}
	return out
}

// clip returns the parts of rs that lie in r; rs must be sorted and
// merged (merged), and so is what clip returns.
func clip(r ring.Range, rs []ring.Range) []ring.Range {
	i, _ := slices.BinarySearchFunc(rs, r.First, func(o ring.Range, h uint64) int { return cmp.Compare(o.Last, h) })
	var out []ring.Range
	for ; i < len(rs) && rs[i].First <= r.Last; i++ {
		out = append(out, ring.Range{First: max(rs[i].First, r.First), Last: min(rs[i].Last, r.Last)})
	}
	return out
}

// cut appends to into the hold on each of pieces, with h's sender and
// wait.
func (h hold) cut(pieces []ring.Range, into []hold) []hold {
	for _, r := range pieces {
		h.r = r
		into = append(into, h)
	}
	return into
}

// outside returns the parts of r that none of in covers; in is sorted,
// merged and within r, as clip returns it.
func outside(r ring.Range, in []ring.Range) []ring.Range {
	var out []ring.Range
	next := r.First
	for _, o := range in {
		if o.First > next {
			out = append(out, ring.Range{First: next, Last: o.First - 1})
		}
		if o.Last == r.Last {
			return out
		}
		next = o.Last + 1
	}
	return append(out, ring.Range{First: next, Last: r.Last})
}

// merged returns rs sorted, with the ranges that overlap or touch made
// one.
func merged(rs []ring.Range) []ring.Range {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b ring.Range) int { return cmp.Compare(a.First, b.First) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && (r.First <= out[n-1].Last || out[n-1].Last != ^uint64(0) && r.First == out[n-1].Last+1) {
			out[n-1].Last = max(out[n-1].Last, r.Last)
			continue
		}
		out = append(out, r)
	}
	return out
}

// dropDeadEntriesLocked drops the partition's entries of silos that are
// gone, but for those of silos in their grace.
func (d *Directory) dropDeadEntriesLocked() {
	for id, a := range d.mu.partition {
		if _, mourned := d.mu.mourning[a]; !mourned && !d.liveLocked(a) {
			delete(d.mu.partition, id)
			d.stats.dropped.Add(1)
		}
	}
}

// registerAgainLocked lists, by the owner the new ring gives them, this
// silo's activations whose registration a silo in left granted. Those
// registrations died with it, and its successors' rebuilds cover only the
// ranges it owned by their own views: one it granted by a view that had
// lost the grain's real owner (a false death) is in no one's range, and
// the activation would run beside the real owner's for good. Each is
// handed to its owner as an entry, whose merge keeps it, or, where the
// owner has another, tells it to deactivate. here holds those this silo
// owns now.
func (d *Directory) registerAgainLocked(left []Activation) (again map[string]map[actor.GrainID]Activation, here []*directorypb.Entry) {
	if len(left) == 0 || len(d.mu.registrar) == 0 {
		return nil, nil
	}
	for id, reg := range d.mu.registrar {
		if !slices.Contains(left, reg) {
			continue
		}
		owner, ok := d.mu.ring.OwnerOf(id)
		if !ok {
			continue
		}
		if owner.ID == d.self.Silo {
			delete(d.mu.registrar, id)
			here = append(here, &directorypb.Entry{Grain: pbGrain(id), Activation: pbActivation(d.self)})
			continue
		}
		d.mu.registrar[id] = Activation{Silo: owner.ID, Generation: owner.Generation}
		if again == nil {
			again = make(map[string]map[actor.GrainID]Activation)
		}
		if again[owner.ID] == nil {
			again[owner.ID] = make(map[actor.GrainID]Activation)
		}
		again[owner.ID][id] = d.self
	}
	return again, here
}

// handoffDone counts a handoff of SetView out.
func (d *Directory) handoffDone() {
	d.mu.Lock()
	d.mu.handoffs--
	d.mu.Unlock()
}

// reclaim merges into this silo's partition what silo hosts in ranges,
// asking until silo answers or leaves (untilAnswered). An answer that
// comes after part of the ranges moved on goes on to their new owner: it
// took this silo's handoff, which lacked silo's entries, for all there
// was, and may have placed their grains again meanwhile; its merge
// resolves such a duplicate.
//
// With wait (from awaitReclaimLocked), lookups and registrations of
// grains in ranges that have no entry wait for the first round (one
// CallTimeout at most): the silo is back from a false death, or seen only
// after its grace, its entries were dropped, and a grain placed before it
// answers would be a duplicate of one it runs. Those that have an entry go
// on. A rebuild's reclaim does not wait: the rebuild waited a round
// already.
func (d *Directory) reclaim(silo string, ranges []ring.Range, wait *reclaiming, what string) {
	endWait := func() {}
	if wait != nil {
		endWait = sync.OnceFunc(func() { d.endReclaimWait(wait) })
	}
	if len(ranges) == 0 {
		endWait()
		return
	}
	req := &directorypb.HostedRequest{}
	req.Ranges = pbRanges(ranges)
	if !d.untilAnswered(silo, what, func(ctx context.Context) error {
		defer endWait()
		var reply *directorypb.HostedReply
		err := d.callLive(ctx, silo, func(ref directorypb.DirectoryRef) (err error) {
			reply, err = ref.Hosted(ctx, req, d.callTimeout())
			return err
		})
		if err != nil {
			return err
		}
		mine, moved := d.byOwner(reply.GetEntries())
		d.merge(mine)
		for owner, entries := range moved {
			d.untilAnswered(owner, "directory: handing on what a silo said it hosts late", func(ctx context.Context) error {
				return d.handoff(ctx, owner, nil, nil, entries)
			}, nil)
		}
		return nil
	}, nil) {
		endWait()
	}
}

// byOwner splits entries into those of grains this silo owns by its view
// and, by owner, those that other silos own.
func (d *Directory) byOwner(entries []*directorypb.Entry) (mine []*directorypb.Entry, others map[string]map[actor.GrainID]Activation) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range entries {
		id := grainOf(e.GetGrain())
		owner, ok := d.mu.ring.OwnerOf(id)
		switch {
		case !ok:
		case owner.ID == d.self.Silo:
			mine = append(mine, e)
		default:
			if others == nil {
				others = make(map[string]map[actor.GrainID]Activation)
			}
			if others[owner.ID] == nil {
				others[owner.ID] = make(map[actor.GrainID]Activation)
			}
			others[owner.ID][id] = activationOf(e.GetActivation())
		}
	}
	return mine, others
}

// receivedLocked reports whether from handed r over already.
func (d *Directory) receivedLocked(from ring.Silo, r ring.Range) bool {
	return covered(r, d.mu.received[from])
}

// aheadLocked reports whether h lies in a range a live silo handed over
// ahead of this silo's view. Its entries stay for the view that gives this
// silo the range: handed on by a view in between, they would be gone when
// that view takes the range for handed over.
func (d *Directory) aheadLocked(h uint64) bool {
	for _, rs := range d.mu.received {
		for _, r := range rs {
			if r.Contains(h) {
				return true
			}
		}
	}
	return false
}

// unfilledLocked reports whether a silo handed over part of r as unfilled.
func (d *Directory) unfilledLocked(r ring.Range) bool {
	for _, rs := range d.mu.unfilled {
		if overlapsAny(r, rs) {
			return true
		}
	}
	return false
}

// forgetUnfilledLocked drops the records of unfilled ranges whose senders
// left the view, and those that rebuilding overlaps: the rebuild fills
// them.
func (d *Directory) forgetUnfilledLocked(rebuilding []ring.Range) {
	for s, rs := range d.mu.unfilled {
		if !d.liveSiloLocked(s) {
			delete(d.mu.unfilled, s)
			continue
		}
		rs = slices.DeleteFunc(rs, func(r ring.Range) bool { return overlapsAny(r, rebuilding) })
		if len(rs) == 0 {
			delete(d.mu.unfilled, s)
		} else {
			d.mu.unfilled[s] = rs
		}
	}
}

// receivedUnfilled takes ranges another silo handed over as unfilled: the
// holds on them rebuild now, without waiting out HandoffWait, and the
// ranges are remembered for a view that gives them to this silo later.
func (d *Directory) receivedUnfilled(from ring.Silo, ranges []ring.Range) {
	if len(ranges) == 0 {
		return
	}
	d.mu.Lock()
	var rebuild []ring.Range
	for i := range d.mu.holds {
		h := &d.mu.holds[i]
		if h.rebuilding || !overlapsAny(h.r, ranges) {
			continue
		}
		h.rebuilding = true
		rebuild = append(rebuild, h.r)
	}
	rest := slices.DeleteFunc(slices.Clone(ranges), func(r ring.Range) bool { return overlapsAny(r, rebuild) })
	if len(rest) > 0 {
		d.mu.unfilled[from] = append(d.mu.unfilled[from], rest...)
	}
	d.mu.Unlock()
	if len(rebuild) > 0 {
		d.log.Info("directory: a range was handed over unfilled: rebuilding it from what the silos host", slog.String("from", from.ID), slog.Int("ranges", len(rebuild)))
		d.goRemote(func(ctx context.Context) { d.rebuild(ctx, rebuild) })
	}
}

// liveSiloLocked reports whether s, in that generation, is in the view.
func (d *Directory) liveSiloLocked(s ring.Silo) bool {
	gen, ok := d.mu.live[s.ID]
	return ok && gen == s.Generation
}

// handoffOverdue rebuilds the ranges of the holds one view made wait
// (wait) that still wait for the handoff of their previous owner, alive,
// which did not come in time.
func (d *Directory) handoffOverdue(wait uint64) {
	d.mu.Lock()
	var rebuild []ring.Range
	for i := range d.mu.holds {
		if h := &d.mu.holds[i]; !h.rebuilding && h.wait == wait {
			h.rebuilding = true
			rebuild = append(rebuild, h.r)
		}
	}
	d.mu.Unlock()
	if len(rebuild) > 0 {
		d.log.Info("directory: handoff overdue: rebuilding the ranges from what the silos host", slog.Int("ranges", len(rebuild)))
		d.goRemote(func(ctx context.Context) { d.rebuild(ctx, rebuild) })
	}
}

// Handover hands every entry of this silo's partition to the owners it
// has in the ring without this silo, for a graceful leave: call it before
// the silo announces that it is shutting down, so that the new owners have
// the entries when requests start to reach them.
func (d *Directory) Handover(ctx context.Context) error {
	d.mu.Lock()
	var without []ring.Silo
	for _, s := range d.mu.ring.Silos() {
		if s.ID != d.self.Silo {
			without = append(without, s)
		}
	}
	next := ring.New(without, d.opts.VirtualNodes)
	batches := make(map[string]map[actor.GrainID]Activation)
	ranges, unfilled := make(map[string][]ring.Range), make(map[string][]ring.Range)
	held := make([]ring.Range, 0, len(d.mu.holds))
	for _, h := range d.mu.holds {
		held = append(held, h.r)
	}
	for _, m := range ring.Diff(d.mu.ring, next) {
		if m.From.ID != d.self.Silo || m.To.ID == "" {
			continue
		}
		if overlapsAny(m.Range, held) {
			// Still waiting for its entries: see SetView.
			unfilled[m.To.ID] = append(unfilled[m.To.ID], m.Range)
		} else {
			ranges[m.To.ID] = append(ranges[m.To.ID], m.Range)
		}
	}
	for id, a := range d.mu.partition {
		if owner, ok := next.OwnerOf(id); ok {
			if batches[owner.ID] == nil {
				batches[owner.ID] = make(map[actor.GrainID]Activation)
			}
			batches[owner.ID][id] = a
			delete(d.mu.partition, id)
		}
	}
	to := make(map[string]bool)
	for silo := range ranges {
		to[silo] = true
	}
	for silo := range unfilled {
		to[silo] = true
	}
	graces := make(map[string][]handedGrace, len(to))
	for silo := range to {
		graces[silo] = d.handedGracesLocked(batches[silo], ranges[silo], unfilled[silo])
	}
	d.mu.Unlock()
	var firstErr error
	for silo := range to {
		if err := d.handoff(ctx, silo, ranges[silo], unfilled[silo], batches[silo], graces[silo]...); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}
