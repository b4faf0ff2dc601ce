// Package directory is the grain directory of a cluster: where each grain's
// activation lives. It is partitioned over a consistent-hash ring of the
// active silos (internal/ring): the owner of a grain's hash keeps its entry,
// registration is first-writer-wins, and every silo keeps a cache of what it
// looked up. The ring follows the membership view: a silo that gains a range
// from a silo that is still alive holds requests for it until that silo hands
// its entries over; one that gains a range from a silo that died rebuilds it
// by asking every live silo what it hosts there, holding requests until it
// has. Entries that point at a silo that died are dropped; no activation is
// deactivated because a silo left, except a duplicate found while merging,
// which loses to the entry registered first.
package directory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/cluster"
	"github.com/granary-go/granary/internal/directory/directorypb"
	"github.com/granary-go/granary/internal/ring"
	"github.com/granary-go/granary/placement"
	"github.com/granary-go/granary/proxy"
)

// ServiceType is the grain type under which silos address each other's
// directory partition.
const ServiceType = "granary.system.directory.Directory"

// Defaults of Options.
const (
	DefaultCallTimeout = 5 * time.Second
	DefaultHandoffWait = 3 * time.Second
	DefaultCacheSize   = 1 << 20
)

// unseenMemory is how many grace periods a silo never seen is remembered.
const unseenMemory = 100

// Errors of the directory.
var (
	// ErrNoOwner: no active silo is in the view, so no one owns the grain.
	ErrNoOwner = errors.New("directory: no active silo owns the grain")
	// ErrClosed: the directory was closed.
	ErrClosed = errors.New("directory: closed")
)

// codeNotOwner is the application code a silo answers a directory request
// with when, by its view, another silo owns the grain: the caller's view is
// behind or ahead, and it tries again.
const codeNotOwner = 409

// Activation is where an activation lives: a silo, in one incarnation.
type Activation struct {
	Silo       string
	Generation int64
}

// Peers reaches the directory partitions of other silos.
type Peers interface {
	// Caller returns a caller whose calls reach silo.
	Caller(silo string) (proxy.Caller, error)
}

// Host is what the directory needs of this silo's activation host.
type Host interface {
	// Registered lists the grains whose activation here holds their
	// registration, or may: registering, activating or active. A rebuild
	// that counted only the active ones would miss an activation that won
	// its registration from an owner that then died, and place a second.
	Registered() []actor.GrainID
	// Deactivate deactivates the grain's activation here, if any.
	Deactivate(id actor.GrainID) bool
}

// Options configure a Directory.
type Options struct {
	// Self is this silo, as the ring knows it.
	Self ring.Silo
	// VirtualNodes per silo on the ring; zero means ring.DefaultVirtualNodes.
	VirtualNodes int
	// CallTimeout bounds each request to another silo's partition,
	// retries included, and each round of untilAnswered. Default 5 s.
	CallTimeout time.Duration
	// HandoffWait is how long a silo that gains a range from a live silo
	// waits for that silo's entries before it rebuilds the range itself.
	// Default 3 s.
	HandoffWait time.Duration
	// UnseenGrace is how long a silo that this silo's view does not have
	// counts as alive. Views converge in no particular order, so a
	// registration from a silo that joined a moment ago must hold; but a
	// silo still unseen after UnseenGrace died before this one saw it, and
	// entries that point at it (handed over by a silo that saw it) are
	// dropped. Default: HandoffWait.
	UnseenGrace time.Duration
	// DeathGrace is how long after its view loses a silo this silo's
	// partition keeps that silo's grains from being placed again: their
	// entries stay, and their lookups and registrations wait, as do those
	// of grains with no entry in the ranges gained from it. A live silo
	// declared dead (too slow to refute a suspicion) goes on serving what
	// it runs until it hears the verdict; most refute it within the
	// grace, and their grains go on where they run instead of being
	// activated a second time beside them. A crashed silo's grains are
	// placed again once the grace has passed. It ends at once when the
	// silo comes back or is seen restarted, and does not begin for a silo
	// that was shutting down. Zero: no grace, the entries are dropped
	// with the view.
	DeathGrace time.Duration
	// CacheSize bounds the cache of looked-up locations. Default 1 Mi.
	CacheSize int
	// Strategy chooses the placement strategy of a grain type; nil means
	// placement.Random for every type.
	Strategy func(grainType string) placement.Strategy
}

