package silo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/dispatch"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/internal/wire"
	"github.com/granary-go/granary/persistence"
	"github.com/granary-go/granary/proxy"
)

// Errors of the silo.
var (
	ErrStarted    = errors.New("silo: already started")
	ErrNotStarted = errors.New("silo: not started")
	// ErrNoLink means this silo has no connection to the silo a grain
	// lives on.
	ErrNoLink = errors.New("silo: no link to silo")
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

	// host is set once, by Start; every local call reads it, so it is
	// atomic rather than under mu.
	host atomic.Pointer[host.Host]

	mu struct {
		sync.Mutex
		kinds     []*host.Kind
		types     []string
		listener  *transport.Listener
		endpoints map[*rpc.Endpoint]struct{}
		links     map[string]*rpc.Endpoint // connections to other silos, by silo name
		interner  *wire.Interner
		started   bool
		stopped   bool

		gatewayClosed chan struct{} // closed once the gateway has closed
		gatewayErr    error
	}
}

var _ proxy.Registrar = (*Silo)(nil)

// New returns a silo. It does no I/O: Start does.
func New(opts Options, optFns ...Option) (*Silo, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Silo{opts: opts}
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
	flusher, err := s.newFlusher()
	if err != nil {
		return nil, err
	}
	s.flusher = flusher
	s.caller = &hostedCaller{
		LocalCaller: rpc.NewLocalCaller(s, func() time.Duration { return s.opts.ResponseTimeout }, s.deps.clock, opts.TimeoutResolution),
		filters:     s.deps.outgoing,
	}
	s.mu.endpoints = make(map[*rpc.Endpoint]struct{})
	s.mu.links = make(map[string]*rpc.Endpoint)
	s.router = &rpc.Router{Self: opts.Name, Locator: s.deps.locator, Links: s}
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
	if s.mu.started {
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

// Start starts the activation host, the state flusher and the gateway.
func (s *Silo) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.started {
		return ErrStarted
	}
	hostOpts := []host.HostOption{
		host.WithClock(s.deps.clock), host.WithLogger(s.log), host.WithStateStore(stateStore{s.flusher}),
		host.WithOwner(s), host.WithRouter(s.router),
	}
	if dir, ok := s.deps.locator.(host.Directory); ok {
		hostOpts = append(hostOpts, host.WithDirectory(dir))
	}
	h, err := host.NewHost(host.HostOptions{
		CollectionAge:     s.opts.CollectionAge,
		CollectionQuantum: s.opts.CollectionQuantum,
		MaxActivations:    s.opts.Limits.MaxActivations,
	}, s.mu.kinds, hostOpts...)
	if err != nil {
		return err
	}
	s.router.SetHost(h)
	if err := s.flusher.Start(ctx); err != nil {
		return err
	}
	// undo stops what a failed Start started. A stopped flusher cannot
	// start again, so the silo gets a fresh one: Start may be retried,
	// once the gateway's port is free, say.
	undo := func() {
		_ = s.flusher.Stop(ctx)
		if f, err := s.newFlusher(); err == nil { // the options were valid in New
			s.flusher = f
		}
	}
	if err := h.Start(ctx); err != nil {
		undo()
		return err
	}
	s.mu.interner = wire.NewInterner(s.mu.types...)
	if !s.opts.DisableGateway {
		interner := s.mu.interner
		l, err := transport.Listen(s.opts.GatewayAddress, s.opts.transport(), func(c *transport.Conn) transport.Handler {
			ep := rpc.NewEndpoint(s.opts.clientEndpoint(), h, interner, s.deps.clock, s.log)
			ep.Attach(c)
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.mu.stopped {
				return nil // a stopping silo takes no new connections
			}
			s.mu.endpoints[ep] = struct{}{}
			return &gatewayConn{Endpoint: ep, silo: s}
		})
		if err != nil {
			_ = h.Stop(ctx)
			undo()
			return fmt.Errorf("silo: gateway: %w", err)
		}
		s.mu.listener = l
		s.log.Info("gateway listening", slog.String("addr", l.Addr().String()))
	}
	s.host.Store(h)
	s.mu.started = true
	return nil
}

// gatewayConn forgets its endpoint when the connection ends.
type gatewayConn struct {
	*rpc.Endpoint
	silo *Silo
}

func (g *gatewayConn) HandleClose(c *transport.Conn, err error) {
	g.Endpoint.HandleClose(c, err)
	g.silo.mu.Lock()
	delete(g.silo.mu.endpoints, g.Endpoint)
	g.silo.mu.Unlock()
}

// Link implements rpc.Links: it returns the connection to another silo.
func (s *Silo) Link(silo string) (*rpc.Endpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ep := s.mu.links[silo]; ep != nil {
		return ep, nil
	}
	return nil, fmt.Errorf("%w: silo %s", ErrNoLink, silo)
}

// link connects this silo to the silo named name, listening at addr. The
// connection carries calls both ways: this silo's calls to grains there,
// and that silo's calls to grains here.
func (s *Silo) link(ctx context.Context, name, addr string) error {
	h := s.host.Load()
	if h == nil {
		return ErrNotStarted
	}
	s.mu.Lock()
	interner := s.mu.interner
	s.mu.Unlock()
	ep := rpc.NewEndpoint(s.opts.linkEndpoint(), h, interner, s.deps.clock, s.log)
	conn, err := transport.Dial(ctx, addr, s.opts.transport(), &linkConn{Endpoint: ep, silo: s, name: name})
	if err != nil {
		return fmt.Errorf("silo: link to %s: %w", name, err)
	}
	ep.Attach(conn)
	s.mu.Lock()
	old := s.mu.links[name]
	s.mu.links[name] = ep
	s.mu.Unlock()
	if old != nil {
		_ = old.Conn().Close()
	}
	return nil
}

// linkConn forgets its link when the connection ends.
type linkConn struct {
	*rpc.Endpoint
	silo *Silo
	name string
}

func (l *linkConn) HandleClose(c *transport.Conn, err error) {
	l.Endpoint.HandleClose(c, err)
	l.silo.mu.Lock()
	if l.silo.mu.links[l.name] == l.Endpoint {
		delete(l.silo.mu.links, l.name)
	}
	l.silo.mu.Unlock()
}

// flushConnections waits, within ctx, until what every connection has
// queued is written.
func (s *Silo) flushConnections(ctx context.Context) {
	s.mu.Lock()
	conns := make([]*transport.Conn, 0, len(s.mu.endpoints)+len(s.mu.links))
	for ep := range s.mu.endpoints {
		conns = append(conns, ep.Conn())
	}
	for _, ep := range s.mu.links {
		conns = append(conns, ep.Conn())
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.Flush(ctx) // a connection that ended or a ctx that ran out leaves nothing to wait for
	}
}

// closeLinks closes every connection to another silo.
func (s *Silo) closeLinks() {
	s.mu.Lock()
	links := make([]*rpc.Endpoint, 0, len(s.mu.links))
	for _, ep := range s.mu.links {
		links = append(links, ep)
	}
	s.mu.Unlock()
	for _, ep := range links {
		_ = ep.Conn().Close()
	}
}

// GatewayAddr returns the address the gateway listens on, or nil.
func (s *Silo) GatewayAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.listener == nil {
		return nil
	}
	return s.mu.listener.Addr()
}

