package rpc

import (
	"fmt"
	"sync"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/proxy"
)

// DefaultMaxHops is how many times a request may be forwarded from silo
// to silo before it fails with proxy.ErrForwardLimit: enough to correct a
// stale directory cache once and reach a new activation, not enough for a
// loop to hide.
const DefaultMaxHops = 2

// Locator decides where a grain lives: on this silo, or on which other.
type Locator interface {
	// Locate returns the silo that holds id's activation, or the one that
	// should create it; "" (or the router's own name) means this silo.
	// hint is the caller's placement hint, if any.
	Locate(id actor.GrainID, hint string) (silo string, err error)
}

// Links gives the connections to other silos.
type Links interface {
	// Link returns the endpoint of the connection to silo.
	Link(silo string) (*Endpoint, error)
}

// Activator is the part of the activation host a router uses.
type Activator interface {
	Activate(req *host.Request)
}

// Router sends each request for a grain that has no activation here where
// the grain lives: to this silo's host when the locator says it belongs
// here, over a link to another silo otherwise. It implements host.Router.
type Router struct {
	// Self is this silo's name.
	Self string
	// Locator decides where grains live; nil means every grain lives here.
	Locator Locator
	// Links reaches other silos; nil means none can be reached.
	Links Links
	// MaxHops caps forwarding; 0 means DefaultMaxHops.
	MaxHops uint32

	host Activator
}

var _ host.Router = (*Router)(nil)

// SetHost sets the host that activates grains living here. The host is
// built with the router, so it is given afterwards, before any request.
func (r *Router) SetHost(h Activator) { r.host = h }

// Route implements host.Router.
func (r *Router) Route(req *host.Request) {
	if r.Locator == nil {
		r.host.Activate(req)
		return
	}
	silo, err := r.Locator.Locate(req.Target, req.Hint)
	switch {
	case err != nil:
		req.Reply.Reply(req, nil, fmt.Errorf("%w: locate %s: %w", proxy.ErrUnavailable, req.Target, err))
		req.Release()
	case silo == "" || silo == r.Self:
		r.host.Activate(req)
	default:
		r.Forward(req, silo)
	}
}

// Forward implements host.Router: it relays req to silo, unless that
// would take it past the forwarding limit.
func (r *Router) Forward(req *host.Request, silo string) {
	limit := r.MaxHops
	if limit == 0 {
		limit = DefaultMaxHops
	}
	if req.Hops >= limit {
		req.Reply.Reply(req, nil, fmt.Errorf("%w: %s was forwarded %d times and would go on to %s", proxy.ErrForwardLimit, req.Target, req.Hops, silo))
		req.Release()
		return
	}
	if r.Links == nil {
		req.Reply.Reply(req, nil, fmt.Errorf("%w: %s lives on silo %s, which this silo has no link to", proxy.ErrUnavailable, req.Target, silo))
		req.Release()
		return
	}
	link, err := r.Links.Link(silo)
	if err != nil {
		req.Reply.Reply(req, nil, fmt.Errorf("%w: %s lives on silo %s: %w", proxy.ErrUnavailable, req.Target, silo, err))
		req.Release()
		return
	}
	link.Relay(req)
}

// StaticLocator places grains by a table set by hand: a grain in the table
// lives on the silo it names, any other on the default silo ("" for the
// silo that asks). It is also the directory of the silos that use it: an
// activation registers only where the table puts it. It is safe for
// concurrent use.
type StaticLocator struct {
	self string

	mu struct {
		sync.RWMutex
		where    map[actor.GrainID]string
		fallback string
	}
}

var _ host.Directory = (*StaticLocator)(nil)

// NewStaticLocator returns an empty table for the silo named self.
func NewStaticLocator(self string) *StaticLocator {
	l := &StaticLocator{self: self}
	l.mu.where = make(map[actor.GrainID]string)
	return l
}

// Place records that id lives on silo.
func (l *StaticLocator) Place(id actor.GrainID, silo string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.where[id] = silo
}

// PlaceOthers records where grains outside the table live.
func (l *StaticLocator) PlaceOthers(silo string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.fallback = silo
}

// Locate implements Locator.
func (l *StaticLocator) Locate(id actor.GrainID, _ string) (string, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if silo, ok := l.mu.where[id]; ok {
		return silo, nil
	}
	return l.mu.fallback, nil
}

// Register implements host.Directory: an activation here wins unless the
// table puts the grain on another silo.
func (l *StaticLocator) Register(id actor.GrainID, done func(string, error)) {
	silo, _ := l.Locate(id, "")
	if silo == l.self {
		silo = ""
	}
	done(silo, nil)
}

// Unregister implements host.Directory.
func (l *StaticLocator) Unregister(actor.GrainID) {}