// Directory is one silo's part of the grain directory. It implements
// host.Directory (activations register and unregister through it) and
// rpc's Locator (the router asks it where grains live), and serves the
// requests other silos send to its partition (Serve). It is safe for
// concurrent use.
type Directory struct {
	opts  Options
	peers Peers
	host  Host
	clock clock.Clock
	log   *slog.Logger
	self  Activation

	// refusal, when set, is the error new registrations get: the silo is
	// fenced off from the majority of the cluster (silo/fence.go).
	refusal atomic.Pointer[error]

	wg sync.WaitGroup // goroutines doing remote work
	// done ends with the directory: it is the parent of the contexts of its
	// own background requests, not a caller's context.
	done   context.Context
	cancel context.CancelFunc

	mu struct {
		sync.Mutex
		closed    bool
		ring      *ring.Ring
		view      cluster.View
		live      map[string]int64 // silo -> generation, every member of the view
		partition map[actor.GrainID]Activation
		holds     []hold
		parked    []parked
		cache     map[actor.GrainID]Activation
		lookups   map[actor.GrainID][]located // lookups in flight, coalesced
		received  map[ring.Silo][]ring.Range  // ranges live silos handed over, should the view catch up later
		// unfilled holds the ranges live silos handed over while they still
		// held them, waiting for a handoff or a rebuild that had not come:
		// whoever gains them rebuilds them (HandoffRequest.unfilled).
		unfilled map[ring.Silo][]ring.Range
		// placed counts the activations this silo placed on each silo since
		// that silo's load was last published: published loads lag, and
		// strategies that weigh load would otherwise herd.
		placed map[string]int64
		gone   map[string]int64 // silos that left the view, by the generation they had
		// unseen holds when this silo first met an entry of a silo its
		// view did not have (see Options.UnseenGrace).
		unseen map[ring.Silo]time.Time

		remote int           // goroutines doing remote work
		idle   chan struct{} // closed when remote drops to 0, for Wait
		// handoffs counts the handoffs of entries this silo no longer owns
		// still on their way to the new owners (Settled).
		handoffs int
		// registrar holds, for each activation of this silo that holds its
		// grain's registration from another silo, the silo that granted
		// it: should that silo die, the activation registers again
		// (registerAgainLocked). This silo's own partition needs no entry:
		// it does not outlive itself.
		registrar map[actor.GrainID]Activation
		// unregistering holds, per grain, a channel closed when the last
		// unregistration this silo sent for it has been answered.
		unregistering map[actor.GrainID]chan struct{}
		// duplicates holds, per silo and generation, the duplicates it is
		// still to be told to deactivate, and exists while one asker tells
		// it them (deactivateDuplicate). The generation is in the key: an
		// asker ends when its silo's generation leaves the view, and what
		// it drops then must be only what died with that generation.
		duplicates map[Activation]*duplicates
		// reclaiming holds the ranges of reclaims in their first round
		// (reclaim): a grain there with no entry may be one the silo
		// asked hosts, so its lookups and registrations wait.
		reclaiming []*reclaiming
		// awaiting holds the operations parked for a reclaim's first
		// round or a death's grace, run again when one ends
		// (endReclaimWait).
		awaiting []parked
		// mourning holds, for each silo generation the view lost within
		// Options.DeathGrace, the wait on the ranges this silo gained from
		// it; its entries stay in the partition meanwhile (SetView,
		// endMourning).
		mourning map[Activation]*reclaiming
		waits    uint64 // the last hold.wait given
	}
	stats counters
}

// hold is a range whose requests wait: for the handoff of a live silo
// that owned it, or for a rebuild.
type hold struct {
	r          ring.Range
	from       ring.Silo
	rebuilding bool
	// wait names the view whose HandoffWait timer rebuilds the hold
	// (handoffOverdue); zero for a hold that rebuilds at once.
	wait uint64
}

