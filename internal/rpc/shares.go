package rpc

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/proxy"
)

// Defaults of Shares.
const (
	// DefaultSharedInFlight is the requests in flight that the client
	// connections busy at once share: each may have its part of it, and
	// never less than MinInFlightShare. A connection busy alone is bound
	// only by its own MaxInFlight.
	DefaultSharedInFlight = 4096
	// DefaultSharedActivations is the new activations under way (created,
	// their first call not yet answered) that the client connections busy
	// at once share: each may have its part of it, and never less than
	// one. A connection busy alone is not bound by it.
	DefaultSharedActivations = 8
	// MinInFlightShare is the fewest requests in flight a connection may
	// have however many connections are busy.
	MinInFlightShare = 16
	// DefaultShareEpoch is how long a connection counts as busy after its
	// last request: one epoch, and up to two.
	DefaultShareEpoch = 100 * time.Millisecond
)

// sharePause is how long a connection's reader waits after refusing a
// request over the connection's share before it reads the next frame.
const sharePause = time.Millisecond

// ShareOptions configure Shares. Zero fields take their defaults.
type ShareOptions struct {
	// InFlight is the requests in flight that busy connections share.
	// Default DefaultSharedInFlight.
	InFlight int
	// Activations is the new activations under way that busy connections
	// share. Default DefaultSharedActivations; negative: no share (each
	// connection is bound by its budget alone).
	Activations int
	// Epoch is how long a connection counts as busy after its last
	// request, at least. Default DefaultShareEpoch.
	Epoch time.Duration
}

// Shares divides what a silo works on between the client connections that
// ask for it at the same time. A connection is busy from its first request
// until an epoch or two after its last one; while others are busy too,
// each may have only its part of the requests in flight and of the new
// activations under way, and one more is refused at once with
// proxy.ErrOverloaded. New activations are weighed apart from other
// requests because each costs far more work than a call to a grain already
// active, and that work is done on goroutines of its own, ahead of
// everyone's next turn: a few dozen under way are enough to keep a
// machine's cores busy, and more only delay the other connections' calls.
//
// Endpoints given the same Shares share it. It is safe for concurrent use.
type Shares struct {
	inFlight    int64
	activations int64 // negative: no share
	every       time.Duration
	clock       clock.Clock

	// epoch advances every period; seen counts the connections that made
	// a request in each of the last three epochs (by epoch modulo 3).
	epoch atomic.Uint64
	seen  [3]atomic.Int64

	mu struct {
		sync.Mutex
		timer   clock.Timer
		stopped bool
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

// arrive counts a request of the connection whose last epoch is *last
// (touched only by that connection's reader goroutine) and returns how
// many connections are busy, this one included.
func (s *Shares) arrive(last *uint64) int64 {
	cur := s.epoch.Load()
	n := s.seen[cur%3].Load()
	if *last != cur+1 { // +1: the zero value names no epoch
		*last = cur + 1
		n = s.seen[cur%3].Add(1)
	}
	// A connection seen in the previous epoch but not yet in this one is
	// still busy: the previous epoch's count covers it.
	return max(n, s.seen[(cur+2)%3].Load())
}

// busy returns how many connections are busy now, at least one.
func (s *Shares) busy() int64 {
	cur := s.epoch.Load()
	return max(1, s.seen[cur%3].Load(), s.seen[(cur+2)%3].Load())
}

// inFlightShare is the requests in flight a connection may have while busy
// connections are busy, when that bounds it more than its own limit own.
func (s *Shares) inFlightShare(busy, own int64) int64 {
	if busy <= 1 {
		return own
	}
	return min(own, max(MinInFlightShare, s.inFlight/busy))
}

// activationShare is how many new activations a connection may have under
// way, or -1 for no bound.
func (s *Shares) activationShare() int64 {
	busy := s.busy()
	if busy <= 1 || s.activations < 0 {
		return -1
	}
	return max(1, s.activations/busy)
}

// overShare is the error of a request over its connection's share.
func overShare(what string, share, busy int64) error {
	return fmt.Errorf("%w: %d %s on this connection, its share while %d connections are busy; retry later",
		proxy.ErrOverloaded, share, what, busy)
}
