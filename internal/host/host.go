package host

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/delivery"
	"github.com/granary-go/granary/proxy"
)

// Defaults of HostOptions.
const (
	DefaultCollectionAge       = 15 * time.Minute
	DefaultCollectionQuantum   = time.Minute
	DefaultActivationTimeout   = 30 * time.Second
	DefaultDeactivationTimeout = 30 * time.Second
	DefaultMaxWait             = 30 * time.Second
)

// HostOptions are the data settings of a Host.
type HostOptions struct {
	// CollectionAge is how long an activation may stay idle before it is
	// deactivated. Default 15 minutes.
	CollectionAge time.Duration
	// CollectionQuantum is how often idle activations are looked for.
	// Default one minute, or half the shortest collection age (a kind's
	// included) when that is shorter.
	CollectionQuantum time.Duration
	// ActivationTimeout bounds loading state and OnActivate. Default 30 s.
	ActivationTimeout time.Duration
	// DeactivationTimeout bounds OnDeactivate and the final flush.
	// Default 30 s.
	DeactivationTimeout time.Duration
	// MaxActivations, when positive, bounds the activations alive on the
	// host: a request that would create one more is refused with
	// proxy.ErrOverloaded. Zero (the default) sets no bound.
	MaxActivations int
	// MaxWait is the deadline of a deferred reply whose call carries
	// neither a budget nor a response timeout (actor.Deferred.Deadline),
	// so that a queued call is answered rather than held for ever.
	// Default 30 s.
	MaxWait time.Duration
}

// EnsureDefaults fills zero fields with their defaults.
func (o *HostOptions) EnsureDefaults() {
	if o.CollectionAge == 0 {
		o.CollectionAge = DefaultCollectionAge
	}
	if o.CollectionQuantum == 0 {
		o.CollectionQuantum = min(DefaultCollectionQuantum, o.CollectionAge/2)
	}
	if o.ActivationTimeout == 0 {
		o.ActivationTimeout = DefaultActivationTimeout
	}
	if o.DeactivationTimeout == 0 {
		o.DeactivationTimeout = DefaultDeactivationTimeout
	}
	if o.MaxWait == 0 {
		o.MaxWait = DefaultMaxWait
	}
}

// Validate reports every invalid field.
func (o *HostOptions) Validate() error {
	var errs []error
	if o.CollectionAge < 0 {
		errs = append(errs, fmt.Errorf("host: CollectionAge %v is negative", o.CollectionAge))
	}
	if o.CollectionQuantum < 0 {
		errs = append(errs, fmt.Errorf("host: CollectionQuantum %v is negative", o.CollectionQuantum))
	}
	if o.ActivationTimeout < 0 {
		errs = append(errs, fmt.Errorf("host: ActivationTimeout %v is negative", o.ActivationTimeout))
	}
	if o.DeactivationTimeout < 0 {
		errs = append(errs, fmt.Errorf("host: DeactivationTimeout %v is negative", o.DeactivationTimeout))
	}
	if o.MaxWait < 0 {
		errs = append(errs, fmt.Errorf("host: MaxWait %v is negative", o.MaxWait))
	}
	if o.MaxActivations < 0 {
		errs = append(errs, fmt.Errorf("host: MaxActivations %d is negative", o.MaxActivations))
	}
	return errors.Join(errs...)
}

// HostOption injects behaviour into a Host.
type HostOption func(*Host)

// WithClock sets the clock used for idle collection and grain timers.
func WithClock(c clock.Clock) HostOption { return func(h *Host) { h.clock = c } }

// WithAdmission sets what each turn of grain code asks first: a non-nil
// error refuses the turn (a request is answered with it) and deactivates
// the grain. The silo's fences use it: a silo that may have been taken
// for dead runs no grain code. Default: every turn runs.
func WithAdmission(admit func() error) HostOption { return func(h *Host) { h.admit = admit } }

