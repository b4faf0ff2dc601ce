package silo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/directory"
	"github.com/granary-go/granary/internal/dispatch"
	"github.com/granary-go/granary/internal/gateway"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/links"
	"github.com/granary-go/granary/internal/membership"
	"github.com/granary-go/granary/internal/metrics"
	"github.com/granary-go/granary/internal/ratelog"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/silohooks"
	"github.com/granary-go/granary/internal/silohost"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/proxy"
)

// Errors of the silo.
var (
	ErrStarted    = errors.New("silo: already started")
	ErrNotStarted = errors.New("silo: not started")
	// ErrStopping is Ready's answer once Stop has begun.
	ErrStopping = errors.New("silo: stopping")
)

// Silo hosts grains: it keeps their activations, persists their state,
// accepts clients on its gateway, and gives in-process code a caller.
type Silo struct {
	opts    Options
	deps    deps
	log     *slog.Logger
	flusher *persistence.Flusher
	caller  *hostedCaller
	router  *rpc.Router
	gen     int64 // this incarnation: the silo's start time, Unix nanoseconds

	// rejected counts what every connection refused, and throttles the
	// log lines about it for the whole silo.
	rejected *rpc.Rejections

	// host is set once, by Start; every local call reads it, so it is
	// atomic rather than under mu.
	host atomic.Pointer[host.Host]

	gateway *gateway.Gateway // for clients
	links   *links.Links     // to other silos

	// membership wires the silo to its cluster: joining, the view, the
	// minority fence, leaving.
	membership *membership.Wiring
	// dir is this silo's part of the grain directory, set by Start when
	// Options.Cluster.Enabled.
	dir *directory.Directory

	metrics *metrics.Silo // the silo's instruments, when it has a meter provider

	background
	hooks     // what granary's own packages reach and users do not (internal/silohooks)
	hostHooks // the same for the server's packages: the host, system services (internal/silohost)

	mu struct {
		sync.Mutex
		kinds    []*host.Kind
		types    []string
		interner *wire.Interner
		starting bool
		started  bool
		stopped  bool
		since    time.Time   // when starting, started or stopped last changed
		attached []io.Closer // instruments attached through the silo's hooks

		systems map[string]func(*host.Request) // added by silohost.ServeSystem
	}
}

var (
	_ proxy.Registrar = (*Silo)(nil)
	_ silohooks.Silo  = (*Silo)(nil)
	_ silohost.Silo   = (*Silo)(nil)
)

// hooks and hostHooks name the embedded hooks so that the fields, and
// with them the hooks, stay unexported.
type (
	hooks     = silohooks.Hooks
	hostHooks = silohost.Hooks
)

// New returns a silo. It does no I/O: Start does.
func New(opts Options, optFns ...Option) (*Silo, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Silo{opts: opts}
	silohooks.Init(&s.hooks, silohooks.Funcs{Kill: s.kill, AttachAcquisitions: s.attachAcquisitions})
	silohost.Init(&s.hostHooks, silohost.Funcs{Host: s.host.Load, ServeSystem: s.serveSystem, PeerCaller: s.peerCaller})
	for _, fn := range optFns {
		fn(&s.deps)
	}
	if s.deps.log == nil {
		s.deps.log = slog.Default()
	}
	if s.deps.clock == nil {
		s.deps.clock = clock.Real{}
	}
	if s.deps.store == nil {
		s.deps.store = persistence.NewMemoryStore()
	}
	s.log = s.deps.log.With(slog.String("silo", opts.Name))
	s.rejected = rpc.NewRejections(ratelog.New(s.log, s.deps.clock, transport.DefaultLogBurst, transport.DefaultLogInterval))
	flusher, err := s.newFlusher()
	if err != nil {
		return nil, err
	}
	s.flusher = flusher
	s.caller = &hostedCaller{
		LocalCaller: rpc.NewLocalCaller((*localInbound)(s), func() time.Duration { return s.opts.ResponseTimeout }, s.deps.clock, opts.TimeoutResolution).
			Identified(actor.Identity{Kind: actor.CallerSilo, Name: opts.Name}),
		filters: s.deps.outgoing,
	}
	s.gen = s.deps.clock.Now().UnixNano()
	s.gateway = s.newGateway()
	s.links = s.newLinks()
	s.membership = s.newMembership()
	s.router = &rpc.Router{Self: opts.Name, Locator: s.deps.locator, Links: s.links}
	if err := s.registerMetrics(); err != nil {
		return nil, err
	}
	return s, nil
}

// Options returns the silo's settings, defaults filled in.
func (s *Silo) Options() Options { return s.opts }

// Name returns the silo's name.
func (s *Silo) Name() string { return s.opts.Name }

