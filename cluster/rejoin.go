package cluster

import (
	"net/netip"
	"slices"
	"time"
)

// maxRejoinFailed bounds how many failed members the rejoin loop keeps
// dialling: past it, the longest-failed is forgotten first.
const maxRejoinFailed = 64

// rejoinTargets is the deterministic core of the rejoin loop: it remembers
// the members seen to fail, for Timings.RejoinWindow, and says which gossip
// addresses a round should dial. memberlist stops gossiping to a member
// GossipToTheDeadTime after declaring it dead and never dials it again, so
// two sides of a healed partition stay apart unless someone dials across;
// this is the someone. It is not safe for concurrent use; Membership
// guards it.
type rejoinTargets struct {
	window time.Duration
	seeds  []string // the seeds' addresses that are not this silo, resolved each round
	failed map[string]failedMember
}

// failedMember is a member seen to fail, remembered for rejoining.
type failedMember struct {
	address string    // its gossip address
	since   time.Time // when it was seen to fail
}

func newRejoinTargets(seeds []string, window time.Duration) *rejoinTargets {
	return &rejoinTargets{window: window, seeds: seeds, failed: map[string]failedMember{}}
}

// memberFailed records that member id, gossiping at address, failed at now.
func (r *rejoinTargets) memberFailed(id, address string, now time.Time) {
	r.failed[id] = failedMember{address: address, since: now}
	for len(r.failed) > maxRejoinFailed {
		oldest := ""
		for id, f := range r.failed {
			if oldest == "" || f.since.Before(r.failed[oldest].since) {
				oldest = id
			}
		}
		delete(r.failed, oldest)
	}
}

// memberAlive records that member id is alive again. It returns the
// member's failure record, if it had one, so the caller can say it came
// back.
func (r *rejoinTargets) memberAlive(id string) (failedMember, bool) {
	f, ok := r.failed[id]
	delete(r.failed, id)
	return f, ok
}

// due returns the addresses a round at now dials: the seeds and the
// remembered failed members whose address no live member gossips at, and
// forgets failures older than the window. alive holds the gossip addresses
// of the view's members, this silo's included.
func (r *rejoinTargets) due(now time.Time, alive []string) []string {
	live := map[string]bool{}
	for _, a := range alive {
		live[canonicalAddress(a)] = true
	}
	var out []string
	add := func(a string) {
		c := canonicalAddress(a)
		if !live[c] {
			live[c] = true // dial each address once a round
			out = append(out, a)
		}
	}
	for _, s := range r.seeds {
		add(s)
	}
	var failed []string
	for id, f := range r.failed {
		if now.Sub(f.since) >= r.window {
			delete(r.failed, id)
			continue
		}
		failed = append(failed, f.address)
	}
	slices.Sort(failed)
	for _, a := range failed {
		add(a)
	}
	return out
}

// canonicalAddress spells an IP:port one way; anything else stays as it
// is (the seeds reach here resolved).
func canonicalAddress(a string) string {
	ap, err := netip.ParseAddrPort(a)
	if err != nil {
		return a
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
}
