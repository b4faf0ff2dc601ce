package directory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/directory/directorypb"
	"github.com/granary-go/granary/internal/ring"
	"github.com/granary-go/granary/proxy"
)

// errSelfOwner tells a remote operation that, by the view now, this silo
// owns the grain: it goes on locally.
var errSelfOwner = errors.New("directory: this silo owns the grain now")

func pbGrain(id actor.GrainID) *directorypb.GrainID {
	return &directorypb.GrainID{Type: id.Type, Key: id.Key}
}

func grainOf(g *directorypb.GrainID) actor.GrainID {
	return actor.GrainID{Type: g.GetType(), Key: g.GetKey()}
}

func pbActivation(a Activation) *directorypb.Activation {
	return &directorypb.Activation{Silo: a.Silo, Generation: a.Generation}
}

func activationOf(a *directorypb.Activation) Activation {
	return Activation{Silo: a.GetSilo(), Generation: a.GetGeneration()}
}

// retryable reports whether another try may succeed: the other silo's view
// differs, or it could not be reached for now.
func retryable(err error) bool {
	return errors.Is(err, proxy.NewError(codeNotOwner, "")) || errors.Is(err, proxy.ErrUnavailable) ||
		errors.Is(err, proxy.ErrTimeout)
}

// sleep waits a little, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ownerCall calls fn with a reference to the partition that owns h, by
// this silo's view at each try, for as long as the owner answers that it is
// not the owner (views differ while membership converges) or cannot be
// reached, within ctx. It returns errSelfOwner when this silo is the owner.
func (d *Directory) ownerCall(ctx context.Context, h uint64, fn func(ref directorypb.DirectoryRef) error) error {
	_, err := d.ownerCallFrom(ctx, h, fn)
	return err
}

// ownerCallFrom is ownerCall that also says which silo answered.
func (d *Directory) ownerCallFrom(ctx context.Context, h uint64, fn func(ref directorypb.DirectoryRef) error) (ring.Silo, error) {
	var last error // the last try's retryable failure: why ctx ran out
	for {
		d.mu.Lock()
		owner, ok := d.ownerLocked(h)
		closed := d.mu.closed
		d.mu.Unlock()
		switch {
		case closed:
			return ring.Silo{}, ErrClosed
		case !ok:
			return ring.Silo{}, ErrNoOwner
		case owner.ID == d.self.Silo:
			return owner, errSelfOwner
		}
		err := d.call(owner.ID, fn)
		if err != nil && last != nil && ctx.Err() != nil {
			// The try that ctx cut short says only that; the ones before
			// it say why the owner did not answer in time.
			return owner, errors.Join(last, err)
		}
		if err == nil || !retryable(err) {
			return owner, err
		}
		last = err
		if serr := sleep(ctx, randomDelay()); serr != nil {
			return owner, errors.Join(err, serr)
		}
	}
}

// call calls fn with a reference to silo's partition.
func (d *Directory) call(silo string, fn func(ref directorypb.DirectoryRef) error) error {
	c, err := d.peers.Caller(silo)
	if err != nil {
		return errors.Join(proxy.ErrUnavailable, err)
	}
	return fn(directorypb.NewDirectoryRef(c, ""))
}

// callLive is call, tried again within ctx while the failure is one a later
// try may not have (the silo is slow, or its link is still to be dialled,
// as after a false death) and the silo is in the view.
func (d *Directory) callLive(ctx context.Context, silo string, fn func(ref directorypb.DirectoryRef) error) error {
	for {
		err := d.call(silo, fn)
		if err == nil || !retryable(err) {
			return err
		}
		d.mu.Lock()
		_, live := d.mu.live[silo]
		closed := d.mu.closed
		d.mu.Unlock()
		if !live || closed {
			return err
		}
		if serr := sleep(ctx, randomDelay()); serr != nil {
			return errors.Join(err, serr)
		}
	}
}

// Backoff between the rounds of untilAnswered.
const (
	firstRoundBackoff = 25 * time.Millisecond
	maxRoundBackoff   = time.Second
)