// RegisterGrain implements proxy.Registrar. Generated RegisterXGrain
// functions call it; register every grain type before Start.
func (s *Silo) RegisterGrain(desc *proxy.ServiceDesc, factory func(id actor.GrainID) any) error {
	if err := desc.Validate(); err != nil {
		return err
	}
	if factory == nil {
		return fmt.Errorf("silo: grain type %s: nil factory", desc.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.started || s.mu.starting {
		return fmt.Errorf("silo: register %s: %w", desc.Name, ErrStarted)
	}
	for _, k := range s.mu.kinds {
		if k.Type == desc.Name {
			return fmt.Errorf("silo: grain type %s registered twice", desc.Name)
		}
	}
	var iface reflect.Type
	if desc.HandlerType != nil {
		iface = reflect.TypeOf(desc.HandlerType).Elem()
	}
	newGrain := factory
	if iface != nil {
		newGrain = func(id actor.GrainID) any {
			g := factory(id)
			if g == nil || !reflect.TypeOf(g).Implements(iface) {
				panic(fmt.Sprintf("silo: factory of %s returned %T, which does not implement %v", desc.Name, g, iface))
			}
			return g
		}
	}
	s.mu.kinds = append(s.mu.kinds, &host.Kind{
		Type:       desc.Name,
		New:        newGrain,
		Dispatcher: &dispatch.Dispatcher{Service: desc, Filters: s.deps.incoming},
	})
	s.mu.types = append(s.mu.types, desc.Name)
	return nil
}

func (s *Silo) newFlusher() (*persistence.Flusher, error) {
	return persistence.NewFlusher(s.deps.store, persistence.FlusherOptions{Period: s.opts.FlushPeriod},
		persistence.WithClock(s.deps.clock), persistence.WithLogger(s.log))
}

// Start starts the activation host, the state flusher and the gateway,
// and, for a silo of a cluster, joins the cluster first: it listens for
// other silos, joins through the seeds, takes its part of the directory
// and announces itself active before its gateway takes clients. It
// returns ErrStarted when the silo started already and ErrStopping once
// Stop was called.
func (s *Silo) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.mu.started || s.mu.starting {
		s.mu.Unlock()
		return ErrStarted
	}
	if s.mu.stopped {
		s.mu.Unlock()
		return ErrStopping
	}
	s.mu.starting = true
	s.mu.since = s.deps.clock.Now()
	kinds, types := slices.Clone(s.mu.kinds), slices.Clone(s.mu.types)
	s.mu.Unlock()
	err := s.start(ctx, kinds, types)
	s.mu.Lock()
	s.mu.starting = false
	s.mu.started = err == nil
	if s.mu.started {
		s.mu.since = s.deps.clock.Now()
	}
	s.mu.Unlock()
	return err
}

// start does the work of Start, without holding s.mu: joining a cluster
// takes the silo's lock for what it learns.
func (s *Silo) start(ctx context.Context, kinds []*host.Kind, types []string) error {
	hostOpts := []host.HostOption{
		host.WithClock(s.deps.clock), host.WithLogger(s.log), host.WithStateStore(stateStore{s.flusher}),
		host.WithOwner(s), host.WithRouter(s.router),
	}
	hostOpts = append(hostOpts, s.metricsHostOptions()...)
	if s.fenced() {
		hostOpts = append(hostOpts, host.WithAdmission(s.membership.Admit))
	}
	if s.opts.Cluster.Enabled {
		s.dir = s.newDirectory()
		s.router.Locator = s.dir
		s.router.Systems = s.systemServices()
		hostOpts = append(hostOpts, host.WithDirectory(s.dir))
	} else if dir, ok := s.deps.locator.(host.Directory); ok {
		hostOpts = append(hostOpts, host.WithDirectory(dir))
	}
	for _, k := range kinds {
		if age, ok := s.opts.CollectionAges[k.Type]; ok {
			k.CollectionAge = age
		}
	}
	h, err := host.NewHost(host.HostOptions{
		CollectionAge:     s.opts.CollectionAge,
		CollectionQuantum: s.opts.CollectionQuantum,
		MaxActivations:    s.opts.Limits.MaxActivations,
		MaxWait:           s.opts.ResponseTimeout,
	}, kinds, hostOpts...)
	if err != nil {
		return err
	}
	s.router.SetHost(h)
	if err := s.flusher.Start(ctx); err != nil {
		return err
	}
	var gateway net.Listener
	// undo stops what a failed Start started. A stopped flusher cannot
	// start again, so the silo gets a fresh one: Start may be retried,
	// once the gateway's port is free, say.
	undo := func() {
		if gateway != nil {
			_ = gateway.Close()
		}
		s.unjoin()
		s.reopenBackground()
		s.host.Store(nil)
		_ = h.Stop(ctx)
		_ = s.flusher.Stop(ctx)
		if f, err := s.newFlusher(); err == nil { // the options were valid in New
			s.flusher = f
		}
	}
	if err := h.Start(ctx); err != nil {
		undo()
		return err
	}
	s.host.Store(h)
	interner := wire.NewInterner(append(types, s.systemTypes()...)...)
	s.mu.Lock()
	s.mu.interner = interner
	s.mu.Unlock()
	if !s.opts.DisableGateway {
		// Bound now, so that the membership announces its address; served
		// once the silo has joined.
		if gateway, err = net.Listen("tcp", s.opts.GatewayAddress); err != nil {
			undo()
			return fmt.Errorf("silo: gateway: %w", err)
		}
	}
	if s.opts.Cluster.Enabled {
		if err := s.joinCluster(ctx, gateway); err != nil {
			undo()
			return err
		}
	}
	if gateway != nil {
		if err := s.gateway.Serve(gateway, s.inbound(h), interner); err != nil {
			gateway = nil // Serve closed it
			undo()
			return fmt.Errorf("silo: gateway: %w", err)
		}
		s.log.Info("gateway listening", slog.String("addr", s.gateway.Addr().String()))
	}
	return nil
}

// link connects this silo by hand to the silo named name, listening at
// addr (for tests of silos without a cluster).
func (s *Silo) link(ctx context.Context, name, addr string) error {
	_, err := s.links.DialAt(ctx, name, addr)
	return err
}

// flushConnections waits, within ctx, until what every connection has
// queued is written.
func (s *Silo) flushConnections(ctx context.Context) {
	conns := append(s.gateway.Conns(), s.links.Conns()...)
	for _, c := range conns {
		_ = c.Flush(ctx) // a connection that ended or a ctx that ran out leaves nothing to wait for
	}
}

// Ready reports whether the silo serves: nil once Start has returned
// successfully (a silo of a cluster has then joined it and announced
// itself active, and its gateway, when it has one, listens) and until Stop
// begins, except while a fence is up. Otherwise it says why: an error
// wrapping ErrNotStarted before and while Start runs, ErrStopping once
// Stop has begun, ErrFenced, with the unreachable silos, while the silo
// cannot reach a majority of its cluster, or ErrDeclaredDead, with the
// verdict or the stall, while the death fence is up. A health check (the
// binary's /readyz) answers with it.
func (s *Silo) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.mu.stopped:
		return ErrStopping
	case s.mu.starting && s.opts.Cluster.Enabled:
		return fmt.Errorf("%w: starting: joining the cluster", ErrNotStarted)
	case s.mu.starting:
		return fmt.Errorf("%w: starting", ErrNotStarted)
	case !s.mu.started:
		return ErrNotStarted
	case !s.opts.DisableGateway && s.gateway.Addr() == nil:
		return fmt.Errorf("%w: the gateway does not listen", ErrNotStarted) // Start sets it before it returns
	}
	return s.membership.Fenced()
}

