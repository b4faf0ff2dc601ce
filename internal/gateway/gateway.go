package gateway

import (
	"context"
	"log/slog"
	"maps"
	"net"
	"sync"
	"sync/atomic"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/internal/wire"
)

// Options configure a gateway.
type Options struct {
	// Transport sets the connections up: clients only, their credentials,
	// the connection limits.
	Transport transport.Options
	// Endpoint sets up the silo's end of every client connection; the
	// gateway adds the client's rights and identity, the rights methods
	// require, and the shares.
	Endpoint rpc.EndpointOptions
	// Shares divide the silo between its busy client connections.
	Shares rpc.ShareOptions
	// TokenRights and CertificateRights are the rights of the clients'
	// credentials, by token name and by certificate name.
	TokenRights, CertificateRights map[string]actor.Rights
	// Clock is the silo's clock; ShareClock ages the shares.
	Clock, ShareClock clock.Clock
	// Log is the silo's logger.
	Log *slog.Logger
}

// Gateway is a silo's listener for clients. Safe for concurrent use.
type Gateway struct {
	opts     Options
	shares   *rpc.Shares
	required requiredRights

	mu struct {
		sync.Mutex
		listener  *transport.Listener
		endpoints map[*rpc.Endpoint]struct{}
		// closed are the final counters of the connections that closed, so
		// that totals never go back.
		closed   rpc.EndpointStats
		stopping bool // no new connection is taken

		closeDone chan struct{} // closed once the listener has closed
		closeErr  error
	}
}

// New returns a gateway that listens nowhere yet.
func New(opts Options) *Gateway {
	g := &Gateway{opts: opts, shares: rpc.NewShares(opts.Shares, opts.ShareClock)}
	g.opts.Endpoint.Shares = g.shares
	g.mu.endpoints = make(map[*rpc.Endpoint]struct{})
	return g
}

// Serve accepts clients on ln, delivering their requests to inbound.
// It closes ln when it fails.
func (g *Gateway) Serve(ln net.Listener, inbound rpc.Inbound, interner *wire.Interner) error {
	g.shares.Start()
	l, err := transport.Serve(ln, g.opts.Transport, func(c *transport.Conn) transport.Handler {
		if c.Peer().Role != transport.RoleClient {
			return nil // the handshake admits clients only; this is a second lock
		}
		opts := g.endpointFor(c)
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.mu.stopping {
			return nil // a stopping silo takes no new connections
		}
		// Made under the lock, after the check: the endpoint joins its
		// client's shares, which only its close leaves.
		ep := rpc.NewEndpoint(opts, inbound, interner, g.opts.Clock, g.opts.Log)
		ep.Attach(c)
		g.mu.endpoints[ep] = struct{}{}
		return &conn{Endpoint: ep, g: g}
	}, transport.WithLogger(g.opts.Log))
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.mu.listener = l
	g.mu.Unlock()
	return nil
}

// endpointFor is how the silo's end of the client connection c is set
// up: its limits, and who the client is, with the rights of the
// credential it proved.
func (g *Gateway) endpointFor(c *transport.Conn) rpc.EndpointOptions {
	opts := g.opts.Endpoint
	id := g.identify(c.Peer())
	opts.Rights, opts.Caller = id.Rights, host.NewCaller(id)
	if g.required.m.Load() != nil {
		opts.Required = g.required.lookup
	}
	return opts
}

// identify says who the client at the other end of a connection proved
// to be: the token it proved, else the certificate TLS verified, else
// nobody in particular; with the rights its credential grants.
func (g *Gateway) identify(peer transport.Identity) actor.Identity {
	id := actor.Identity{Kind: actor.CallerClient}
	switch {
	case peer.Token != "":
		id.Name, id.Credential = peer.Token, actor.CredentialToken
		id.Rights = g.opts.TokenRights[peer.Token]
	case peer.Certificate != nil:
		id.Name, id.Credential = transport.CertificateName(peer.Certificate), actor.CredentialCertificate
		if id.Name != "" {
			id.Rights = g.opts.CertificateRights[id.Name]
		}
	}
	return id
}

// conn forgets its endpoint when the connection ends.
type conn struct {
	*rpc.Endpoint
	g *Gateway
}