// WithLogger sets the logger of the host and of its actor system.
func WithLogger(l *slog.Logger) HostOption { return func(h *Host) { h.log = l } }

// Owner is what runs a Host (a *silo.Silo): its grains call other grains
// through its caller (CallerOf, silo.CallerOf).
type Owner interface {
	// Caller returns the owner's caller.
	Caller() proxy.Caller
}

// WithOwner records what runs this Host.
func WithOwner(owner Owner) HostOption { return func(h *Host) { h.owner = owner } }

// WithStateStore gives activations persistent state.
func WithStateStore(s StateStore) HostOption { return func(h *Host) { h.store = s } }

// WithDirectory sets where activations register. Default: a directory of
// this host alone, in which every registration wins.
func WithDirectory(d Directory) HostOption { return func(h *Host) { h.locator = d } }

// WithRouter sets where requests go that no activation on this host
// serves. Default: none, so the host activates every grain it is asked
// for and cannot forward.
func WithRouter(r Router) HostOption { return func(h *Host) { h.router = r } }

// Directory is the grain directory as the host uses it: a new activation
// registers before it loads state or runs OnActivate, and a deactivated
// one unregisters after its final flush.
type Directory interface {
	// Register registers this host's activation of id. done receives ""
	// when it is now the grain's activation, the silo that holds the
	// grain's activation when another registered first, or the error that
	// kept the directory from answering. done may be called before
	// Register returns, or later from any goroutine, exactly once.
	Register(id actor.GrainID, done func(winner string, err error))
	// Unregister removes this host's activation of id.
	Unregister(id actor.GrainID)
}

// Router sends on the requests this host does not serve itself.
type Router interface {
	// Route finds where a request for a grain with no activation here
	// goes: the router calls the host's Activate when the grain belongs
	// here, and sends it on otherwise.
	Route(req *Request)
	// Forward sends a request to the silo that holds its grain's
	// activation, as an activation that lost its registration does.
	Forward(req *Request, silo string)
}

// soleDirectory is the directory of a host alone: every registration wins.
type soleDirectory struct{}

func (soleDirectory) Register(_ actor.GrainID, done func(string, error)) { done("", nil) }
func (soleDirectory) Unregister(actor.GrainID)                           {}

// StateStore opens the persistent state of an activation. schedule runs a
// function inside a later turn of the activation (false once it is gone);
// snapshot encodes the grain's state and is only called inside turns.
type StateStore interface {
	// OpenState reads id's stored state (nil when there is none) and
	// opens the record that writes it from then on.
	OpenState(ctx context.Context, id actor.GrainID, schedule func(func()) bool, snapshot func() ([]byte, error)) (StateRecord, []byte, error)
}

// StateRecord is an activation's handle on its stored state. A record that
// also has a method OnConflict(func(error)), as persistence.Record does, is
// given a function that deactivates the activation when a background write
// of its state conflicts (the state is stale), so that the next call
// reloads it.
type StateRecord interface {
	// MarkDirty records that the state changed.
	MarkDirty()
	// Flush writes the state now.
	Flush(ctx context.Context) error
	// Clear deletes the stored state.
	Clear(ctx context.Context) error
	// Close writes what is dirty and closes the record.
	Close(ctx context.Context) error
}