// untilAnswered runs round on a goroutine the directory owns, round after
// round, each bounded by CallTimeout, until one succeeds, one fails in a
// way no later round can mend, silo leaves the view in the generation it
// has there now, or the directory closes. What a silo hosts, and the
// deactivation of its duplicate, must not be given up on for a slow spell
// longer than one call's time (a silo starved of CPU, or whose links are
// being dialled again): a reclaim or a rebuild that missed the answer
// leaves a duplicate for good. what names the request in the one line
// logged when it is asked again, and in the one when it is answered late.
//
// ended, when not nil, runs once the rounds end; untilAnswered reports
// whether they began. The goroutine is not counted by Wait: a leaving silo
// that waits for its last unregistrations must not wait out a silo that
// does not answer.
func (d *Directory) untilAnswered(silo, what string, round func(ctx context.Context) error, ended func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	gen, live := d.mu.live[silo]
	if d.mu.closed || !live {
		return false
	}
	d.stats.asking.Add(1)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer d.stats.asking.Add(-1)
		if ended != nil {
			defer ended()
		}
		backoff := firstRoundBackoff
		for rounds := 1; ; rounds++ {
			ctx, cancel := context.WithTimeout(d.done, d.opts.CallTimeout)
			err := round(ctx)
			cancel()
			if err == nil {
				if rounds > 1 {
					d.log.Info(what+": answered", slog.String("silo", silo), slog.Int("rounds", rounds))
				}
				return
			}
			if !retryable(err) && !errors.Is(err, context.DeadlineExceeded) {
				d.log.Warn(what+": failed", slog.String("silo", silo), slog.Any("err", err))
				return
			}
			d.mu.Lock()
			g, live := d.mu.live[silo]
			closed := d.mu.closed
			d.mu.Unlock()
			if closed || !live || g != gen {
				return // what it hosted died with it
			}
			if rounds == 1 {
				d.log.Warn(what+": no answer; asking again until it answers or leaves", slog.String("silo", silo), slog.Any("err", err))
			}
			if sleep(d.done, backoff) != nil {
				return
			}
			backoff = min(2*backoff, maxRoundBackoff)
		}
	}()
	return true
}

// callTimeout is the response timeout of one try.
func (d *Directory) callTimeout() proxy.CallOption { return proxy.WithTimeout(d.opts.CallTimeout / 2) }

// remoteLookup asks the owner of id where it lives, and answers the
// Locates waiting for it: with that silo, or, when the grain has no
// activation, with the silo placement chooses.
func (d *Directory) remoteLookup(ctx context.Context, id actor.GrainID, hint string) {
	var reply *directorypb.LookupReply
	err := d.ownerCall(ctx, ring.Hash(id), func(ref directorypb.DirectoryRef) (err error) {
		reply, err = ref.Lookup(ctx, &directorypb.LookupRequest{Grain: pbGrain(id)}, d.callTimeout())
		return err
	})
	switch {
	case errors.Is(err, errSelfOwner):
		// The view moved the grain to this silo meanwhile: ask again here.
		d.mu.Lock()
		dones := d.mu.lookups[id]
		delete(d.mu.lookups, id)
		d.mu.Unlock()
		for _, done := range dones {
			d.Locate(id, hint, done)
		}
		return
	case err != nil:
		d.finishLookup(id, "", false, err)
		return
	}
	if reply.GetFound() {
		a := activationOf(reply.GetActivation())
		d.mu.Lock()
		live := d.liveLocked(a)
		if live {
			d.cacheLocked(id, a)
		}
		d.mu.Unlock()
		if live {
			d.finishLookup(id, a.Silo, false, nil)
			return
		}
	}
	silo, err := d.place(id, hint)
	d.finishLookup(id, silo, err == nil, err)
}

