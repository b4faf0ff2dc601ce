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
// lost rounds. The loop runs only while the reference has live leases; a
// release that leaves none stops it at once.

// renewals are the live concurrency leases of one grain reference.
type renewals struct {
	mu struct {
		sync.Mutex
		leases  map[uint64]*Lease
		ttl     time.Duration // the shortest time to live among them
		running bool
		stop    chan struct{} // closed to end the loop at once, when no lease is left
	}
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
		r.mu.leases = make(map[uint64]*Lease)
	}
	r.mu.leases[l.md.LeaseId] = l
	l.renewedAt = time.Now()
	if r.mu.ttl == 0 || ttl < r.mu.ttl {
		r.mu.ttl = ttl
	}
	if !r.mu.running {
		r.mu.running = true
		r.mu.stop = make(chan struct{})
		go g.renewLoop(r.mu.stop)
	}
}

// untrack stops renewing l; the last lease stops the loop.
func (g *grainRef) untrack(l *Lease) {
	r := &g.renewals
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.mu.leases[l.md.LeaseId]; !ok {
		return
	}
	delete(r.mu.leases, l.md.LeaseId)
	if len(r.mu.leases) == 0 && r.mu.running {
		r.mu.running, r.mu.ttl = false, 0
		close(r.mu.stop)
	}
}

// renewLoop renews the reference's leases until none is left.
func (g *grainRef) renewLoop(stop chan struct{}) {
	r := &g.renewals
	r.mu.Lock()
	interval := renewInterval(r.mu.ttl)
	r.mu.Unlock()
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		ids := make([]uint64, 0, len(r.mu.leases))
		for id := range r.mu.leases {
			ids = append(ids, id)
		}
		interval = renewInterval(r.mu.ttl)
		r.mu.Unlock()
		g.renewOnce(ids, interval)
		t.Reset(interval)
	}
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
	var lost []*Lease
	r.mu.Lock()
	if err == nil {
		for _, id := range ids {
			if l := r.mu.leases[id]; l != nil {
				l.renewedAt = now
			}
		}
		for _, id := range reply.Unknown {
			if l := r.mu.leases[id]; l != nil {
				lost = append(lost, l)
			}
		}
	} else {
		for _, id := range ids {
			if l := r.mu.leases[id]; l != nil && now.Sub(l.renewedAt) >= time.Duration(l.md.TtlNanos) {
				lost = append(lost, l)
			}
		}
	}
	r.mu.Unlock()
	for _, l := range lost {
		g.untrack(l)
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
