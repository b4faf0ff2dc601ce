package redisstore

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/granary-go/granary/persistence"
)

// maxDoubts bounds the ETags remembered for one key. Writes of one record
// are sequential, so if several attempts land late (a stalled server
// running a backlog), each finds the one before it stored: the newest are
// the ones worth keeping.
const maxDoubts = 8

// doubts remembers, for each key, the ETags this store proposed in writes
// whose outcome it never learned (the reply was lost), and "" for such a
// delete. Without them, a write that landed but whose reply was lost would
// make the next attempt (same expected ETag, new proposed one) fail as a
// conflict, and the owner would deactivate over a network blip. With them,
// the next attempt also accepts a stored ETag that can only be this
// store's own earlier attempt.
//
// An entry holds only while the caller keeps the same expected ETag (its
// base); any answer from Redis about the key, a success or a conflict,
// settles it.
type doubts struct {
	// n counts entries, so that the common case (no doubt at all) costs an
	// atomic load and no lock.
	n  atomic.Int64
	mu struct {
		sync.Mutex
		entries map[persistence.Key]*doubt
	}
}

type doubt struct {
	base  string   // the expected ETag of the attempts
	etags []string // what they proposed, oldest first
}

// alternates returns the ETags that a call on key expecting base may also
// accept, or nil.
func (d *doubts) alternates(key persistence.Key, base string) []string {
	if d.n.Load() == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.mu.entries[key]
	if e == nil || e.base != base {
		return nil
	}
	return slices.Clone(e.etags)
}

// add remembers that an attempt on key expecting base, proposing etag,
// may have landed.
func (d *doubts) add(key persistence.Key, base, etag string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.entries == nil {
		d.mu.entries = make(map[persistence.Key]*doubt)
	}
	e := d.mu.entries[key]
	if e == nil {
		e = &doubt{}
		d.mu.entries[key] = e
		d.n.Add(1)
	}
	if e.base != base {
		e.base, e.etags = base, e.etags[:0]
	}
	if slices.Contains(e.etags, etag) {
		return
	}
	if len(e.etags) == maxDoubts {
		e.etags = slices.Delete(e.etags, 0, 1)
	}
	e.etags = append(e.etags, etag)
}

// settle forgets key's doubts: Redis has answered about it.
func (d *doubts) settle(key persistence.Key) {
	if d.n.Load() == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.mu.entries[key]; ok {
		delete(d.mu.entries, key)
		d.n.Add(-1)
	}
}
