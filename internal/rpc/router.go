package rpc

import (
	"cmp"
	"fmt"
	"sync"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/internal/delivery"
	"github.com/granary-go/granary/proxy"
)

// DefaultMaxHops is how many times a request may be forwarded from silo
// to silo before it fails with proxy.ErrForwardLimit: enough to correct a
// stale directory cache once and reach a new activation, not enough for a
// loop to hide.
const DefaultMaxHops = 2

// Locator decides where a grain lives: on this silo, or on which other.
type Locator interface {
	// Locate finds the silo that holds id's activation, or the one that
	// should create it, and calls done with it once, maybe before Locate
	// returns; "" (or the router's own name) means this silo. placed is
	// set when the grain had no activation and the silo is where placement
	// put the new one. hint is the caller's placement hint, if any. done
	// may run on any goroutine, and must not block.
	Locate(id actor.GrainID, hint string, done func(silo string, placed bool, err error))
}

// cachedLocator is a Locator that can answer from what it knows, without
// I/O: the router asks it first, to spare the common case a callback.
type cachedLocator interface {
	Cached(id actor.GrainID) (silo string, ok bool)
}

// forgetter is a Locator that can be told a location it gave turned out
// wrong.
type forgetter interface {
	Forget(id actor.GrainID)
}

// Links gives the connections to other silos.
type Links interface {
	// Link returns the endpoint of the connection to silo.
	Link(silo string) (*Endpoint, error)
}

// Activator is the part of the activation host a router uses.
type Activator interface {
	Activate(req *delivery.Request)
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
	// Systems serve the requests addressed to the silo itself rather than
	// to a grain (the directory, for one), by grain type. They run on the
	// delivering goroutine and must not block.
	Systems map[string]func(req *delivery.Request)

	host   Activator
	hosted interface{ HasActivation(actor.GrainID) bool } // the host, when it can tell
}

// Where a request goes, as a connection's reader sees it (Router.FromReader).
type Where uint8

const (
	// WhereDeliver: deliver the request as usual, through the
	// connection's runner: its grain is active here, or it is not for the
	// reader to decide.
	WhereDeliver Where = iota
	// WhereNew: the grain has no activation here and its location is not
	// known; the request may create an activation.
	WhereNew
	// WhereRelayed: the request was relayed, from the reader, to the silo
	// that holds its grain.
	WhereRelayed
)

// SetHost sets the host that activates grains living here. The host is
// built with the router, so it is given afterwards, before any request.
func (r *Router) SetHost(h Activator) {
	r.host = h
	r.hosted, _ = h.(interface{ HasActivation(actor.GrainID) bool })
}

// FromReader routes req on the reader goroutine of the connection it came
// on when that takes no grain code and no waiting: a request for a grain
// with no activation here whose silo the directory cache knows, over a link
// that is up, is relayed at once (a runner would only have passed it on).
// Asked (whether) when new is set, it also tells a request that may create
// an activation (WhereNew) from one that goes to an activation here; a
// connection that has its share of new activations under way refuses the
// first at once. It never blocks, dials or locates.
func (r *Router) FromReader(req *delivery.Request, whether bool) Where {
	relay := r.Locator != nil && r.Links != nil && (req.Hops == 0 || req.Hint != r.Self)
	if !relay && !whether || r.hosted == nil || r.Systems[req.Target.Type] != nil {
		return WhereDeliver
	}
	if r.hosted.HasActivation(req.Target) {
		return WhereDeliver
	}
	if relay {
		if c, ok := r.Locator.(cachedLocator); ok {
			if silo, ok := c.Cached(req.Target); ok && silo != "" && silo != r.Self && req.Hops < cmp.Or(r.MaxHops, DefaultMaxHops) {
				if link, err := r.Links.Link(silo); err == nil {
					req.Hint = silo
					link.Relay(req)
					return WhereRelayed
				}
			}
		}
	}
	if whether {
		return WhereNew
	}
	return WhereDeliver
}