// reclaiming is the ranges one reclaim asks a silo about, or those whose
// grains with no entry wait for a death's grace.
type reclaiming struct {
	ranges []ring.Range
	until  time.Time // when the grace ends; zero for a reclaim
	handed bool      // a grace another silo's handoff or rebuild answer began
	// owned is, for a grace, the ranges the lost silo owned in this silo's
	// ring when the view lost it: what a handoff or an answer to another
	// silo's rebuild tells of the grace (handedGracesLocked).
	owned []ring.Range
}

// awaitReclaimLocked makes lookups and registrations of grains without an
// entry in ranges wait (awaitsReclaimLocked) until endReclaimWait.
func (d *Directory) awaitReclaimLocked(ranges []ring.Range) *reclaiming {
	w := &reclaiming{ranges: ranges}
	d.mu.reclaiming = append(d.mu.reclaiming, w)
	return w
}

// endReclaimWait ends the waits ws and runs again, once, what waited for
// them (what still waits for another reclaim parks again).
func (d *Directory) endReclaimWait(ws ...*reclaiming) {
	if len(ws) == 0 {
		return
	}
	d.mu.Lock()
	d.mu.reclaiming = slices.DeleteFunc(d.mu.reclaiming, func(o *reclaiming) bool { return slices.Contains(ws, o) })
	run := d.mu.awaiting
	d.mu.awaiting = nil
	d.mu.Unlock()
	for _, p := range run {
		p.run()
	}
}

// parkForReclaimLocked parks run until a reclaim's wait ends.
func (d *Directory) parkForReclaimLocked(h uint64, run func()) {
	d.mu.awaiting = append(d.mu.awaiting, parked{hash: h, run: run})
}

// awaitsReclaimLocked reports whether a lookup or a registration of id
// must wait for a reclaim or a death's grace: the partition has no live
// entry for it, and its entry is of a silo in its grace (mourning), or a
// reclaim in its first round, or the end of a grace, may bring one.
func (d *Directory) awaitsReclaimLocked(id actor.GrainID, h uint64) bool {
	if len(d.mu.reclaiming) == 0 {
		return false
	}
	if a, ok := d.mu.partition[id]; ok {
		if d.liveLocked(a) {
			return false
		}
		if _, mourned := d.mu.mourning[a]; mourned {
			return true
		}
	}
	for _, r := range d.mu.reclaiming {
		for _, rg := range r.ranges {
			if rg.Contains(h) {
				return true
			}
		}
	}
	return false
}

// parked is an operation that waits for its grain's range to be released,
// or for a reclaim's first round (awaitsReclaimLocked).
type parked struct {
	hash uint64
	run  func()
}

type counters struct {
	registrations, conflicts, lookups, remoteLookups, cacheHits atomic.Int64
	handoffsSent, handoffsReceived, rebuilds, dropped           atomic.Int64
	asking                                                      atomic.Int64 // untilAnswered's rounds under way
}

// Stats are a directory's counters.
type Stats struct {
	Partition        int   // entries this silo owns
	Cached           int   // locations in the cache
	Held             int   // ranges whose requests wait
	Mourning         int   // silos the view lost that are still in their DeathGrace
	Registrations    int64 // registrations this silo's partition decided
	Conflicts        int64 // duplicates found while merging handoffs and rebuilds
	Lookups          int64 // locations asked for
	RemoteLookups    int64 // of them, asked of another silo
	CacheHits        int64 // of them, answered by the cache
	HandoffsSent     int64
	HandoffsReceived int64
	Rebuilds         int64 // ranges rebuilt after their owner died
	Dropped          int64 // entries dropped because their silo died
	// Asking counts the requests that ask a silo, round after round, what
	// it hosts or to deactivate a duplicate, until it answers or leaves.
	Asking int64
}

