package silo

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
// on, and could not make one.
var ErrNoLink = errors.New("silo: no link to silo")

// maxLinkWaiters bounds the requests that wait for one link to come up;
// more fail at once.
const maxLinkWaiters = 1 << 14

// linkDialTimeout bounds dialling another silo, handshake included.
const linkDialTimeout = 5 * time.Second

// A silo keeps one link to each other silo, carrying calls both ways. Each
// end may dial the other when it needs a link first; when two links to the
// same silo come up, the one dialled by the silo with the smaller name is
// kept, on both ends, and the other is retired: no new call uses it, and it
// closes once the calls it carries are done.

// link is one connection to another silo.
type link struct {
	ep       *rpc.Endpoint
	peer     string
	peerGen  int64
	dialedBy string // the silo that dialled it
}

// linkHandler is a link's connection handler: it forgets the link when
// the connection ends.
type linkHandler struct {
	*rpc.Endpoint
	silo *Silo
	l    *link
}

func (h *linkHandler) HandleClose(c *transport.Conn, err error) {
	h.Endpoint.HandleClose(c, err)
	h.silo.dropLink(h.l, h.Endpoint.Stats())
}

// siloLinks are the silo's links as its router reaches them (rpc.Links,
// and the router's way to wait for a link), so that they stay out of the
// silo's exported methods.
type siloLinks Silo

// Link implements rpc.Links.
func (l *siloLinks) Link(silo string) (*rpc.Endpoint, error) { return (*Silo)(l).linkOf(silo) }

// LinkLater lets the router wait for a link.
func (l *siloLinks) LinkLater(silo string, done func(*rpc.Endpoint, error)) {
	(*Silo)(l).linkLater(silo, done)
}

// linkOf returns the link to another silo.
func (s *Silo) linkOf(silo string) (*rpc.Endpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.mu.links[silo]; l != nil {
		return l.ep, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrNoLink, silo)
}

// linkLater gives done the link to silo once it is up, dialling it when
// nobody is.
func (s *Silo) linkLater(silo string, done func(*rpc.Endpoint, error)) {
	s.mu.Lock()
	if l := s.mu.links[silo]; l != nil {
		s.mu.Unlock()
		done(l.ep, nil)
		return
	}
	waiting := s.mu.linkWaiters[silo]
	if len(waiting) >= maxLinkWaiters {
		s.mu.Unlock()
		done(nil, fmt.Errorf("%w: %s: too many calls wait for the link", ErrNoLink, silo))
		return
	}
	s.mu.linkWaiters[silo] = append(waiting, done)
	dialing := s.mu.dialing[silo]
	s.mu.dialing[silo] = true
	s.mu.Unlock()
	if dialing {
		return
	}
	if !s.goBackground(func(ctx context.Context) { s.dialPeer(ctx, silo) }) {
		s.answerLinkWaiters(silo, nil, fmt.Errorf("%w: %s: %w", ErrNoLink, silo, ErrStopping))
	}
}

