package silo

import (
	"context"
	"sync"

	"github.com/granary-go/granary/internal/links"
	"github.com/granary-go/granary/internal/rpc"
	"github.com/granary-go/granary/internal/transport"
)

// ErrNoLink means this silo has no connection to the silo a grain lives
// on, and could not make one.
var ErrNoLink = links.ErrNoLink

// newLinks makes the silo's links to other silos (internal/links).
func (s *Silo) newLinks() *links.Links {
	return links.New(links.Options{
		Self:   s.opts.Name,
		Dial:   s.opts.linkTransport(s.gen, true),
		Accept: s.opts.linkTransport(s.gen, false),
		NewEndpoint: func(c *transport.Conn) (*rpc.Endpoint, error) {
			return s.newLinkEndpoint(c)
		},
		Address: func(silo string) (string, bool) { return s.membership.Address(silo) },
		Go:      s.goBackground,
		Log:     s.log,
	})
}

// newLinkEndpoint makes the endpoint of a link on connection c (nil when
// the connection is yet to be dialled).
func (s *Silo) newLinkEndpoint(c *transport.Conn) (*rpc.Endpoint, error) {
	h := s.host.Load()
	if h == nil {
		return nil, ErrNotStarted
	}
	s.mu.Lock()
	interner := s.mu.interner
	s.mu.Unlock()
	opts := s.opts.linkEndpoint(s.rejected)
	if s.dir != nil {
		opts.Moved = s.dir.Moved
	}
	ep := rpc.NewEndpoint(opts, s.inbound(h), interner, s.deps.clock, s.log)
	if c != nil {
		ep.Attach(c)
	}
	return ep, nil
}

// goBackground runs fn on a goroutine the silo owns, joined by Stop, and
// fails with ErrStopping once stopBackground has begun: then it starts
// nothing, so that no Add of the group races its Wait.
func (s *Silo) goBackground(fn func(ctx context.Context)) error {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgStopped {
		return ErrStopping
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
	return nil
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

// background holds the silo's own goroutines (dialling and retiring
// links, following the membership, the fence).
type background struct {
	bgMu      sync.Mutex
	bg        sync.WaitGroup
	bgStopped bool            // stopBackground has begun: no new work
	bgDone    context.Context // ends with the silo: the parent of its own work, not a caller's
	bgCancel  context.CancelFunc
}
