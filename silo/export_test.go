package silo

import (
	"context"
	"fmt"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/host"
	"github.com/granary-go/granary/internal/rpc"
)

// WithLocator sets where the silo's grains live, for tests that link silos
// by hand.
func WithLocator(l rpc.Locator) Option { return func(d *deps) { d.locator = l } }

// ListenForLinks opens the listener for other silos of a silo that is not
// in a cluster, for tests that link silos by hand, and returns its address.
func (s *Silo) ListenForLinks() (string, error) {
	if s.host.Load() == nil {
		return "", ErrNotStarted
	}
	l, err := s.links.Listen("127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("silo: listen for silos: %w", err)
	}
	return l.Addr().String(), nil
}

// LinkTo connects s to the silo named name, listening at addr, by hand.
func (s *Silo) LinkTo(ctx context.Context, name, addr string) error { return s.link(ctx, name, addr) }

// ReachabilitySource is what the minority fence watches.
type ReachabilitySource = reachabilitySource

// WithReachability makes the fence watch what wrap returns instead of the
// silo's membership: wrap gets the silo's name and its membership.
func WithReachability(wrap func(self string, membership ReachabilitySource) ReachabilitySource) Option {
	return func(d *deps) { d.reachability = wrap }
}

// Host returns the activation host, or nil before Start.
func (s *Silo) Host() *host.Host { return s.host.Load() }

// Link returns the link to another silo, for tests of the links.
func (s *Silo) Link(silo string) (*rpc.Endpoint, error) { return s.links.Link(silo) }

// LinkLater gives done the link to silo once it is up, for tests of the
// links.
func (s *Silo) LinkLater(silo string, done func(*rpc.Endpoint, error)) { s.links.LinkLater(silo, done) }

// WithShareClock sets the clock that ages the client connections' shares
// alone, for tests whose grains need real time.
func WithShareClock(c clock.Clock) Option { return func(d *deps) { d.shareClock = c } }