// New returns the directory of the silo opts.Self. It does nothing until the
// first SetView.
func New(opts Options, peers Peers, h Host, c clock.Clock, log *slog.Logger) *Directory {
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.HandoffWait <= 0 {
		opts.HandoffWait = DefaultHandoffWait
	}
	if opts.UnseenGrace <= 0 {
		opts.UnseenGrace = opts.HandoffWait
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if c == nil {
		c = clock.Real{}
	}
	if log == nil {
		log = slog.Default()
	}
	d := &Directory{opts: opts, peers: peers, host: h, clock: c, log: log,
		self: Activation{Silo: opts.Self.ID, Generation: opts.Self.Generation}}
	d.done, d.cancel = context.WithCancel(context.Background())
	d.mu.ring = ring.New(nil, opts.VirtualNodes)
	d.mu.live = make(map[string]int64)
	d.mu.partition = make(map[actor.GrainID]Activation)
	d.mu.cache = make(map[actor.GrainID]Activation)
	d.mu.lookups = make(map[actor.GrainID][]located)
	d.mu.received = make(map[ring.Silo][]ring.Range)
	d.mu.unfilled = make(map[ring.Silo][]ring.Range)
	d.mu.placed = make(map[string]int64)
	d.mu.gone = make(map[string]int64)
	d.mu.unseen = make(map[ring.Silo]time.Time)
	d.mu.unregistering = make(map[actor.GrainID]chan struct{})
	d.mu.registrar = make(map[actor.GrainID]Activation)
	d.mu.duplicates = make(map[Activation]*duplicates)
	d.mu.mourning = make(map[Activation]*reclaiming)
	return d
}

// Stats returns the directory's counters.
func (d *Directory) Stats() Stats {
	d.mu.Lock()
	partition, cached, held, mourning := len(d.mu.partition), len(d.mu.cache), len(d.mu.holds), len(d.mu.mourning)
	d.mu.Unlock()
	s := &d.stats
	return Stats{
		Partition: partition, Cached: cached, Held: held, Mourning: mourning,
		Registrations: s.registrations.Load(), Conflicts: s.conflicts.Load(), Lookups: s.lookups.Load(),
		RemoteLookups: s.remoteLookups.Load(), CacheHits: s.cacheHits.Load(),
		HandoffsSent: s.handoffsSent.Load(), HandoffsReceived: s.handoffsReceived.Load(),
		Rebuilds: s.rebuilds.Load(), Dropped: s.dropped.Load(), Asking: s.asking.Load(),
	}
}

// Close stops the directory's background work and fails what waits.
func (d *Directory) Close() {
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return
	}
	d.mu.closed = true
	d.cancel()
	d.mu.holds = nil // a handoff timer that fires later finds nothing
	parked := append(d.mu.parked, d.mu.awaiting...)
	d.mu.parked, d.mu.awaiting = nil, nil
	lookups := d.mu.lookups
	d.mu.lookups = make(map[actor.GrainID][]located)
	d.mu.Unlock()
	for _, p := range parked {
		p.run() // released: each operation sees the directory closed
	}
	for _, dones := range lookups {
		for _, done := range dones {
			done("", false, ErrClosed)
		}
	}
	d.wg.Wait()
}

// goRemote runs fn on a goroutine the directory owns, unless it is closed.
func (d *Directory) goRemote(fn func(ctx context.Context)) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.closed {
		return false
	}
	d.wg.Add(1)
	d.mu.remote++
	go func() {
		defer d.wg.Done()
		defer d.remoteDone()
		ctx, cancel := context.WithTimeout(d.done, d.opts.CallTimeout)
		defer cancel()
		fn(ctx)
	}()
	return true
}

// liveLocked reports whether a lives on a silo that may be alive.
//
// A silo of the view is alive in the generation the view has. A silo that
// left the view is dead in the generation it had and in every older one,
// and so is an older generation of a silo the view has. Any other silo has
// not been seen yet:
// views converge in no particular order, so it counts as alive for
// Options.UnseenGrace after this silo first met it, and as dead after.
func (d *Directory) liveLocked(a Activation) bool {
	if gen, ok := d.mu.live[a.Silo]; ok {
		if gen == a.Generation {
			return true
		}
		if a.Generation < gen {
			return false
		}
	} else if gen, gone := d.mu.gone[a.Silo]; gone && a.Generation <= gen {
		return false
	}
	key := ring.Silo{ID: a.Silo, Generation: a.Generation}
	now := d.clock.Now()
	first, met := d.mu.unseen[key]
	if !met {
		d.mu.unseen[key] = now
		return true
	}
	return now.Sub(first) < d.opts.UnseenGrace
}

// ownerLocked returns the silo that owns h by this silo's view.
func (d *Directory) ownerLocked(h uint64) (ring.Silo, bool) { return d.mu.ring.Owner(h) }