// GatewayAddr returns the address the gateway listens on, or nil.
func (s *Silo) GatewayAddr() net.Addr { return s.gateway.Addr() }

// Caller returns the silo's own caller: grains use it to call other grains,
// and code in the silo's process uses it as a client that needs no
// connection. Its response timeout is always the silo's, whether it was
// obtained before or after Start.
func (s *Silo) Caller() proxy.Caller { return s.caller }

// CallerOf returns the caller of the silo hosting a grain, for calls from
// one grain to another. It returns nil for a context not hosted by a Silo.
func CallerOf(gc *actor.Context) proxy.Caller { return host.CallerOf(gc) }

// localInbound is the silo as its own caller delivers to it (rpc.Inbound),
// so that delivering stays out of the silo's exported methods.
type localInbound Silo

// Deliver implements rpc.Inbound.
func (l *localInbound) Deliver(req *host.Request) { (*Silo)(l).deliver(req) }

// deliver hands a request to the silo's activations. It fails requests with
// actor.ErrStopping while the silo is not running, and with an error
// wrapping proxy.ErrUnavailable and ErrFenced or ErrDeclaredDead while a
// fence is up.
func (s *Silo) deliver(req *host.Request) {
	host := s.host.Load()
	if host == nil {
		req.Reply.Reply(req, nil, actor.ErrStopping)
		return
	}
	if err := s.membership.Fenced(); err != nil {
		s.refuse(req, err)
		return
	}
	host.Deliver(req)
}