// Caller returns the silo's own caller: grains use it to call other grains,
// and code in the silo's process uses it as a client that needs no
// connection. Its response timeout is always the silo's, whether it was
// obtained before or after Start.
func (s *Silo) Caller() proxy.Caller { return s.caller }

// CallerOf returns the caller of the silo hosting a grain, for calls from
// one grain to another. It returns nil for a context not hosted by a Silo.
func CallerOf(gc *actor.Context) proxy.Caller {
	s, ok := gc.Silo().(*Silo)
	if !ok {
		return nil
	}
	return s.caller
}

// Deliver hands a request to the silo's activations. It fails requests with
// actor.ErrStopping while the silo is not running.
func (s *Silo) Deliver(req *host.Request) {
	host := s.host.Load()
	if host == nil {
		req.Reply.Reply(req, nil, actor.ErrStopping)
		return
	}
	host.Deliver(req)
}

// Host returns the activation host, or nil before Start.
func (s *Silo) Host() *host.Host { return s.host.Load() }

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
// has returned finishes the job. Safe to call twice.
func (s *Silo) Stop(ctx context.Context) error {
	s.mu.Lock()
	if !s.mu.started {
		s.mu.Unlock()
		return nil
	}
	first := !s.mu.stopped
	s.mu.stopped = true
	host := s.host.Load()
	s.mu.Unlock()

	// Host.Stop is a no-op once it has finished, so a later Stop redoes
	// only what an earlier one could not finish in time.
	hostErr := host.Stop(ctx)
	if hostErr != nil {
		for _, b := range host.Busy() {
			s.log.Warn("stop: grain did not deactivate in time", slog.String("grain", b.ID.String()), slog.String("running", b.Doing))
		}
	} else {
		s.flushConnections(ctx) // the last replies go out before the connections close
	}
	gatewayErr := s.closeGateway(ctx)
	s.closeLinks()
	s.caller.Close()
	if hostErr != nil {
		// Activations still to deactivate flush through the flusher, so it
		// keeps running until a later Stop sees the host stopped.
		return errors.Join(hostErr, gatewayErr)
	}
	if err := errors.Join(gatewayErr, s.flusher.Stop(ctx)); err != nil {
		return err
	}
	if first {
		s.log.Info("silo stopped")
	}
	return nil
}