// heldLocked reports whether h lies in a held range.
func (d *Directory) heldLocked(h uint64) bool {
	for _, hd := range d.mu.holds {
		if hd.r.Contains(h) {
			return true
		}
	}
	return false
}

// parkLocked makes run wait for h's range to be released.
func (d *Directory) parkLocked(h uint64, run func()) {
	d.mu.parked = append(d.mu.parked, parked{hash: h, run: run})
}

// winnerOf turns the grain's registered activation into what the host's
// Register callback expects: "" for this silo's activation.
func (d *Directory) winnerOf(a Activation) string {
	if a == d.self {
		return ""
	}
	return a.Silo
}

// cacheLocked remembers a grain's location, forgetting an arbitrary one
// when the cache is full.
func (d *Directory) cacheLocked(id actor.GrainID, a Activation) {
	if _, ok := d.mu.cache[id]; !ok && len(d.mu.cache) >= d.opts.CacheSize {
		for k := range d.mu.cache {
			delete(d.mu.cache, k)
			break
		}
	}
	d.mu.cache[id] = a
}

// Forget drops the cached location of a grain, when a call to it found it
// gone.
func (d *Directory) Forget(id actor.GrainID) {
	d.mu.Lock()
	delete(d.mu.cache, id)
	d.mu.Unlock()
}

// Moved records that a grain lives on silo, as a reply relayed through
// another silo said.
func (d *Directory) Moved(id actor.GrainID, silo string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if gen, ok := d.mu.live[silo]; ok {
		d.cacheLocked(id, Activation{Silo: silo, Generation: gen})
	}
}

// Cached returns the silo a grain's activation was last seen on, when it is
// known and that silo is live. It does no I/O.
func (d *Directory) Cached(id actor.GrainID) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.mu.cache[id]
	if !ok || !d.liveLocked(a) || a == d.self {
		return "", false // this silo's own activations are found by the host, not here
	}
	d.stats.cacheHits.Add(1)
	return a.Silo, true
}

// place chooses the silo for a new activation of id among the active
// silos of the view.
func (d *Directory) place(id actor.GrainID, hint string) (string, error) {
	d.mu.Lock()
	candidates := make([]placement.Candidate, 0, len(d.mu.view.Members))
	for _, m := range d.mu.view.Members {
		if m.Status == cluster.StatusActive {
			candidates = append(candidates, placement.Candidate{Silo: m.ID, Load: m.Load + d.mu.placed[m.ID]})
		}
	}
	d.mu.Unlock()
	var strategy placement.Strategy = placement.Random{}
	if d.opts.Strategy != nil {
		if s := d.opts.Strategy(id.Type); s != nil {
			strategy = s
		}
	}
	silo, err := placement.Place(strategy, &placement.Request{Grain: id, Candidates: candidates, Local: d.self.Silo, Hint: hint})
	if err != nil {
		return "", fmt.Errorf("directory: place %s: %w", id, err)
	}
	d.mu.Lock()
	d.mu.placed[silo]++
	d.mu.Unlock()
	return silo, nil
}

// located is the callback of Locate: the silo, and whether placement chose
// it for a grain that had no activation.
type located = func(silo string, placed bool, err error)

// Locate implements the router's Locator: it finds the silo that holds
// id's activation, or, when the grain has none, the silo placement
// chooses for it (placed). done is called once, maybe before Locate
// returns.
func (d *Directory) Locate(id actor.GrainID, hint string, done located) {
	d.stats.lookups.Add(1)
	h := ring.Hash(id)
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		done("", false, ErrClosed)
		return
	}
	if a, ok := d.mu.cache[id]; ok && d.liveLocked(a) && a != d.self {
		d.mu.Unlock()
		d.stats.cacheHits.Add(1)
		done(a.Silo, false, nil)
		return
	}
	if waiting, ok := d.mu.lookups[id]; ok {
		d.mu.lookups[id] = append(waiting, done)
		d.mu.Unlock()
		return
	}
	owner, ok := d.ownerLocked(h)
	if !ok {
		d.mu.Unlock()
		done("", false, ErrNoOwner)
		return
	}
	if owner.ID == d.self.Silo {
		if d.heldLocked(h) {
			d.parkLocked(h, func() { d.Locate(id, hint, done) })
			d.mu.Unlock()
			return
		}
		if d.awaitsReclaimLocked(id, h) {
			d.parkForReclaimLocked(h, func() { d.Locate(id, hint, done) })
			d.mu.Unlock()
			return
		}
		a, found := d.mu.partition[id]
		found = found && d.liveLocked(a)
		if found {
			d.cacheLocked(id, a)
		}
		d.mu.Unlock()
		if found {
			done(a.Silo, false, nil)
			return
		}
		silo, err := d.place(id, hint)
		done(silo, err == nil, err)
		return
	}
	d.mu.lookups[id] = []located{done}
	d.mu.Unlock()
	d.stats.remoteLookups.Add(1)
	if !d.goRemote(func(ctx context.Context) { d.remoteLookup(ctx, id, hint) }) {
		d.finishLookup(id, "", false, ErrClosed)
	}
}