// Stop stops the silo gracefully. It drains: the gateway takes no new
// connections, requests already queued are served, then every activation
// deactivates and flushes its state; requests that arrive meanwhile fail
// with proxy.ErrUnavailable. Then connections close and the flusher writes
// what is still dirty.
//
// When ctx ends first, Stop closes what is left: connections close, so the
// calls still waiting on them fail with proxy.ErrUnavailable, and Stop
// returns an error wrapping ctx's that names every grain still busy (its
// type, key and the method its turn runs), which it also logs. A turn that
// ignores cancellation cannot be interrupted; calling Stop again once it
// has returned finishes the job. Safe to call twice. A silo that never
// started (or whose Start failed) only lets go of what New registered with
// its meter provider; either way a stopped silo does not start again.
func (s *Silo) Stop(ctx context.Context) error {
	s.mu.Lock()
	if !s.mu.started {
		// Never started, or Start failed: nothing runs but the instruments
		// New registered. A Start in progress is left to finish.
		first := !s.mu.starting && !s.mu.stopped
		if first {
			s.mu.stopped = true
			s.mu.since = s.deps.clock.Now()
		}
		s.mu.Unlock()
		if first {
			s.closeMetrics()
		}
		return nil
	}
	first := !s.mu.stopped
	if first {
		s.mu.since = s.deps.clock.Now()
	}
	s.mu.stopped = true
	s.gateway.StopAccepting()
	host := s.host.Load()
	s.mu.Unlock()

	if first {
		s.membership.AnnounceLeaving(ctx)
	}

	// Host.Stop is a no-op once it has finished, so a later Stop redoes
	// only what an earlier one could not finish in time.
	hostErr := host.Stop(ctx)
	if hostErr != nil {
		// The error names the first busy grains and counts the rest; what
		// the flusher holds unwritten is lost if the process ends now.
		n, keys := s.flusher.Unwritten(10)
		s.log.Warn("stop: grains did not deactivate in time", slog.Any("err", hostErr),
			slog.Int("unwritten_states", n), slog.Any("unwritten", keys))
	} else {
		s.flushConnections(ctx) // the last replies go out before the connections close
	}
	gatewayErr := s.closeGateway(ctx)
	s.caller.Close()
	if hostErr != nil {
		// Activations still to deactivate flush through the flusher, so it
		// keeps running until a later Stop sees the host stopped.
		s.links.CloseAll()
		return errors.Join(hostErr, gatewayErr)
	}
	// The final writes land before the silo leaves: each deactivated
	// grain unregisters once its write has landed (a later activation
	// elsewhere must not load the state before it), and the owners drop
	// what a silo that left still had registered.
	flushErr := s.flusher.Stop(ctx)
	s.leaveCluster(ctx)
	if err := errors.Join(gatewayErr, flushErr); err != nil {
		return err
	}
	s.closeMetrics()
	if first {
		s.log.Info("silo stopped")
	}
	return nil
}

// closeGateway closes the gateway's listener and its connections,
// waiting within ctx (gateway.Close), and stops its shares.
func (s *Silo) closeGateway(ctx context.Context) error {
	if err := s.gateway.Close(ctx); err != nil {
		return fmt.Errorf("silo: gateway: %w", err)
	}
	return nil
}

// stats reads the counters of the silo's parts.
func (s *Silo) stats() partStats {
	host := s.host.Load()
	s.mu.Lock()
	flusher := s.flusher // a failed Start replaces it
	s.mu.Unlock()
	var st partStats
	st.Rejected = s.rejected.Stats()
	st.Fence = FenceStats(s.membership.FenceStats())
	gateway := s.gateway.Stats()
	st.Clients, st.Gateway, st.ClosedGateway, st.GatewayListener = gateway.Clients, gateway.Live, gateway.Closed, gateway.Listener
	links := s.links.Stats()
	st.Links, st.ClosedLinks, st.LinkListener = links.Live, links.Closed, links.Listener
	if s.dir != nil {
		st.Directory = s.dir.Stats()
	}
	if host != nil {
		st.Host = host.Stats()
		st.Calls = host.Calls()
	}
	st.Flusher = flusher.Stats()
	return st
}

// hostedCaller is the silo's own caller, with the silo's outgoing filters.
type hostedCaller struct {
	*rpc.LocalCaller
	filters []proxy.OutgoingFilter
}

// OutgoingFilters lets references built on this caller apply the silo's
// outgoing filters.
func (h *hostedCaller) OutgoingFilters() []proxy.OutgoingFilter { return h.filters }

// stateStore adapts the flusher to the actor host.
type stateStore struct{ f *persistence.Flusher }

func (s stateStore) OpenState(ctx context.Context, id actor.GrainID, schedule func(func()) bool, snapshot func() ([]byte, error)) (host.StateRecord, []byte, error) {
	rec, data, err := s.f.Open(ctx, persistence.Key{GrainType: id.Type, GrainKey: id.Key, Name: "state"}, schedule, snapshot)
	if err != nil {
		return nil, nil, err
	}
	return rec, data, nil
}
