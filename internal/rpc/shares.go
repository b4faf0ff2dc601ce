package rpc

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/actor"
	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/proxy"
)

// Defaults of Shares.
const (
	// DefaultSharedInFlight is the requests in flight that the clients
	// busy at once share: each may have its part of it, all its
	// connections together, and never less than MinInFlightShare. A
	// client busy alone is bound only by each connection's own
	// MaxInFlight.
	DefaultSharedInFlight = 4096
	// DefaultSharedActivations is the new activations under way (created,
	// their first call not yet answered) that the clients busy at once
	// share: each may have its part of it, and never less than one. A
	// client busy alone is not bound by it.
	DefaultSharedActivations = 8
	// MinInFlightShare is the fewest requests in flight a client may have
	// however many clients are busy.
	MinInFlightShare = 16
	// DefaultShareEpoch is how long a client counts as busy after its
	// last request: one epoch, and up to two.
	DefaultShareEpoch = 100 * time.Millisecond
)

// sharePause is how long a client's connections wait, one after another,
// after refusing a request over the client's share before they read the
// next frame: each connection's reader waits sharePause times the
// client's connections (at most maxSharePause), so that a client retrying
// at once is refused about as often on many connections as on one.
const (
	sharePause    = time.Millisecond
	maxSharePause = 50 * time.Millisecond
)

// pause is how long a reader of p's connections waits after refusing a
// request over p's share.
func (p *party) pause() time.Duration {
	return min(maxSharePause, sharePause*time.Duration(max(1, p.conns.Load())))
}

// ShareOptions configure Shares. Zero fields take their defaults.
type ShareOptions struct {
	// InFlight is the requests in flight that busy clients share.
	// Default DefaultSharedInFlight.
	InFlight int
	// Activations is the new activations under way that busy clients
	// share. Default DefaultSharedActivations; negative: no share (each
	// connection is bound by its budget alone).
	Activations int
	// Epoch is how long a client counts as busy after its last request,
	// at least. Default DefaultShareEpoch.
	Epoch time.Duration
}

// Shares divides what a silo works on between the clients that ask for it
// at the same time. A client is the connections of one proved credential
// together (a token's or a certificate's name), so that opening more
// connections wins a client no more of the silo; a connection whose client
// proved no credential is a client of its own. A client is busy from its
// first request until an epoch or two after its last one; while others
// are busy too, it may have only its part of the requests in flight and
// of the new activations under way, all its connections together, and one
// more is refused at once with proxy.ErrOverloaded. New activations are
// weighed apart from other requests because each costs far more work than
// a call to a grain already active, and that work is done on goroutines of
// its own, ahead of everyone's next turn: a few dozen under way are enough to keep a
// machine's cores busy, and more only delay the other clients' calls.
//
// Endpoints given the same Shares share it. It is safe for concurrent use.
type Shares struct {
	inFlight    int64
	activations int64 // negative: no share
	every       time.Duration
	clock       clock.Clock

	// epoch advances every period; seen counts the clients that made
	// a request in each of the last three epochs (by epoch modulo 3).
	epoch atomic.Uint64
	seen  [3]atomic.Int64

	mu struct {
		sync.Mutex
		timer   clock.Timer
		stopped bool
		// parties are the clients with a credential that have a
		// connection open, by credential and name.
		parties map[partyKey]*party
	}
}

// A party is one client as the shares count it: what its connections
// have in flight and under way together.
type party struct {
	key partyKey
	// epoch is the last epoch the party was counted busy in, plus one
	// (the zero value names no epoch).
	epoch      atomic.Uint64
	inFlight   atomic.Int64 // requests of its connections not yet answered
	activating atomic.Int64 // new activations admitted for it whose first request is not yet answered
	conns      atomic.Int64 // its connections open, changed under Shares.mu; 1 for a connection's own
}

type partyKey struct {
	credential actor.Credential
	name       string
}