// finishLookup answers every Locate waiting for id's lookup.
func (d *Directory) finishLookup(id actor.GrainID, silo string, placed bool, err error) {
	d.mu.Lock()
	dones := d.mu.lookups[id]
	delete(d.mu.lookups, id)
	d.mu.Unlock()
	for _, done := range dones {
		done(silo, placed, err)
	}
}

// Refuse makes the directory refuse every new registration with err, this
// silo's own and those other silos send its partition, until Refuse(nil):
// a silo fenced off from the majority of the cluster starts no activation
// and records none. Lookups and unregistrations go on.
func (d *Directory) Refuse(err error) {
	if err == nil {
		d.refusal.Store(nil)
		return
	}
	d.refusal.Store(&err)
}

// refused returns the error new registrations get, or nil.
func (d *Directory) refused() error {
	if p := d.refusal.Load(); p != nil {
		return *p
	}
	return nil
}

// Register implements host.Directory: it records this silo's activation of
// id with the grain's owner, first writer winning.
func (d *Directory) Register(id actor.GrainID, done func(winner string, err error)) {
	if err := d.refused(); err != nil {
		done("", err)
		return
	}
	h := ring.Hash(id)
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		done("", ErrClosed)
		return
	}
	if prev := d.mu.unregistering[id]; prev != nil {
		// An earlier activation's unregistration is on its way. Entries
		// name a silo, not an activation: sent first, this registration
		// would find that activation's entry, keep it as its own, and then
		// lose it to the late unregistration, leaving the new activation
		// running with no entry, and the next call to place the grain
		// elsewhere.
		d.mu.Unlock()
		if !d.goRemote(func(ctx context.Context) {
			select {
			case <-prev:
				d.Register(id, done)
			case <-ctx.Done():
				done("", fmt.Errorf("directory: register %s: waiting for its unregistration: %w", id, ctx.Err()))
			}
		}) {
			done("", ErrClosed)
		}
		return
	}
	owner, ok := d.ownerLocked(h)
	if !ok {
		d.mu.Unlock()
		done("", ErrNoOwner)
		return
	}
	if owner.ID == d.self.Silo {
		if d.heldLocked(h) {
			d.parkLocked(h, func() { d.Register(id, done) })
			d.mu.Unlock()
			return
		}
		if d.awaitsReclaimLocked(id, h) {
			d.parkForReclaimLocked(h, func() { d.Register(id, done) })
			d.mu.Unlock()
			return
		}
		winner := d.registerLocked(id, d.self)
		d.cacheLocked(id, winner)
		d.mu.Unlock()
		done(d.winnerOf(winner), nil)
		return
	}
	d.mu.Unlock()
	if !d.goRemote(func(ctx context.Context) {
		winner, registrar, err := d.remoteRegister(ctx, id)
		if err != nil {
			done("", err)
			return
		}
		d.mu.Lock()
		d.cacheLocked(id, winner)
		if winner == d.self && registrar != d.self {
			d.mu.registrar[id] = registrar
		}
		d.mu.Unlock()
		done(d.winnerOf(winner), nil)
	}) {
		done("", ErrClosed)
	}
}

// registerLocked decides a registration in this silo's partition: the
// grain's live activation if it has one, else a.
func (d *Directory) registerLocked(id actor.GrainID, a Activation) Activation {
	d.stats.registrations.Add(1)
	if cur, ok := d.mu.partition[id]; ok && d.liveLocked(cur) {
		return cur
	}
	d.mu.partition[id] = a
	return a
}