// remoteRegister registers this silo's activation of id with the grain's
// owner and returns the grain's activation, and the owner that decided.
func (d *Directory) remoteRegister(ctx context.Context, id actor.GrainID) (Activation, Activation, error) {
	h := ring.Hash(id)
	for {
		var reply *directorypb.RegisterReply
		owner, err := d.ownerCallFrom(ctx, h, func(ref directorypb.DirectoryRef) (err error) {
			reply, err = ref.Register(ctx, &directorypb.RegisterRequest{Grain: pbGrain(id), Activation: pbActivation(d.self)}, d.callTimeout())
			return err
		})
		if errors.Is(err, errSelfOwner) {
			if a, ok, werr := d.registerHere(ctx, id); werr != nil || ok {
				return a, d.self, werr
			}
			continue // the range moved again while it waited
		}
		if err != nil {
			return Activation{}, Activation{}, err
		}
		return activationOf(reply.GetWinner()), Activation{Silo: owner.ID, Generation: owner.Generation}, nil
	}
}

// registerHere registers this silo's activation in its own partition,
// waiting for the range to be released first. ok is false when, by then,
// another silo owns the grain.
func (d *Directory) registerHere(ctx context.Context, id actor.GrainID) (Activation, bool, error) {
	h := ring.Hash(id)
	for {
		d.mu.Lock()
		owner, ok := d.ownerLocked(h)
		if !ok || owner.ID != d.self.Silo {
			d.mu.Unlock()
			return Activation{}, false, nil
		}
		held, awaits := d.heldLocked(h), d.awaitsReclaimLocked(id, h)
		if !held && !awaits {
			winner := d.registerLocked(id, d.self)
			d.cacheLocked(id, winner)
			d.mu.Unlock()
			return winner, true, nil
		}
		released := make(chan struct{})
		if held {
			d.parkLocked(h, func() { close(released) })
		} else {
			d.parkForReclaimLocked(h, func() { close(released) })
		}
		d.mu.Unlock()
		select {
		case <-released:
		case <-ctx.Done():
			return Activation{}, false, ctx.Err()
		}
	}
}

// remoteUnregister removes this silo's activation of id from its owner.
func (d *Directory) remoteUnregister(ctx context.Context, id actor.GrainID) {
	err := d.ownerCall(ctx, ring.Hash(id), func(ref directorypb.DirectoryRef) error {
		_, err := ref.Unregister(ctx, &directorypb.UnregisterRequest{Grain: pbGrain(id), Activation: pbActivation(d.self)}, d.callTimeout())
		return err
	})
	if errors.Is(err, errSelfOwner) {
		d.mu.Lock()
		if d.mu.partition[id] == d.self {
			delete(d.mu.partition, id)
		}
		d.mu.Unlock()
		return
	}
	if err != nil {
		// The entry outlives the activation: the next registration for the
		// grain replaces it only once this silo leaves, so say so.
		d.log.Warn("directory: unregister failed", slog.String("grain", id.String()), slog.Any("err", err))
	}
}

// handoff gives silo the entries of ranges it now owns, and the ranges it
// owns now that this silo held unfilled.
func (d *Directory) handoff(ctx context.Context, silo string, ranges, unfilled []ring.Range, entries map[actor.GrainID]Activation, graces ...handedGrace) error {
	req := &directorypb.HandoffRequest{From: pbActivation(d.self)}
	req.Ranges = pbRanges(ranges)
	req.Unfilled = pbRanges(unfilled)
	for id, a := range entries {
		req.Entries = append(req.Entries, &directorypb.Entry{Grain: pbGrain(id), Activation: pbActivation(a)})
	}
	for {
		req.Mourning = d.pbMourning(graces) // what is left of each grace as of each try
		err := d.call(silo, func(ref directorypb.DirectoryRef) error {
			_, err := ref.Handoff(ctx, req, d.callTimeout())
			return err
		})
		if err == nil {
			d.stats.handoffsSent.Add(1)
			return nil
		}
		if !retryable(err) {
			return err
		}
		if serr := sleep(ctx, randomDelay()); serr != nil {
			return errors.Join(err, serr)
		}
	}
}

// pbMourning is graces as a peer is told them, with what is left of each
// now.
func (d *Directory) pbMourning(graces []handedGrace) []*directorypb.Mourning {
	if len(graces) == 0 {
		return nil
	}
	now := d.clock.Now()
	out := make([]*directorypb.Mourning, 0, len(graces))
	for _, g := range graces {
		out = append(out, &directorypb.Mourning{Silo: pbActivation(g.a), Ranges: pbRanges(g.ranges),
			RemainingNanos: int64(g.until.Sub(now))})
	}
	return out
}