// Host keeps the activations of one silo: it creates an activation on the
// first request for a grain, runs each on its own protoactor actor, and
// deactivates idle ones. It is safe for concurrent use.
type Host struct {
	opts    HostOptions
	clock   clock.Clock
	admit   func() error // WithAdmission; nil: every turn runs
	log     *slog.Logger
	store   StateStore
	owner   Owner // nil when nothing said
	locator Directory
	router  Router
	system  *protoactor.ActorSystem
	kinds   map[string]*Kind
	disp    *workerDispatcher
	spawner spawner // spawns the activations' actors from one Props

	// calls counts each kind's calls by method and outcome, in the order
	// the kinds were given; observer times them when set.
	calls    []*kindCalls
	observer func(grainType, method string) CallObserver

	shutdown sync.Once
	// draining is set once Stop begins: deactivations hand their final
	// state writes to the store's writers (Record.CloseQueued).
	draining atomic.Bool
	// passToken holds a token while a deactivation pass (a stop's or the
	// collector's) runs; passSlots a token per deactivation a pass asked
	// for that has not finished (activation.asked).
	passToken, passSlots chan struct{}
	// stopCh is closed when Stop begins: a collection pass gives up.
	stopCh chan struct{}
	// passes joins the collector's passes.
	passes sync.WaitGroup

	mu struct {
		sync.RWMutex
		acts      catalog
		started   bool
		stopping  bool
		collector clock.Timer
		empty     chan struct{} // closed when acts becomes empty while stopping
		// unregistering: grains whose activation is gone and whose
		// registration stays until their final write lands
		// (activation.deactivateNow).
		unregistering map[actor.GrainID]struct{}
	}
	stats hostCounters
}

type hostCounters struct {
	activations, deactivations, activationFailures atomic.Int64
	invocations, skippedCancelled, panics          atomic.Int64
	timersArmed, deferred, refusedActivations      atomic.Int64
}

// HostStats is a snapshot of a Host's counters, for tests and metrics.
type HostStats struct {
	Active             int   // activations alive now
	Activations        int64 // activations created
	Deactivations      int64 // activations deactivated
	ActivationFailures int64 // activations whose load or OnActivate failed
	Invocations        int64 // grain methods invoked
	SkippedCancelled   int64 // queued requests dropped because their caller cancelled
	Panics             int64 // grain methods, timers and callbacks that panicked
	TimersArmed        int64 // grain timers and deferred deadlines armed
	Deferred           int64 // replies deferred by grains
	RefusedActivations int64 // activations refused: the host's bound, or a connection's budget
}

