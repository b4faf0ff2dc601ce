package ratelimit

import (
	"context"
	"errors"
	"sync"
	"time"

	pb "github.com/granary-go/granary/grains/ratelimit/ratelimitpb"
	"github.com/granary-go/granary/proxy"
)

// Renewal of concurrency leases. A concurrency grain expires a lease that
// is not renewed within its time to live (the limiter's LeaseTTL), so the
// permits of a holder that crashed or was cut off come back by
// themselves. A live holder renews its leases in the background: each
// grain reference renews all the leases it handed out in one Renew call
// per round, every third of the time to live, so a lease survives two
// lost rounds. Rounds run only while the reference has live leases: the
// last release stops them.

// renewals are the live concurrency leases of one grain reference.
type renewals struct {
	mu struct {
		sync.Mutex
		leases map[uint64]renewed
		ttl    time.Duration // the shortest time to live among them
		// timer runs the next round, armed while leases are held. It is
		// made once per reference and reset, not made again, so that a
		// holder that acquires and releases in a loop allocates nothing
		// for renewals; a pending timer is no goroutine.
		timer     *time.Timer
		scheduled bool
	}
}

// renewed is a live lease and when the grain last renewed it.
type renewed struct {
	lease *Lease
	at    time.Time
}

// renewInterval is how often leases with time to live ttl are renewed.
func renewInterval(ttl time.Duration) time.Duration { return ttl / 3 }

// track starts renewing l, a concurrency lease of g that expires.
func (g *grainRef) track(l *Lease) {
	ttl := time.Duration(l.md.TtlNanos)
	if ttl <= 0 || g.renew == nil {
		return // an older server: its leases never expire
	}
	r := &g.renewals
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.leases == nil {
		r.mu.leases = make(map[uint64]renewed)
	}
	r.mu.leases[l.md.LeaseId] = renewed{lease: l, at: time.Now()}
	if r.mu.ttl == 0 || ttl < r.mu.ttl {
		r.mu.ttl = ttl
	}
	if r.mu.scheduled {
		return
	}
	r.mu.scheduled = true
	if r.mu.timer == nil {
		r.mu.timer = time.AfterFunc(renewInterval(r.mu.ttl), g.renewRound)
	} else {
		r.mu.timer.Reset(renewInterval(r.mu.ttl))
	}
}

// untrack stops renewing l; the last lease stops the rounds (the timer is
// kept, to be reset by the next lease).
func (g *grainRef) untrack(l *Lease) {
	r := &g.renewals
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.mu.leases, l.md.LeaseId)
	if len(r.mu.leases) == 0 && r.mu.scheduled {
		r.mu.timer.Stop() // a round already on its way finds nothing, or renews early: both harmless
		r.mu.scheduled, r.mu.ttl = false, 0
	}
}

// renewRound is one round of renewals, run by the timer: one Renew for
// every live lease, then the next round, or none when no lease is left.
func (g *grainRef) renewRound() {
	r := &g.renewals
	r.mu.Lock()
	if len(r.mu.leases) == 0 {
		r.mu.scheduled, r.mu.ttl = false, 0
		r.mu.Unlock()
		return
	}
	ids := make([]uint64, 0, len(r.mu.leases))
	for id := range r.mu.leases {
		ids = append(ids, id)
	}
	interval := renewInterval(r.mu.ttl)
	r.mu.Unlock()
	g.renewOnce(ids, interval)
	r.mu.Lock()
	if r.mu.scheduled && len(r.mu.leases) > 0 {
		r.mu.timer.Reset(interval)
	} else {
		r.mu.scheduled, r.mu.ttl = false, 0
	}
	r.mu.Unlock()
}

// renewOnce sends one Renew for ids. Leases the grain no longer knows
// (expired, or forgotten by a reset) stop being renewed; so do leases
// whose renewals have failed for longer than their time to live, which
// have expired on the grain whatever happens now.
func (g *grainRef) renewOnce(ids []uint64, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	reply := new(pb.RenewReply)
	err := g.ref.Invoke(ctx, g.renew, &pb.RenewRequest{LeaseIds: ids}, reply)
	now := time.Now()
	r := &g.renewals
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		for _, id := range ids {
			if l, ok := r.mu.leases[id]; ok && now.Sub(l.at) >= time.Duration(l.lease.md.TtlNanos) {
				delete(r.mu.leases, id)
			}
		}
		return
	}
	for _, id := range ids {
		if l, ok := r.mu.leases[id]; ok {
			l.at = now
			r.mu.leases[id] = l
		}
	}
	for _, id := range reply.Unknown {
		delete(r.mu.leases, id)
	}
}

// releaseRetryable reports whether a failed release may succeed when
// tried again: the silo was unreachable, or did not answer in time.
func releaseRetryable(err error) bool {
	return errors.Is(err, proxy.ErrUnavailable) || errors.Is(err, proxy.ErrTimeout)
}

// Detach stops renewing the lease in this process, for code that hands
// the lease id to someone else (a service that answers remote callers):
// from then on whoever holds the id renews the lease (the grain's Renew)
// or releases it, or it expires one time to live after its last renewal.
// Release still works. Detach does nothing for a lease that needs no
// release.
func (l *Lease) Detach() {
	if l.grain != nil && l.md.Acquired && !l.md.ReleaseOptional {
		l.grain.untrack(l)
	}
}

// TTL returns how long the grain keeps a concurrency lease that is not
// renewed; 0 for leases that need no release (and from servers whose
// leases never expire).
func (l *Lease) TTL() time.Duration { return time.Duration(l.md.TtlNanos) }