// Route implements host.Router.
func (r *Router) Route(req *delivery.Request) {
	if serve := r.Systems[req.Target.Type]; serve != nil {
		if !req.FromSilo {
			// A client may not reach the directory: to it, no such type.
			req.Reply.Reply(req, nil, fmt.Errorf("%w: %q", actor.ErrUnknownGrainType, req.Target.Type))
			req.Release()
			return
		}
		serve(req)
		return
	}
	if r.Locator == nil || req.Hops > 0 && req.Hint == r.Self {
		// A silo that forwarded a grain here placed it here: it activates
		// here without asking again, which, while other silos race to
		// place the same new grain, could send it on once more. Should the
		// grain be registered elsewhere meanwhile, the activation learns it
		// and forwards once, to the winner.
		r.host.Activate(req)
		return
	}
	if c, ok := r.Locator.(cachedLocator); ok {
		if silo, ok := c.Cached(req.Target); ok {
			r.located(req, silo, false, nil)
			return
		}
	}
	r.Locator.Locate(req.Target, req.Hint, func(silo string, placed bool, err error) { r.located(req, silo, placed, err) })
}

// located sends req where the locator said its grain lives; placed says
// that the grain is new there.
func (r *Router) located(req *delivery.Request, silo string, placed bool, err error) {
	switch {
	case err != nil:
		req.Reply.Reply(req, nil, fmt.Errorf("%w: locate %s: %w", proxy.ErrUnavailable, req.Target, err))
		req.Release()
	case silo == "" || silo == r.Self:
		r.host.Activate(req)
	default:
		if placed {
			// The silo it goes to sees only the link, whose requests have
			// no budget: the connection the request came on pays for the
			// new activation here, as it would for one on this silo.
			if err := delivery.SpendActivation(req); err != nil {
				req.Reply.Reply(req, nil, err)
				req.Release()
				return
			}
		}
		// The silo it goes to activates the grain if it has no
		// activation: the placement made here (which honoured the caller's
		// hint if it could), not one of its own, so that silos whose views
		// differ do not pass a new grain along.
		req.Hint = silo
		r.Forward(req, silo)
	}
}

// Forward implements host.Router: it relays req to silo, unless that
// would take it past the forwarding limit.
func (r *Router) Forward(req *delivery.Request, silo string) {
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
	if err == nil {
		link.Relay(req)
		return
	}
	if later, ok := r.Links.(laterLinks); ok {
		// No link yet: relay once it is up, without holding this goroutine.
		later.LinkLater(silo, func(link *Endpoint, err error) {
			if err != nil {
				r.unreachable(req, silo, err)
				return
			}
			link.Relay(req)
		})
		return
	}
	r.unreachable(req, silo, err)
}

// unreachable fails req, whose grain lives on a silo this one cannot
// reach, and forgets that location.
func (r *Router) unreachable(req *delivery.Request, silo string, err error) {
	if f, ok := r.Locator.(forgetter); ok {
		f.Forget(req.Target)
	}
	req.Reply.Reply(req, nil, fmt.Errorf("%w: %s lives on silo %s: %w", proxy.ErrUnavailable, req.Target, silo, err))
	req.Release()
}

// laterLinks are Links that can connect to a silo they have no link to
// yet, and call back once they have (or failed to).
type laterLinks interface {
	LinkLater(silo string, done func(*Endpoint, error))
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

// Locate implements Locator; it answers before it returns. The table
// knows no activations, so it never says a grain was placed.
func (l *StaticLocator) Locate(id actor.GrainID, _ string, done func(string, bool, error)) {
	done(l.where(id), false, nil)
}

// Cached answers as Locate does, without a callback.
func (l *StaticLocator) Cached(id actor.GrainID) (string, bool) { return l.where(id), true }

func (l *StaticLocator) where(id actor.GrainID) string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if silo, ok := l.mu.where[id]; ok {
		return silo
	}
	return l.mu.fallback
}

// Register implements host.Directory: an activation here wins unless the
// table puts the grain on another silo.
func (l *StaticLocator) Register(id actor.GrainID, done func(string, error)) {
	silo := l.where(id)
	if silo == l.self {
		silo = ""
	}
	done(silo, nil)
}

// Unregister implements host.Directory.
func (l *StaticLocator) Unregister(actor.GrainID) {}