// NewHost returns a host for the given kinds. It does no I/O.
func NewHost(opts HostOptions, kinds []*Kind, optFns ...HostOption) (*Host, error) {
	if opts.CollectionQuantum == 0 {
		// The default quantum follows the shortest age, a kind's included.
		shortest := cmp.Or(opts.CollectionAge, DefaultCollectionAge)
		for _, k := range kinds {
			if k != nil && k.CollectionAge > 0 {
				shortest = min(shortest, k.CollectionAge)
			}
		}
		opts.CollectionQuantum = min(DefaultCollectionQuantum, shortest/2)
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	h := &Host{opts: opts, clock: clock.Real{}, log: slog.Default(), locator: soleDirectory{}, kinds: make(map[string]*Kind, len(kinds))}
	for _, fn := range optFns {
		fn(h)
	}
	for _, k := range kinds {
		if k.Type == "" || k.New == nil || k.Dispatcher == nil {
			return nil, fmt.Errorf("host: kind %q is incomplete", k.Type)
		}
		if _, dup := h.kinds[k.Type]; dup {
			return nil, fmt.Errorf("host: grain type %q registered twice", k.Type)
		}
		h.kinds[k.Type] = k
	}
	for _, k := range kinds {
		h.calls = append(h.calls, newKindCalls(k, h.observer))
	}
	h.mu.acts.init()
	h.passToken = make(chan struct{}, 1)
	h.stopCh = make(chan struct{})
	h.passSlots = make(chan struct{}, stopWindow)
	return h, nil
}

// kindCalls returns the call counters of kind; once per activation.
func (h *Host) kindCalls(kind *Kind) *kindCalls {
	for _, kc := range h.calls {
		if kc.grainType == kind.Type {
			return kc
		}
	}
	panic("host: no call counters for kind " + kind.Type) // NewHost made one per kind
}

// Kind returns the registered kind of a grain type, or nil.
func (h *Host) Kind(grainType string) *Kind { return h.kinds[grainType] }

// Start creates the actor system and starts idle collection. A host that
// was stopped cannot be started again.
func (h *Host) Start(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.started {
		return nil
	}
	logger := h.log
	h.system = protoactor.NewActorSystem(
		protoactor.WithLoggerFactory(func(*protoactor.ActorSystem) *slog.Logger { return logger }),
	)
	compactRegistry(h.system)
	// A panic that escapes a turn (grain code's panics are contained; this
	// would be the runtime's own) makes protoactor suspend the actor and
	// ask its supervisor. The default one stops an actor after ten
	// failures in ten seconds, which would leave its activation in the
	// catalog with a mailbox nobody processes: requests lost, Stop
	// waiting for ever. Activations restart in place instead, always:
	// WithGuardian sets the root context's guardian, which supervises
	// every actor spawned from it.
	h.system.Root.WithGuardian(protoactor.NewRestartingStrategy())
	h.disp = newWorkerDispatcher()
	h.spawner.init(h.system.Root, h.disp)
	h.mu.started = true
	h.mu.collector = h.clock.AfterFunc(h.opts.CollectionQuantum, h.collect)
	return nil
}

// registryBuckets is how many buckets of 32 locked maps a host's actor
// system keeps its processes in.
const registryBuckets = 16

// compactRegistry replaces the process registry protoactor builds, 1024
// buckets of 32 maps (2.8 MB of small objects), with registryBuckets
// buckets, moving the processes the system registered for itself. The
// registry is consulted when an activation is spawned or stopped, not per
// message (a PID caches its process), and 512 locks are plenty on any
// machine; but every garbage collection cycle marks whatever is live, and
// 32,768 empty maps made up most of a busy silo's live heap, so the
// collector's work per cycle (and what allocating goroutines pay towards
// it) shrinks several-fold. It must run before anything else uses sys.
func compactRegistry(sys *protoactor.ActorSystem) {
	old := sys.ProcessRegistry.LocalPIDs
	sm := &protoactor.SliceMap{LocalPIDs: make([]cmap.ConcurrentMap, registryBuckets)}
	for i := range sm.LocalPIDs {
		sm.LocalPIDs[i] = cmap.New()
	}
	for _, bucket := range old.LocalPIDs {
		bucket.IterCb(func(id string, p any) { sm.GetBucket(id).Set(id, p) })
	}
	sys.ProcessRegistry.LocalPIDs = sm
}

// Deliver hands a request to the grain's activation on this host. When
// the grain has none here, the request goes to the host's router, which
// decides where the grain lives (with no router, the host activates it).
func (h *Host) Deliver(req *Request) {
	h.mu.RLock()
	if a := h.mu.acts.get(req.Target); a != nil {
		a.post(req)
		h.mu.RUnlock()
		return
	}
	h.mu.RUnlock()
	h.route(req)
}

// route sends a request for a grain with no activation here to the router.
func (h *Host) route(req *Request) {
	if h.router != nil {
		h.router.Route(req)
		return
	}
	h.Activate(req)
}

// admitActivation decides whether req may create an activation: the host's
// bound, then the budget of the connection req came on. h.mu must be held.
func (h *Host) admitActivation(req *Request) error {
	if h.opts.MaxActivations > 0 && h.mu.acts.len() >= h.opts.MaxActivations {
		h.stats.refusedActivations.Add(1)
		return fmt.Errorf("%w: %d activations, the silo's limit", proxy.ErrOverloaded, h.opts.MaxActivations)
	}
	if err := delivery.SpendActivation(req); err != nil {
		h.stats.refusedActivations.Add(1)
		return err
	}
	return nil
}

// forward sends req to the silo that holds its grain's activation.
func (h *Host) forward(req *Request, silo string) {
	if h.router == nil {
		req.Reply.Reply(req, nil, fmt.Errorf("%w: %s lives on silo %s and this host cannot forward", actor.ErrUnavailable, req.Target, silo))
		req.Release()
		return
	}
	h.router.Forward(req, silo)
}

// Activate hands a request to the grain's activation on this host,
// creating the activation first when there is none; the router calls it
// for grains that belong here. Unknown grain types and a stopping host are
// answered at once through req.Reply.
func (h *Host) Activate(req *Request) {
	kind := h.kinds[req.Target.Type]
	if kind == nil {
		req.Reply.Reply(req, nil, fmt.Errorf("%w: %q", actor.ErrUnknownGrainType, req.Target.Type))
		req.Release()
		return
	}
	h.mu.Lock()
	if h.mu.stopping || !h.mu.started {
		h.mu.Unlock()
		req.Reply.Reply(req, nil, actor.ErrStopping)
		req.Release()
		return
	}
	a := h.mu.acts.get(req.Target)
	if a == nil {
		if err := h.admitActivation(req); err != nil {
			h.mu.Unlock()
			req.Reply.Reply(req, nil, err)
			req.Release()
			return
		}
		a = h.newActivation(kind, req.Target)
		h.mu.acts.add(a)
		a.post(activateMsg{})
	}
	a.post(req)
	h.mu.Unlock()
}

// DeliverInline is Deliver for a goroutine that may run grain code (never a
// transport reader), for requests that all call the same grain, in order.
// When the grain is active, they reach its mailbox as one message (one post
// instead of one per request; each still runs in a turn of its own), and
// when the mailbox was idle DeliverInline returns its processing, which runs
// their turns, for the caller to run next instead of waking a worker; the
// caller must run it promptly, since the mailbox counts as running until it
// does. Otherwise it delivers each request as Deliver does and returns nil.
// reqs is not retained.
func (h *Host) DeliverInline(reqs []*Request) (run func()) {
	if len(reqs) == 0 {
		return nil
	}
	// Only activations of registered kinds exist, so finding one is enough:
	// the kind is checked, by Activate, only when there is none.
	h.mu.RLock()
	if a := h.mu.acts.get(reqs[0].Target); a != nil {
		for i, req := range reqs[:len(reqs)-1] {
			req.Next = reqs[i+1]
		}
		run = a.postInline(reqs[0])
		h.mu.RUnlock()
		return run
	}
	h.mu.RUnlock()
	for _, req := range reqs {
		h.Deliver(req)
	}
	return nil
}

// Stats returns the host's counters.
func (h *Host) Stats() HostStats {
	h.mu.RLock()
	active := h.mu.acts.len()
	h.mu.RUnlock()
	return HostStats{
		Active:             active,
		Activations:        h.stats.activations.Load(),
		Deactivations:      h.stats.deactivations.Load(),
		ActivationFailures: h.stats.activationFailures.Load(),
		Invocations:        h.stats.invocations.Load(),
		SkippedCancelled:   h.stats.skippedCancelled.Load(),
		Panics:             h.stats.panics.Load(),
		TimersArmed:        h.stats.timersArmed.Load(),
		Deferred:           h.stats.deferred.Load(),
		RefusedActivations: h.stats.refusedActivations.Load(),
	}
}

// IsActive reports whether id has an activation on this host that runs
// its requests.
//
// An activation that is still registering, or that lost its registration
// and forwards what reaches it, does not count: it never ran the grain's
// code.
func (h *Host) IsActive(id actor.GrainID) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	a := h.mu.acts.get(id)
	return a != nil && a.serving.Load()
}

