package limitgrain

import (
	"context"
	"time"

	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
)

// heldLease is a concurrency lease the grain keeps until it is released
// or expires.
type heldLease struct {
	permits int64
	expires time.Time
}

// Lease expiry: a concurrency lease lives its time to live (the options'
// LeaseTTL) from its grant or its last renewal. Its holder renews it in
// the background while it is held; a holder that crashed, was cut off, or
// never saw the grant (a lost reply) stops renewing, and the lease expires:
// its permits come back and serve the queue, as a release's do. One timer,
// armed for the earliest expiry, covers every lease: renewals only move
// expiries later, so the timer fires at most once per time to live while
// every holder is alive, and then finds nothing due.

// leaseTimes is what a concurrency grain keeps to expire its leases.
type leaseTimes struct {
	ttl time.Duration // a concurrency lease's time to live
	// expiry is the one timer armed for the earliest lease expiry, at
	// expiryAt; nil while no lease is held.
	expiry   timer
	expiryAt time.Time
	onExpiry func()
}

// holdLease keeps a lease until expires, arming the expiry timer when it
// is the earliest.
func (g *grain[O, P, R]) holdLease(id uint64, permits int64, expires time.Time) {
	g.leases[id] = heldLease{permits: permits, expires: expires}
	if g.expiry == nil || expires.Before(g.expiryAt) {
		g.armExpiry(expires)
	}
}

func (g *grain[O, P, R]) armExpiry(at time.Time) {
	if g.expiry != nil {
		g.expiry.Stop()
	}
	if g.onExpiry == nil {
		g.onExpiry = g.expireLeases
	}
	g.expiryAt = at
	g.expiry = g.act.AfterFunc(max(at.Sub(g.act.Now()), 0), g.onExpiry)
}

// expireLeases is the expiry timer: every lease due gives its permits
// back, the queue is served, and the timer is armed for the next expiry.
func (g *grain[O, P, R]) expireLeases() {
	g.expiry = nil
	now := g.act.Now()
	var next time.Time
	expired := false
	for id, l := range g.leases {
		if !l.expires.After(now) {
			delete(g.leases, id)
			_ = g.releaser.Release(now, l.permits) // held: never more than the limiter lent
			expired = true
			continue
		}
		if next.IsZero() || l.expires.Before(next) {
			next = l.expires
		}
	}
	if !next.IsZero() {
		g.armExpiry(next)
	}
	if expired {
		g.act.MarkDirty()
		g.settle(now)
	}
}

// Renew gives each named lease another time to live from now, and names
// those the grain does not hold. Renewals only move expiries later, so the
// armed timer stays; it finds the renewed leases not yet due when it
// fires.
func (g *grain[O, P, R]) Renew(_ context.Context, in *pb.RenewRequest) (*pb.RenewReply, error) {
	out := &pb.RenewReply{}
	expires := g.act.Now().Add(g.ttl)
	for _, id := range in.LeaseIds {
		l, ok := g.leases[id]
		if !ok {
			out.Unknown = append(out.Unknown, id)
			continue
		}
		l.expires = expires
		g.leases[id] = l
	}
	if len(in.LeaseIds) > len(out.Unknown) {
		g.act.MarkDirty() // the stored expiries move too
	}
	return out, nil
}
