package links

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/transport"
)

// ErrNoLink means this silo has no connection to the silo a grain lives
// on, and could not make one. Package silo exports it, hence its text.
var ErrNoLink = errors.New("silo: no link to silo")

// maxWaiters bounds the requests that wait for one link to come up; more
// fail at once.
const maxWaiters = 1 << 14

// DialTimeout bounds dialling another silo, handshake included.
const DialTimeout = 5 * time.Second

// Options are what a silo's links need of it.
type Options struct {
	// Self is this silo's name.
	Self string
	// Dial and Accept set up the connections this silo dials and those it
	// accepts.
	Dial, Accept transport.Options
	// NewEndpoint makes the endpoint of a link on connection c, nil when
	// the connection is yet to be dialled. It fails while the silo does
	// not run.
	NewEndpoint func(c *transport.Conn) (*rpc.Endpoint, error)
	// Address returns the silo-to-silo address of a member of the
	// membership view.
	Address func(silo string) (string, bool)
	// Go runs fn on a goroutine the silo owns, joined when it stops, and
	// fails once its stop has begun.
	Go func(fn func(ctx context.Context)) error
	// Log is the silo's logger.
	Log *slog.Logger
}

// Links are a silo's links to other silos. Safe for concurrent use.
type Links struct {
	opts Options
	mu   struct {
		sync.Mutex
		links    map[string]*link // by silo name
		waiters  map[string][]func(*rpc.Endpoint, error)
		dialing  map[string]bool
		listener *transport.Listener // links from other silos
		// closed are the final counters of links that closed, so that
		// totals never go back.
		closed rpc.EndpointStats
	}
}

// link is one connection to another silo.
type link struct {
	ep       *rpc.Endpoint
	peer     string
	peerGen  int64
	dialedBy string // the silo that dialled it
	dropped  bool   // its connection has ended and drop has run; guarded by Links.mu
}

// New returns a silo's links, none yet.
func New(opts Options) *Links {
	l := &Links{opts: opts}
	l.mu.links = make(map[string]*link)
	l.mu.waiters = make(map[string][]func(*rpc.Endpoint, error))
	l.mu.dialing = make(map[string]bool)
	return l
}

// handler is a link's connection handler: it forgets the link when the
// connection ends.
type handler struct {
	*rpc.Endpoint
	links *Links
	l     *link
}

func (h *handler) HandleClose(c *transport.Conn, err error) {
	h.Endpoint.HandleClose(c, err)
	h.links.drop(h.l, h.Endpoint.Stats())
}

// Link returns the link to another silo (rpc.Links).
func (ls *Links) Link(silo string) (*rpc.Endpoint, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if l := ls.mu.links[silo]; l != nil {
		return l.ep, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrNoLink, silo)
}

// LinkLater gives done the link to silo once it is up, dialling it when
// nobody is.
func (ls *Links) LinkLater(silo string, done func(*rpc.Endpoint, error)) {
	ls.mu.Lock()
	if l := ls.mu.links[silo]; l != nil {
		ls.mu.Unlock()
		done(l.ep, nil)
		return
	}
	waiting := ls.mu.waiters[silo]
	if len(waiting) >= maxWaiters {
		ls.mu.Unlock()
		done(nil, fmt.Errorf("%w: %s: too many calls wait for the link", ErrNoLink, silo))
		return
	}
	ls.mu.waiters[silo] = append(waiting, done)
	dialing := ls.mu.dialing[silo]
	ls.mu.dialing[silo] = true
	ls.mu.Unlock()
	if dialing {
		return
	}
	if err := ls.opts.Go(func(ctx context.Context) { ls.dialPeer(ctx, silo) }); err != nil {
		ls.answerWaiters(silo, nil, fmt.Errorf("%w: %s: %w", ErrNoLink, silo, err))
	}
}