// closeGateway closes the gateway's listener and its connections, waiting
// within ctx. Closing a connection waits for a turn that its runner is
// inside, and a grain that ignores cancellation can hold that turn, so the
// close runs on a goroutine of its own that this and any later call wait
// for.
func (s *Silo) closeGateway(ctx context.Context) error {
	s.mu.Lock()
	listener := s.mu.listener
	if listener == nil {
		s.mu.Unlock()
		return nil
	}
	if s.mu.gatewayClosed == nil {
		done := make(chan struct{})
		s.mu.gatewayClosed = done
		go func() {
			err := listener.Close()
			s.mu.Lock()
			s.mu.gatewayErr = err
			s.mu.Unlock()
			close(done)
		}()
	}
	done := s.mu.gatewayClosed
	s.mu.Unlock()
	select {
	case <-done:
		s.mu.Lock()
		err := s.mu.gatewayErr
		s.mu.gatewayErr = nil // reported once
		s.mu.Unlock()
		if err != nil {
			return fmt.Errorf("silo: gateway: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("silo: gateway: %w", ctx.Err())
	}
}

// Stats are a silo's counters, for tests and metrics.
type Stats struct {
	Host    host.HostStats           // the activations
	Gateway rpc.EndpointStats        // summed over client connections
	Clients int                      // client connections open
	Links   rpc.EndpointStats        // summed over connections to other silos
	Flusher persistence.FlusherStats // the state writes
}

// Stats returns the silo's counters.
func (s *Silo) Stats() Stats {
	host := s.host.Load()
	s.mu.Lock()
	eps := make([]*rpc.Endpoint, 0, len(s.mu.endpoints))
	for ep := range s.mu.endpoints {
		eps = append(eps, ep)
	}
	links := make([]*rpc.Endpoint, 0, len(s.mu.links))
	for _, ep := range s.mu.links {
		links = append(links, ep)
	}
	flusher := s.flusher // a failed Start replaces it
	s.mu.Unlock()
	var st Stats
	for _, ep := range links {
		st.Links.Add(ep.Stats())
	}
	if host != nil {
		st.Host = host.Stats()
	}
	st.Clients = len(eps)
	for _, ep := range eps {
		st.Gateway.Add(ep.Stats())
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