// HasActivation reports whether id has an activation on this host in any
// state, one still registering included: a request for it is delivered to
// that activation rather than routed.
func (h *Host) HasActivation(id actor.GrainID) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.mu.acts.get(id) != nil
}

// Active lists the grains active on this host (as IsActive counts them).
func (h *Host) Active() []actor.GrainID {
	return h.grainsWhere(func(a *activation) bool { return a.serving.Load() })
}

// Registered lists the grains whose activation here holds their
// registration in the directory, or may: besides the active ones, those
// still registering and those that won and still activate (core.claims).
// It is what a directory rebuilding a range asks of each silo. A grain
// deactivated while the host stops stays in the list until its final
// write has landed and it has unregistered: a rebuild that missed it
// would let the grain be placed again, and loaded, before that write.
func (h *Host) Registered() []actor.GrainID {
	ids := h.grainsWhere(func(a *activation) bool { return a.claiming.Load() })
	h.mu.RLock()
	defer h.mu.RUnlock()
	for id := range h.mu.unregistering {
		if h.mu.acts.get(id) == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// unregisterLater keeps id among the registered grains until the
// returned function, called once its final write has landed (or failed
// for good), unregisters it.
func (h *Host) unregisterLater(id actor.GrainID) func() {
	h.mu.Lock()
	if h.mu.unregistering == nil {
		h.mu.unregistering = make(map[actor.GrainID]struct{})
	}
	h.mu.unregistering[id] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			// Out of the list first: the write has landed, so a rebuild
			// that misses the grain from here on places it safely, and
			// one that still saw it would put back the entry being
			// removed.
			h.mu.Lock()
			delete(h.mu.unregistering, id)
			h.mu.Unlock()
			h.locator.Unregister(id)
		})
	}
}