// rebuild recovers the entries of ranges this silo gained from a silo that
// died, or whose handoff did not come: it asks every live silo what it
// hosts there, takes the graces of the silos they mourn there (a silo lost
// in a view this silo skipped, whose grains may run on with no entry),
// merges the answers, and releases the ranges.
func (d *Directory) rebuild(ctx context.Context, ranges []ring.Range) {
	d.stats.rebuilds.Add(int64(len(ranges)))
	req := &directorypb.HostedRequest{}
	req.Ranges = pbRanges(ranges)
	d.mu.Lock()
	var silos []Activation
	for _, m := range d.mu.view.Members {
		silos = append(silos, Activation{Silo: m.ID, Generation: m.Generation})
	}
	d.mu.Unlock()
	var (
		mu       sync.Mutex
		entries  []*directorypb.Entry
		mourning = make(map[Activation][]*directorypb.Mourning)
		arrived  = make(map[Activation]time.Time)
		silent   []string // live silos that did not answer
		wg       sync.WaitGroup
	)
	for _, a := range silos {
		silo := a.Silo
		if silo == d.self.Silo {
			own := d.hosted(ranges)
			mu.Lock()
			entries = append(entries, own...)
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var reply *directorypb.HostedReply
			err := d.callLive(ctx, silo, func(ref directorypb.DirectoryRef) (err error) {
				reply, err = ref.Hosted(ctx, req, d.callTimeout())
				return err
			})
			if err != nil {
				mu.Lock()
				silent = append(silent, silo)
				mu.Unlock()
				return
			}
			mu.Lock()
			entries = append(entries, reply.GetEntries()...)
			if m := reply.GetMourning(); len(m) > 0 {
				mourning[a], arrived[a] = m, d.clock.Now()
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	// The graces go in before the ranges are released: what waits for the
	// ranges must then wait for the graces too.
	// What is left of each grace is counted from its answer's arrival: a
	// slow answer of another silo must not lengthen it.
	now := d.clock.Now()
	for from, ms := range mourning {
		for _, m := range ms {
			if r := m.GetRemainingNanos(); r > 0 {
				m.RemainingNanos = r - int64(now.Sub(arrived[from]))
			}
		}
	}
	d.mu.Lock()
	var graces map[Activation]*reclaiming
	for from, m := range mourning {
		for a, w := range d.takeGracesLocked(from, m, ranges) {
			if graces == nil {
				graces = make(map[Activation]*reclaiming)
			}
			graces[a] = w
		}
	}
	d.mu.Unlock()
	d.endGraces(graces)
	d.merge(entries)
	d.release(ranges)
	// The range cannot wait for a silo that does not answer, but what that
	// silo hosts must still be known: its grains may be placed again
	// meanwhile, and a later merge resolves such a duplicate as after a
	// false death.
	for _, silo := range silent {
		d.reclaim(silo, ranges, nil, "directory: rebuild: a silo did not say what it hosts")
	}
}

// hosted lists this silo's activations whose hash lies in ranges, every
// one that holds or may hold its registration (Host.Registered).
func (d *Directory) hosted(ranges []ring.Range) []*directorypb.Entry {
	var out []*directorypb.Entry
	for _, id := range d.host.Registered() {
		h := ring.Hash(id)
		for _, r := range ranges {
			if r.Contains(h) {
				out = append(out, &directorypb.Entry{Grain: pbGrain(id), Activation: pbActivation(d.self)})
				break
			}
		}
	}
	return out
}

// merge adds entries that another silo handed over, or that a rebuild
// found, to this silo's partition. Where the partition already has a live
// activation of a grain, that one stays, and the other, a duplicate, is
// told to deactivate.
func (d *Directory) merge(entries []*directorypb.Entry) {
	d.mu.Lock()
	losers := d.mergeLocked(entries)
	d.mu.Unlock()
	d.deactivateLosers(losers)
}

// duplicate is an activation of a grain that another one holds the
// registration of.
type duplicate struct {
	id actor.GrainID
	a  Activation
	// kept is the silo of the activation that stays, where a merge found
	// the duplicate.
	kept string
}

// mergeLocked is merge's part under the lock: it returns the duplicates
// found, for deactivateLosers.
func (d *Directory) mergeLocked(entries []*directorypb.Entry) (losers []duplicate) {
	for _, e := range entries {
		id, a := grainOf(e.GetGrain()), activationOf(e.GetActivation())
		if !d.liveLocked(a) {
			// The entry of a silo in its death's grace is kept, handed on
			// like the others, unless a live activation has the grain: its
			// silo, back, is asked what it hosts, and the duplicate found.
			if _, mourned := d.mu.mourning[a]; mourned {
				if cur, ok := d.mu.partition[id]; !ok || !d.liveLocked(cur) {
					d.mu.partition[id] = a
				}
			}
			continue
		}
		if cur, ok := d.mu.partition[id]; ok && d.liveLocked(cur) && cur != a {
			d.stats.conflicts.Add(1)
			losers = append(losers, duplicate{id: id, a: a, kept: cur.Silo})
			continue
		}
		d.mu.partition[id] = a
	}
	return losers
}

// deactivateLosers tells the duplicates a merge found to deactivate.
func (d *Directory) deactivateLosers(losers []duplicate) {
	for _, l := range losers {
		d.log.Warn("directory: duplicate activation: the one merged in deactivates", slog.String("grain", l.id.String()),
			slog.String("kept_on", l.kept), slog.String("deactivating_on", l.a.Silo))
		d.deactivateDuplicate(l.id, l.a)
	}
}

// duplicates are the duplicate activations on one silo that it is still
// to be told to deactivate.
type duplicates struct {
	queue []duplicate
	more  chan struct{} // a token when queue grew; its asker takes it
}

// duplicateCalls is how many deactivations one asker has in flight to its
// silo at once.
const duplicateCalls = 16

// deactivateDuplicate tells the silo of a duplicate activation to
// deactivate it. The duplicates of one silo wait in one queue that one
// asker works through, duplicateCalls at a time, round after round until
// the silo answers or leaves (untilAnswered): a healed partition can leave
// thousands of duplicates on a silo that is slow to answer, and a
// goroutine asking again for each would cost the silo and this one far
// more than the answers.
func (d *Directory) deactivateDuplicate(id actor.GrainID, a Activation) {
	if a == d.self {
		d.host.Deactivate(id)
		return
	}
	d.mu.Lock()
	q, asking := d.mu.duplicates[a]
	if !asking {
		q = &duplicates{more: make(chan struct{}, 1)}
		d.mu.duplicates[a] = q
	}
	q.queue = append(q.queue, duplicate{id: id, a: a})
	d.mu.Unlock()
	if asking {
		select {
		case q.more <- struct{}{}:
		default:
		}
		return
	}
	done := func() {
		d.mu.Lock()
		if d.mu.duplicates[a] == q {
			delete(d.mu.duplicates, a)
		}
		d.mu.Unlock()
	}
	if !d.untilAnswered(a.Silo, "directory: telling a duplicate to deactivate", func(ctx context.Context) error {
		return d.tellDuplicates(ctx, a, q)
	}, done) {
		done()
	}
}

// tellDuplicates tells silo to deactivate the duplicates in q, up to
// duplicateCalls at a time, each sent as soon as it is queued and a call
// is free (one slow answer holds up no other), until q is empty and every
// call has ended, which ends its asker. What failed in a way a later round
// may not is put back in q, and the round ends with that error.
func (d *Directory) tellDuplicates(ctx context.Context, on Activation, q *duplicates) error {
	silo := on.Silo
	type told struct {
		dup duplicate
		err error
	}
	ended := make(chan told, duplicateCalls) // never blocks a call: at most that many are under way
	under := 0
	var again []duplicate
	var last error
	for {
		d.mu.Lock()
		if len(q.queue) > 0 && under < duplicateCalls {
			dup := q.queue[0]
			q.queue = q.queue[1:]
			d.mu.Unlock()
			under++
			go func() {
				err := d.callLive(ctx, silo, func(ref directorypb.DirectoryRef) error {
					_, err := ref.Deactivate(ctx, &directorypb.DeactivateRequest{Grain: pbGrain(dup.id), Activation: pbActivation(dup.a)}, d.callTimeout())
					return err
				})
				ended <- told{dup, err}
			}()
			continue
		}
		if len(q.queue) == 0 && under == 0 {
			if len(again) > 0 {
				q.queue = again
				d.mu.Unlock()
				return last
			}
			if d.mu.duplicates[on] == q {
				delete(d.mu.duplicates, on)
			}
			d.mu.Unlock()
			return nil
		}
		d.mu.Unlock()
		select {
		case t := <-ended:
			under--
			switch err := t.err; {
			case err == nil:
			case retryable(err) || errors.Is(err, context.DeadlineExceeded):
				again, last = append(again, t.dup), err
			default:
				d.log.Warn("directory: telling a duplicate to deactivate: failed", slog.String("silo", silo),
					slog.String("grain", t.dup.id.String()), slog.Any("err", err))
			}
		case <-q.more:
		}
	}
}

// maxHoldPieces is how many pieces a release may cut one hold into: a
// hold cut finer stays whole, to wait for the rest of its handoff or its
// rebuild, so that a peer's handoff of many small ranges cannot make the
// hold list, which every request to the partition scans, grow with it.
const maxHoldPieces = 16

// release ends the holds on ranges, and on the parts of holds that ranges
// cover (a handoff of part of a held range brings that part's entries),
// and runs what waited for them.
func (d *Directory) release(ranges []ring.Range) {
	ranges = merged(ranges)
	d.mu.Lock()
	var kept []hold
	for _, h := range d.mu.holds {
		rest := outside(h.r, clip(h.r, ranges))
		if len(rest) > maxHoldPieces {
			rest = []ring.Range{h.r}
		}
		kept = h.cut(rest, kept)
	}
	d.mu.holds = kept
	var run []func()
	keptParked := d.mu.parked[:0]
	for _, p := range d.mu.parked {
		if d.heldLocked(p.hash) {
			keptParked = append(keptParked, p)
			continue
		}
		run = append(run, p.run)
	}
	clear(d.mu.parked[len(keptParked):])
	d.mu.parked = keptParked
	d.mu.Unlock()
	for _, fn := range run {
		fn()
	}
}

// overlapsAny reports whether r shares a hash with one of ranges.
func overlapsAny(r ring.Range, ranges []ring.Range) bool {
	for _, o := range ranges {
		if o.First <= r.Last && r.First <= o.Last {
			return true
		}
	}
	return false
}

// rangesOf decodes ranges from the wire. A range never wraps, so one that
// ends before it begins names no hash and is left out (serve refuses a
// request that carries one: badRanges).
func rangesOf(in []*directorypb.Range) []ring.Range {
	out := make([]ring.Range, 0, len(in))
	for _, r := range in {
		if r.GetFirst() <= r.GetLast() {
			out = append(out, ring.Range{First: r.GetFirst(), Last: r.GetLast()})
		}
	}
	return out
}

// badRanges returns an error naming the first range of lists that ends
// before it begins.
func badRanges(lists ...[]*directorypb.Range) error {
	for _, rs := range lists {
		for _, r := range rs {
			if r.GetFirst() > r.GetLast() {
				return fmt.Errorf("range [%#x, %#x] ends before it begins", r.GetFirst(), r.GetLast())
			}
		}
	}
	return nil
}

// pbRanges encodes ranges for the wire.
func pbRanges(in []ring.Range) []*directorypb.Range {
	out := make([]*directorypb.Range, 0, len(in))
	for _, r := range in {
		out = append(out, &directorypb.Range{First: r.First, Last: r.Last})
	}
	return out
}

// covered reports whether r lies within one of ranges.
func covered(r ring.Range, ranges []ring.Range) bool {
	for _, o := range ranges {
		if o.First <= r.First && r.Last <= o.Last {
			return true
		}
	}
	return false
}
