package silo

import (
	"context"

	"github.com/granary-go/granary/internal/rpc"
)

// WithLocator sets where the silo's grains live, for tests that link silos
// by hand.
func WithLocator(l rpc.Locator) Option { return func(d *deps) { d.locator = l } }

// LinkTo connects s to the silo named name, listening at addr, by hand.
func (s *Silo) LinkTo(ctx context.Context, name, addr string) error { return s.link(ctx, name, addr) }

// ReachabilitySource is what the minority fence watches.
type ReachabilitySource = reachabilitySource

// WithReachability makes the fence watch what wrap returns instead of the
// silo's membership: wrap gets the silo's name and its membership.
func WithReachability(wrap func(self string, membership ReachabilitySource) ReachabilitySource) Option {
	return func(d *deps) { d.reachability = wrap }
}