// grainsWhere lists the grains whose activation here is as keep says.
func (h *Host) grainsWhere(keep func(*activation) bool) []actor.GrainID {
	h.mu.RLock()
	defer h.mu.RUnlock()
	ids := make([]actor.GrainID, 0, h.mu.acts.len())
	for a := range h.mu.acts.all {
		if keep(a) {
			ids = append(ids, a.id)
		}
	}
	return ids
}

// Deactivate asks the activation of id to deactivate after its current
// turn (one still registering, once it is active). It reports whether the
// grain had an activation here.
func (h *Host) Deactivate(id actor.GrainID) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	a := h.mu.acts.get(id)
	if a == nil {
		return false
	}
	a.post(deactivateMsg{reason: "requested"})
	return true
}

// Stop deactivates every activation (running OnDeactivate and flushing
// state), waits for them within ctx, and shuts the actor system down. New
// requests are refused with actor.ErrStopping from the moment Stop begins.
//
// Stop asks the activations to deactivate in batches, outside the host's
// lock, with at most stopWindow deactivations under way at once, and it
// watches ctx from the start: a host of hundreds of thousands of
// activations stops within ctx, or returns ctx's error naming how many
// grains are left and which. During a stop, an activation whose state
// record can hand its final write to the store's writers (persistence's
// can: Record.CloseQueued) does so instead of writing in its own turn, so
// that the writes go out in bulk and a slow store does not hold every
// deactivation. A later call goes on with the activations not yet asked.
// It is safe to call twice.
func (h *Host) Stop(ctx context.Context) error {
	h.mu.Lock()
	if !h.mu.started {
		h.mu.Unlock()
		return nil
	}
	if !h.mu.stopping {
		h.mu.stopping = true
		h.draining.Store(true)
		close(h.stopCh)
		h.mu.empty = make(chan struct{})
		if h.mu.collector != nil {
			h.mu.collector.Stop()
		}
		if h.mu.acts.len() == 0 {
			close(h.mu.empty)
		}
	}
	empty := h.mu.empty
	h.mu.Unlock()

	err := h.deactivateAll(ctx)
	if err == nil {
		select {
		case <-empty:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		err = fmt.Errorf("host: stop: %w", err)
		if n, sample := h.busySample(busySampleSize); n > 0 {
			err = fmt.Errorf("%w: %d grains did not deactivate in time: %s", err, n, busyList(n, sample))
		}
		return err
	}
	h.shutdown.Do(func() {
		h.passes.Wait() // a collection pass ends once stopCh is closed
		h.system.Shutdown()
		h.disp.close()
	})
	return nil
}

// Bounds of a stop's deactivation pass. Posting every deactivation at once
// started a worker goroutine for each (the dispatcher starts one when none
// is idle), and their finishing contended for the host's lock with the
// loop that posted them: 276k activations had not stopped after 120 s. A
// deactivation that hands its write to the flusher does not block, so a
// few more under way than there are cores keep them busy; many more only
// queue on the host's and the flusher's locks. stopBatch, at most
// stopWindow, is how many the pass checks under one read lock.
const (
	stopWindow = 64
	stopBatch  = 32
)

// What a deactivation pass asked of an activation (activation.asked).
const (
	askedNothing = iota
	askedIdle    // the collector's pass: deactivate if still idle
	askedStop    // a stop's pass
)

// deactivateAll asks every activation not yet asked by a stop to
// deactivate, keeping at most stopWindow of them under way, until all are
// asked or ctx ends.
func (h *Host) deactivateAll(ctx context.Context) error {
	select {
	case h.passToken <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-h.passToken }()
	if err := ctx.Err(); err != nil {
		return err
	}
	h.mu.RLock()
	todo := make([]*activation, 0, h.mu.acts.len())
	for a := range h.mu.acts.all {
		if a.asked != askedStop {
			todo = append(todo, a)
		}
	}
	h.mu.RUnlock()
	if err := h.deactivateBatches(ctx.Done(), todo, askedStop, deactivateMsg{reason: "shutting down"}); err != nil {
		return ctx.Err()
	}
	return nil
}

// deactivateBatches posts msg to the activations of todo in batches,
// keeping at most stopWindow deactivations under way (a slot each, given
// back when the activation leaves the catalog, or declines an idle
// deactivation), and marks them asked as kind. It gives up when quit is
// closed. The caller holds the pass token, so only it sets asked.
func (h *Host) deactivateBatches(quit <-chan struct{}, todo []*activation, kind uint8, msg deactivateMsg) error {
	batch := make([]*activation, 0, stopBatch)
	for len(todo) > 0 {
		n := min(len(todo), stopBatch, stopWindow) // a batch must fit the window
		for i := range n {
			select {
			case h.passSlots <- struct{}{}:
			case <-quit:
				for range i {
					<-h.passSlots
				}
				return context.Canceled
			}
		}
		batch = batch[:0]
		h.mu.RLock()
		for _, a := range todo[:n] {
			if h.mu.acts.get(a.id) != a || a.asked == kind || a.asked == askedStop {
				<-h.passSlots // gone already, or asked
				continue
			}
			if a.asked != askedNothing {
				<-h.passSlots // an idle ask made into a stop's: it holds a slot
			}
			// remove reads asked under the write lock.
			a.asked = kind
			batch = append(batch, a)
		}
		h.mu.RUnlock()
		for _, a := range batch {
			a.post(msg)
		}
		clear(todo[:n])
		todo = todo[n:]
	}
	return nil
}

// declined gives back the slot of an activation that declined the idle
// deactivation a collection pass asked of it.
func (h *Host) declined(a *activation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a.asked == askedIdle {
		a.asked = askedNothing
		<-h.passSlots
	}
}

// BusyGrain is an activation that has not yet deactivated, and what its
// latest turn runs (a method, or OnActivate, OnDeactivate, a timer).
type BusyGrain struct {
	// ID is the grain.
	ID actor.GrainID
	// Doing names what its latest turn runs.
	Doing string
}

// String formats the grain and what it runs as "type/key in Method".
func (b BusyGrain) String() string { return b.ID.String() + " in " + b.Doing }

// Busy lists the activations still alive, with what their latest turns
// run: after a stop that ran out of time, the grains that held it up.
func (h *Host) Busy() []BusyGrain {
	h.mu.RLock()
	defer h.mu.RUnlock()
	busy := make([]BusyGrain, 0, h.mu.acts.len())
	for a := range h.mu.acts.all {
		busy = append(busy, BusyGrain{ID: a.id, Doing: a.doingName()})
	}
	slices.SortFunc(busy, compareBusy)
	return busy
}

// busySampleSize is how many busy grains a failed stop names.
const busySampleSize = 10

// busySample counts the activations still alive and returns the first
// most of them in Busy's order, without formatting and sorting them all:
// a stop that ran out of time may leave hundreds of thousands.
func (h *Host) busySample(most int) (int, []BusyGrain) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	sample := make([]BusyGrain, 0, most+1)
	for a := range h.mu.acts.all {
		b := BusyGrain{ID: a.id}
		i, _ := slices.BinarySearchFunc(sample, b, compareBusy)
		if i < most {
			sample = slices.Insert(sample, i, b)
			sample = sample[:min(len(sample), most)]
		}
	}
	for i := range sample {
		if a := h.mu.acts.get(sample[i].ID); a != nil {
			sample[i].Doing = a.doingName()
		}
	}
	return h.mu.acts.len(), sample
}