// ensureLink returns the link to silo, dialling it when there is none.
func (s *Silo) ensureLink(ctx context.Context, silo string) (*rpc.Endpoint, error) {
	got := make(chan struct{})
	var ep *rpc.Endpoint
	var err error
	s.linkLater(silo, func(e *rpc.Endpoint, e2 error) {
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
func (s *Silo) dialPeer(ctx context.Context, silo string) {
	ep, err := s.dialLink(ctx, silo)
	s.answerLinkWaiters(silo, ep, err)
}

// answerLinkWaiters ends a dial of silo: whoever waits for the link gets
// ep or err.
func (s *Silo) answerLinkWaiters(silo string, ep *rpc.Endpoint, err error) {
	s.mu.Lock()
	delete(s.mu.dialing, silo)
	waiting := s.mu.linkWaiters[silo]
	delete(s.mu.linkWaiters, silo)
	if err == nil {
		if l := s.mu.links[silo]; l != nil {
			ep = l.ep // the link kept when two came up at once
		}
	}
	s.mu.Unlock()
	for _, done := range waiting {
		done(ep, err)
	}
}

// dialLink dials silo and registers the link.
func (s *Silo) dialLink(ctx context.Context, silo string) (*rpc.Endpoint, error) {
	addr, ok := s.memberAddress(silo)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not in the membership view", ErrNoLink, silo)
	}
	return s.dialLinkAt(ctx, silo, addr)
}

// dialLinkAt dials the silo named silo listening at addr.
func (s *Silo) dialLinkAt(ctx context.Context, silo, addr string) (*rpc.Endpoint, error) {
	h := s.host.Load()
	if h == nil {
		return nil, ErrNotStarted
	}
	s.mu.Lock()
	interner := s.mu.interner
	s.mu.Unlock()
	ep := s.newLinkEndpoint(h, interner, nil)
	l := &link{ep: ep, peer: silo, dialedBy: s.opts.Name}
	ctx, cancel := context.WithTimeout(ctx, linkDialTimeout)
	defer cancel()
	conn, err := transport.Dial(ctx, addr, s.opts.linkTransport(s.gen, true), &linkHandler{Endpoint: ep, silo: s, l: l},
		transport.WithLogger(s.log))
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
	s.addLink(l)
	return ep, nil
}

// acceptLink registers a link another silo dialled.
func (s *Silo) acceptLink(c *transport.Conn, ep *rpc.Endpoint) transport.Handler {
	peer := c.Peer()
	l := &link{ep: ep, peer: peer.SiloID, peerGen: peer.Generation, dialedBy: peer.SiloID}
	s.addLink(l)
	return &linkHandler{Endpoint: ep, silo: s, l: l}
}

// addLink keeps l as the link to its peer, or retires whichever of l and
// the existing link the tie-break says goes.
func (s *Silo) addLink(l *link) {
	canonical := min(s.opts.Name, l.peer) // the silo whose dialled link is kept
	s.mu.Lock()
	old := s.mu.links[l.peer]
	keepNew := old == nil || old.peerGen != l.peerGen || l.dialedBy == canonical && old.dialedBy != canonical
	var retired *link
	if keepNew {
		s.mu.links[l.peer] = l
		retired = old
	} else {
		retired = l
	}
	s.mu.Unlock()
	if retired != nil {
		s.retireLink(retired)
	}
}

// dropLink forgets l when its connection ended, keeping its final
// counters.
func (s *Silo) dropLink(l *link, final rpc.EndpointStats) {
	s.mu.Lock()
	if s.mu.links[l.peer] == l {
		delete(s.mu.links, l.peer)
	}
	s.mu.closedLinks.Add(final)
	s.mu.Unlock()
}

// retireLink closes a link no new call uses, once the calls it carries
// both ways are done (or a while has passed).
func (s *Silo) retireLink(l *link) {
	started := s.goBackground(func(ctx context.Context) {
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
		s.log.Debug("closing a second link to the same silo", slog.String("peer", l.peer))
		_ = l.ep.Conn().Close()
	})
	if !started {
		_ = l.ep.Conn().Close() // the silo stops: nothing waits for its calls
	}
}

// closeLinks closes every link to another silo.
func (s *Silo) closeLinks() {
	s.mu.Lock()
	links := make([]*link, 0, len(s.mu.links))
	for _, l := range s.mu.links {
		links = append(links, l)
	}
	s.mu.Unlock()
	for _, l := range links {
		_ = l.ep.Conn().Close()
	}
}

// closeLinksExcept closes the links to silos not in keep.
func (s *Silo) closeLinksExcept(keep map[string]int64) {
	s.mu.Lock()
	var gone []*link
	for peer, l := range s.mu.links {
		if gen, ok := keep[peer]; !ok || gen != l.peerGen {
			gone = append(gone, l)
		}
	}
	s.mu.Unlock()
	for _, l := range gone {
		_ = l.ep.Conn().Close()
	}
}

// goBackground runs fn on a goroutine the silo owns, joined by Stop, and
// reports whether it did: once stopBackground has begun it starts nothing,
// so that no Add of the group races its Wait.
func (s *Silo) goBackground(fn func(ctx context.Context)) bool {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgStopped {
		return false
	}
	if s.bgDone == nil {
		s.bgDone, s.bgCancel = context.WithCancel(context.Background())
	}
	ctx := s.bgDone
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		fn(ctx)
	}()
	return true
}

// stopBackground ends the silo's background work and waits for it; from
// then on goBackground refuses new work.
func (s *Silo) stopBackground() {
	s.bgMu.Lock()
	s.bgStopped = true
	if s.bgCancel != nil {
		s.bgCancel()
	}
	s.bgMu.Unlock()
	s.bg.Wait()
}

// reopenBackground lets a Start retried after a failed one run background
// work again. The failed Start's stopBackground has returned by then, so
// no goroutine of the group is left.
func (s *Silo) reopenBackground() {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	s.bgStopped = false
	s.bgDone, s.bgCancel = nil, nil
}

// background holds the silo's own goroutines (dialling, retiring links).
type background struct {
	bgMu      sync.Mutex
	bg        sync.WaitGroup
	bgStopped bool            // stopBackground has begun: no new work
	bgDone    context.Context // ends with the silo: the parent of its own work, not a caller's
	bgCancel  context.CancelFunc
}