// Unregister implements host.Directory: it removes this silo's activation
// of id from the grain's owner.
func (d *Directory) Unregister(id actor.GrainID) {
	h := ring.Hash(id)
	d.mu.Lock()
	delete(d.mu.registrar, id)
	if d.mu.cache[id] == d.self {
		delete(d.mu.cache, id)
	}
	if d.mu.closed {
		d.mu.Unlock()
		return
	}
	owner, ok := d.ownerLocked(h)
	prev := d.mu.unregistering[id]
	if ok && owner.ID == d.self.Silo && prev == nil {
		if d.mu.partition[id] == d.self {
			delete(d.mu.partition, id)
		}
		d.mu.Unlock()
		return
	}
	// Registrations of the grain wait for this one to be answered, and
	// this one for the one before it (see Register).
	sent := make(chan struct{})
	d.mu.unregistering[id] = sent
	d.mu.Unlock()
	finish := func() {
		d.mu.Lock()
		if d.mu.unregistering[id] == sent {
			delete(d.mu.unregistering, id)
		}
		d.mu.Unlock()
		close(sent)
	}
	if !d.goRemote(func(ctx context.Context) {
		defer finish()
		if prev != nil {
			select {
			case <-prev:
			case <-ctx.Done():
				return
			}
		}
		d.remoteUnregister(ctx, id)
	}) {
		finish()
	}
}

// randomDelay is a short pause between tries of a request another silo
// refused because its view differs from this one's.
func randomDelay() time.Duration { return time.Duration(5+rand.IntN(20)) * time.Millisecond }

// Find asks the grain's owner where its activation lives, without placing
// anything: found is false when it has none.
func (d *Directory) Find(ctx context.Context, id actor.GrainID) (silo string, found bool, err error) {
	h := ring.Hash(id)
	for {
		d.mu.Lock()
		owner, ok := d.ownerLocked(h)
		if !ok {
			d.mu.Unlock()
			return "", false, ErrNoOwner
		}
		if owner.ID == d.self.Silo && !d.heldLocked(h) && !d.awaitsReclaimLocked(id, h) {
			a, ok := d.mu.partition[id]
			ok = ok && d.liveLocked(a)
			d.mu.Unlock()
			return a.Silo, ok, nil
		}
		d.mu.Unlock()
		var reply *directorypb.LookupReply
		err := d.ownerCall(ctx, h, func(ref directorypb.DirectoryRef) (err error) {
			reply, err = ref.Lookup(ctx, &directorypb.LookupRequest{Grain: pbGrain(id)}, d.callTimeout())
			return err
		})
		switch {
		case errors.Is(err, errSelfOwner):
			if serr := sleep(ctx, randomDelay()); serr != nil { // held here: wait for the release
				return "", false, serr
			}
			continue
		case err != nil:
			return "", false, err
		}
		return reply.GetActivation().GetSilo(), reply.GetFound(), nil
	}
}

// remoteDone counts a goroutine of remote work out.
func (d *Directory) remoteDone() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.remote--
	if d.mu.remote == 0 && d.mu.idle != nil {
		close(d.mu.idle)
		d.mu.idle = nil
	}
}

// Settled reports whether the directory has caught up with the view it
// was given last, version or later: it took that view, holds no range for
// a handoff or a rebuild, and has handed over every entry it no longer
// owns. A silo fenced off from the majority serves again only once its
// directory is settled on the healed view (silo/fence.go): before, its
// ring may still be its own side's, and it would place grains that the
// majority's silos host.
func (d *Directory) Settled(version uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.mu.closed && d.mu.view.Version >= version && len(d.mu.holds) == 0 && d.mu.handoffs == 0
}

// Wait waits, within ctx, for the directory's requests to other silos
// (unregistrations, handoffs) to finish.
func (d *Directory) Wait(ctx context.Context) error {
	d.mu.Lock()
	if d.mu.remote == 0 {
		d.mu.Unlock()
		return nil
	}
	if d.mu.idle == nil {
		d.mu.idle = make(chan struct{})
	}
	idle := d.mu.idle
	d.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