// compareBusy orders busy grains by type, then key.
func compareBusy(x, y BusyGrain) int {
	if c := strings.Compare(x.ID.Type, y.ID.Type); c != 0 {
		return c
	}
	return strings.Compare(x.ID.Key, y.ID.Key)
}

// busyList names the grains of sample, out of n busy ones.
func busyList(n int, sample []BusyGrain) string {
	names := make([]string, 0, len(sample))
	for _, b := range sample {
		names = append(names, b.String())
	}
	list := strings.Join(names, ", ")
	if n > len(sample) {
		list += fmt.Sprintf(" and %d more", n-len(sample))
	}
	return list
}

// remove drops a from the catalog if it is still the grain's activation.
func (h *Host) remove(a *activation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.acts.remove(a)
	if a.asked != askedNothing {
		a.asked = askedNothing
		<-h.passSlots
	}
	if h.mu.stopping && h.mu.acts.len() == 0 {
		select {
		case <-h.mu.empty:
		default:
			close(h.mu.empty)
		}
	}
}

// collect asks idle activations to deactivate, then re-arms itself. It
// runs on the clock's goroutine, so the asking goes in a pass of its own,
// in batches as a stop's: asking 100k idle activations at once started a
// worker for each and took the resident memory from 508 to 842 MB.
func (h *Host) collect() {
	now := h.clock.Now()
	h.mu.RLock()
	if h.mu.stopping {
		h.mu.RUnlock()
		return
	}
	var idle []*activation
	for a := range h.mu.acts.all {
		if a.asked == askedNothing && a.collectible(now) {
			idle = append(idle, a)
		}
	}
	h.mu.RUnlock()
	if len(idle) == 0 {
		h.rearmCollector()
		return
	}
	h.passes.Add(1)
	go func() {
		defer h.passes.Done()
		select {
		case h.passToken <- struct{}{}:
		case <-h.stopCh:
			return
		}
		if h.draining.Load() {
			<-h.passToken
			return
		}
		_ = h.deactivateBatches(h.stopCh, idle, askedIdle, deactivateMsg{reason: "idle", idle: true})
		<-h.passToken
		h.rearmCollector()
	}()
}

// rearmCollector arms the next collection unless the host is stopping.
func (h *Host) rearmCollector() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.mu.stopping {
		h.mu.collector = h.clock.AfterFunc(h.opts.CollectionQuantum, h.collect)
	}
}

func (h *Host) newActivation(kind *Kind, id actor.GrainID) *activation {
	a := &activation{host: h, kind: kind, calls: h.kindCalls(kind), id: id}
	a.gc = newGrainContext(a)
	a.lastActive.Store(h.clock.Now().UnixNano())
	a.pid = h.spawner.spawn(a)
	h.stats.activations.Add(1)
	return a
}