// join returns the party of a connection whose client is id, which the
// connection leaves when it closes.
func (s *Shares) join(id actor.Identity) *party {
	if id.Credential == actor.CredentialNone || id.Name == "" {
		p := &party{}
		p.conns.Store(1)
		return p
	}
	k := partyKey{id.Credential, id.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.mu.parties[k]
	if p == nil {
		if s.mu.parties == nil {
			s.mu.parties = make(map[partyKey]*party)
		}
		p = &party{key: k}
		s.mu.parties[k] = p
	}
	p.conns.Add(1)
	return p
}

// leave ends one connection's part in p; a party whose last connection
// left is forgotten (what it still has in flight is counted on it until
// answered, and a connection that opens later starts a party afresh).
func (s *Shares) leave(p *party) {
	if p.key == (partyKey{}) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.conns.Add(-1) == 0 && s.mu.parties[p.key] == p {
		delete(s.mu.parties, p.key)
	}
}

// NewShares returns Shares on clock c (nil: the real clock). They count
// no time until Start.
func NewShares(opts ShareOptions, c clock.Clock) *Shares {
	if c == nil {
		c = clock.Real{}
	}
	s := &Shares{inFlight: int64(opts.InFlight), activations: int64(opts.Activations), every: opts.Epoch, clock: c}
	if s.inFlight <= 0 {
		s.inFlight = DefaultSharedInFlight
	}
	if s.activations == 0 {
		s.activations = DefaultSharedActivations
	}
	if s.every <= 0 {
		s.every = DefaultShareEpoch
	}
	return s
}

// Start starts counting epochs. Calling it twice, or after Stop, does
// nothing.
func (s *Shares) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.timer != nil || s.mu.stopped {
		return
	}
	s.mu.timer = s.clock.AfterFunc(s.every, s.tick)
}

// Stop stops counting epochs; it is safe to call twice.
func (s *Shares) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.stopped = true
	if s.mu.timer != nil {
		s.mu.timer.Stop()
	}
}

func (s *Shares) tick() {
	next := s.epoch.Load() + 1
	s.seen[next%3].Store(0)
	s.epoch.Store(next)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.stopped {
		s.mu.timer = s.clock.AfterFunc(s.every, s.tick)
	}
}

// arrive counts a request of p and returns how many clients are busy,
// p included. Of the readers of p's connections that arrive in a new
// epoch at once, one counts it.
func (s *Shares) arrive(p *party) int64 {
	cur := s.epoch.Load()
	n := s.seen[cur%3].Load()
	if last := p.epoch.Load(); last != cur+1 && p.epoch.CompareAndSwap(last, cur+1) {
		n = s.seen[cur%3].Add(1)
	}
	// A client seen in the previous epoch but not yet in this one is
	// still busy: the previous epoch's count covers it.
	return max(n, s.seen[(cur+2)%3].Load())
}

// busy returns how many clients are busy now, at least one.
func (s *Shares) busy() int64 {
	cur := s.epoch.Load()
	return max(1, s.seen[cur%3].Load(), s.seen[(cur+2)%3].Load())
}

// inFlightShare is the requests in flight a client may have, all its
// connections together, while busy clients are busy, or -1 for no bound.
func (s *Shares) inFlightShare(busy int64) int64 {
	if busy <= 1 {
		return -1
	}
	return max(MinInFlightShare, s.inFlight/busy)
}

// activationShare is how many new activations a client may have under
// way, all its connections together, or -1 for no bound.
func (s *Shares) activationShare() int64 {
	busy := s.busy()
	if busy <= 1 || s.activations < 0 {
		return -1
	}
	return max(1, s.activations/busy)
}

// overShare is the error of a request over its client's share.
func overShare(what string, share, busy int64) error {
	return fmt.Errorf("%w: %d %s for this client, its share while %d clients are busy; retry later",
		proxy.ErrOverloaded, share, what, busy)
}