// Ensure returns the link to silo, dialling it when there is none.
func (ls *Links) Ensure(ctx context.Context, silo string) (*rpc.Endpoint, error) {
	got := make(chan struct{})
	var ep *rpc.Endpoint
	var err error
	ls.LinkLater(silo, func(e *rpc.Endpoint, e2 error) {
		ep, err = e, e2
		close(got)
	})
	select {
	case <-got:
		return ep, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// dialPeer dials the silo named silo at the address the membership view
// gives, and answers whoever waits for the link.
func (ls *Links) dialPeer(ctx context.Context, silo string) {
	ep, err := ls.dial(ctx, silo)
	ls.answerWaiters(silo, ep, err)
}

// answerWaiters ends a dial of silo: whoever waits for the link gets ep
// or err.
func (ls *Links) answerWaiters(silo string, ep *rpc.Endpoint, err error) {
	ls.mu.Lock()
	delete(ls.mu.dialing, silo)
	waiting := ls.mu.waiters[silo]
	delete(ls.mu.waiters, silo)
	if err == nil {
		if l := ls.mu.links[silo]; l != nil {
			ep = l.ep // the link kept when two came up at once
		}
	}
	ls.mu.Unlock()
	for _, done := range waiting {
		done(ep, err)
	}
}

// dial dials silo and registers the link.
func (ls *Links) dial(ctx context.Context, silo string) (*rpc.Endpoint, error) {
	addr, ok := ls.opts.Address(silo)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not in the membership view", ErrNoLink, silo)
	}
	return ls.DialAt(ctx, silo, addr)
}

// DialAt dials the silo named silo listening at addr and registers the
// link.
func (ls *Links) DialAt(ctx context.Context, silo, addr string) (*rpc.Endpoint, error) {
	ep, err := ls.opts.NewEndpoint(nil)
	if err != nil {
		return nil, err
	}
	l := &link{ep: ep, peer: silo, dialedBy: ls.opts.Self}
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	conn, err := transport.Dial(ctx, addr, ls.opts.Dial, &handler{Endpoint: ep, links: ls, l: l},
		transport.WithLogger(ls.opts.Log))
	if err != nil {
		return nil, fmt.Errorf("%w: %s at %s: %w", ErrNoLink, silo, addr, err)
	}
	ep.Attach(conn)
	peer := conn.Peer()
	if peer.SiloID != silo {
		_ = conn.Close()
		return nil, fmt.Errorf("%w: %s answered as %q", ErrNoLink, addr, peer.SiloID)
	}
	l.peerGen = peer.Generation
	if !ls.add(l) {
		return nil, fmt.Errorf("%w: %s at %s: the link closed as it came up", ErrNoLink, silo, addr)
	}
	return ep, nil
}

// Listen listens at addr for links from other silos: silos only, which
// must prove the cluster secret or pass the listener's TLS.
func (ls *Links) Listen(addr string) (*transport.Listener, error) {
	ln, err := transport.Listen(addr, ls.opts.Accept, func(c *transport.Conn) transport.Handler {
		ep, err := ls.opts.NewEndpoint(c)
		if err != nil {
			return nil
		}
		return ls.accept(c, ep)
	}, transport.WithLogger(ls.opts.Log))
	if err != nil {
		return nil, err
	}
	ls.mu.Lock()
	ls.mu.listener = ln
	ls.mu.Unlock()
	return ln, nil
}

// CloseListener closes the listener for links, if it listens.
func (ls *Links) CloseListener() {
	ls.mu.Lock()
	ln := ls.mu.listener
	ls.mu.listener = nil
	ls.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
}

// accept registers a link another silo dialled.
func (ls *Links) accept(c *transport.Conn, ep *rpc.Endpoint) transport.Handler {
	peer := c.Peer()
	l := &link{ep: ep, peer: peer.SiloID, peerGen: peer.Generation, dialedBy: peer.SiloID}
	ls.add(l)
	return &handler{Endpoint: ep, links: ls, l: l}
}

// add keeps l as the link to its peer, or retires whichever of l and the
// existing link the tie-break says goes. Of two links dialled the same way
// the newer is kept: a silo dials again only when it has lost its link,
// and the old one, on its way to closing here, must not push the new one
// out (which left both silos with no link until the next call dialled).
// It reports false, keeping nothing, when l's connection has ended.
func (ls *Links) add(l *link) bool {
	canonical := min(ls.opts.Self, l.peer) // the silo whose dialled link is kept
	ls.mu.Lock()
	if l.dropped {
		// A dialled connection can end before DialAt registers it; kept,
		// it would be a dead link no drop ever removes.
		ls.mu.Unlock()
		return false
	}
	old := ls.mu.links[l.peer]
	keepNew := old == nil || old.peerGen != l.peerGen || old.dialedBy == l.dialedBy || closed(old) ||
		l.dialedBy == canonical && old.dialedBy != canonical
	var retired *link
	if keepNew {
		ls.mu.links[l.peer] = l
		retired = old
	} else {
		retired = l
	}
	ls.mu.Unlock()
	if retired != nil {
		ls.retire(retired)
	}
	return true
}

// closed reports whether l's connection has ended.
func closed(l *link) bool {
	select {
	case <-l.ep.Conn().Done():
		return true
	default:
		return false
	}
}

// drop forgets l when its connection ended, keeping its final counters.
func (ls *Links) drop(l *link, final rpc.EndpointStats) {
	ls.mu.Lock()
	l.dropped = true
	if ls.mu.links[l.peer] == l {
		delete(ls.mu.links, l.peer)
	}
	ls.mu.closed.Add(final)
	ls.mu.Unlock()
}

// retire closes a link no new call uses, once the calls it carries both
// ways are done (or a while has passed).
func (ls *Links) retire(l *link) {
	err := ls.opts.Go(func(ctx context.Context) {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(30 * time.Second)
		for {
			st := l.ep.Stats()
			if st.Pending == 0 && st.InFlight == 0 {
				break
			}
			select {
			case <-tick.C:
				continue
			case <-deadline:
			case <-ctx.Done():
			}
			break
		}
		ls.opts.Log.Debug("closing a second link to the same silo", slog.String("peer", l.peer))
		_ = l.ep.Conn().Close()
	})
	if err != nil {
		_ = l.ep.Conn().Close() // the silo stops: nothing waits for its calls
	}
}

// CloseAll closes every link.
func (ls *Links) CloseAll() {
	ls.mu.Lock()
	links := make([]*link, 0, len(ls.mu.links))
	for _, l := range ls.mu.links {
		links = append(links, l)
	}
	ls.mu.Unlock()
	for _, l := range links {
		_ = l.ep.Conn().Close()
	}
}

// CloseExcept closes the links to silos not in keep, which gives the
// generation of each silo to keep.
func (ls *Links) CloseExcept(keep map[string]int64) {
	ls.mu.Lock()
	var gone []*link
	for peer, l := range ls.mu.links {
		if gen, ok := keep[peer]; !ok || gen != l.peerGen {
			gone = append(gone, l)
		}
	}
	ls.mu.Unlock()
	for _, l := range gone {
		_ = l.ep.Conn().Close()
	}
}

// Conns returns the connections of the links.
func (ls *Links) Conns() []*transport.Conn {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	conns := make([]*transport.Conn, 0, len(ls.mu.links))
	for _, l := range ls.mu.links {
		conns = append(conns, l.ep.Conn())
	}
	return conns
}

// Stats are the links' counters.
type Stats struct {
	Live     rpc.EndpointStats       // summed over the links open now
	Closed   rpc.EndpointStats       // the final counters of the links that closed
	Listener transport.ListenerStats // the listener's, while it listens
}

// Stats returns the links' counters. A link counts either among the live
// ones or among the closed, never in both.
func (ls *Links) Stats() Stats {
	ls.mu.Lock()
	eps := make([]*rpc.Endpoint, 0, len(ls.mu.links))
	for _, l := range ls.mu.links {
		eps = append(eps, l.ep)
	}
	ln := ls.mu.listener
	st := Stats{Closed: ls.mu.closed}
	ls.mu.Unlock()
	if ln != nil {
		st.Listener = ln.Stats()
	}
	for _, ep := range eps {
		st.Live.Add(ep.Stats())
	}
	return st
}