func (c *conn) HandleClose(tc *transport.Conn, err error) {
	c.Endpoint.HandleClose(tc, err)
	final := c.Endpoint.Stats()
	c.g.mu.Lock()
	if _, ok := c.g.mu.endpoints[c.Endpoint]; ok {
		delete(c.g.mu.endpoints, c.Endpoint)
		c.g.mu.closed.Add(final)
	}
	c.g.mu.Unlock()
}

// Addr returns the address the gateway listens on, or nil.
func (g *Gateway) Addr() net.Addr {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mu.listener == nil {
		return nil
	}
	return g.mu.listener.Addr()
}

// StopAccepting makes the gateway take no new connection; those it has
// go on.
func (g *Gateway) StopAccepting() {
	g.mu.Lock()
	g.mu.stopping = true
	g.mu.Unlock()
}

// Conns returns the client connections open now.
func (g *Gateway) Conns() []*transport.Conn {
	g.mu.Lock()
	defer g.mu.Unlock()
	conns := make([]*transport.Conn, 0, len(g.mu.endpoints))
	for ep := range g.mu.endpoints {
		conns = append(conns, ep.Conn())
	}
	return conns
}

// Close closes the listener and its connections, waiting within ctx, and
// then stops the shares. Closing a connection waits for a turn that its
// runner is inside, and a grain that ignores cancellation can hold that
// turn, so the close runs on a goroutine of its own that this and any
// later call wait for. The listener's error is returned once.
func (g *Gateway) Close(ctx context.Context) error {
	defer g.shares.Stop()
	g.mu.Lock()
	listener := g.mu.listener
	if listener == nil {
		g.mu.Unlock()
		return nil
	}
	if g.mu.closeDone == nil {
		done := make(chan struct{})
		g.mu.closeDone = done
		go func() {
			err := listener.Close()
			g.mu.Lock()
			g.mu.closeErr = err
			g.mu.Unlock()
			close(done)
		}()
	}
	done := g.mu.closeDone
	g.mu.Unlock()
	select {
	case <-done:
		g.mu.Lock()
		err := g.mu.closeErr
		g.mu.closeErr = nil // reported once
		g.mu.Unlock()
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Kill closes the listener and its connections at once, as a crash
// would.
func (g *Gateway) Kill() {
	g.mu.Lock()
	listener := g.mu.listener
	g.mu.Unlock()
	if listener != nil {
		_ = listener.Close()
	}
}

// Stats are the gateway's counters.
type Stats struct {
	Clients  int                     // client connections open
	Live     rpc.EndpointStats       // summed over the client connections open
	Closed   rpc.EndpointStats       // the final counters of those that closed
	Listener transport.ListenerStats // the listener's, once it listens
}

// Stats returns the gateway's counters. A connection counts either among
// the live ones or among the closed, never in both.
func (g *Gateway) Stats() Stats {
	g.mu.Lock()
	eps := make([]*rpc.Endpoint, 0, len(g.mu.endpoints))
	for ep := range g.mu.endpoints {
		eps = append(eps, ep)
	}
	listener := g.mu.listener
	st := Stats{Closed: g.mu.closed, Clients: len(eps)}
	g.mu.Unlock()
	if listener != nil {
		st.Listener = listener.Stats()
	}
	for _, ep := range eps {
		st.Live.Add(ep.Stats())
	}
	return st
}

// requiredRights are the rights that methods need of a client: written
// rarely (Require), read on every client request, so readers load an
// immutable map.
type requiredRights struct {
	mu sync.Mutex // serialises writers
	m  atomic.Pointer[map[methodKey]actor.Rights]
}

type methodKey struct {
	grainType string
	method    uint32
}

// lookup returns the rights a method needs; none for a method not listed.
func (r *requiredRights) lookup(grainType string, method uint32) actor.Rights {
	if m := r.m.Load(); m != nil {
		return (*m)[methodKey{grainType, method}]
	}
	return 0
}

// Require makes the method numbered method of grainType need the rights
// r of a client; calling it again for the method adds rights. Connections
// made before the first call require nothing.
func (g *Gateway) Require(grainType string, method uint32, r actor.Rights) {
	g.required.mu.Lock()
	defer g.required.mu.Unlock()
	next := make(map[methodKey]actor.Rights)
	if old := g.required.m.Load(); old != nil {
		maps.Copy(next, *old)
	}
	next[methodKey{grainType, method}] |= r
	g.required.m.Store(&next)
}
