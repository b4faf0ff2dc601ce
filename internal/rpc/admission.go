package rpc

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/granary-go/granary/clock"
	"github.com/granary-go/granary/internal/delivery"
	"github.com/granary-go/granary/internal/ratelog"
	"github.com/granary-go/granary/internal/transport"
	"github.com/granary-go/granary/proxy"
)

// Defaults of what one connection may ask of a silo.
const (
	// DefaultMaxInFlight is how many of a connection's requests a silo
	// works on at once; more are refused with proxy.ErrOverloaded.
	DefaultMaxInFlight = 4096
	// DefaultActivationRate and DefaultActivationBurst budget the new
	// activations one connection's requests may create: a burst, refilled
	// at the rate per second. A request that would create one more is
	// refused with proxy.ErrOverloaded; calls to grains already active are
	// not affected.
	DefaultActivationRate  = 10_000
	DefaultActivationBurst = 10_000
	// DefaultMaxKeyLength is the longest grain key a request may name, in
	// bytes; a longer one is answered with proxy.ErrBadRequest before any
	// grain sees it, since every activation keeps its key for its life.
	DefaultMaxKeyLength = 4 << 10
)

// admission bounds what one connection may ask of the silo: requests in
// flight, and new activations, by a token bucket on the endpoint's clock
// that is read only when a request would create an activation.
type admission struct {
	maxInFlight int64
	maxKeyLen   int     // negative: no bound
	rate        float64 // activations per second; 0: no budget
	burst       float64
	clock       clock.Clock

	mu struct {
		sync.Mutex
		tokens float64
		last   time.Time
	}
}

func (a *admission) init(opts EndpointOptions, c clock.Clock) {
	a.maxInFlight = int64(opts.MaxInFlight)
	if a.maxInFlight == 0 {
		a.maxInFlight = DefaultMaxInFlight
	}
	a.maxKeyLen = cmp.Or(opts.MaxKeyLength, DefaultMaxKeyLength)
	a.rate, a.burst = float64(opts.ActivationRate), float64(opts.ActivationBurst)
	if opts.ActivationRate == 0 {
		a.rate = DefaultActivationRate
	}
	if opts.ActivationBurst == 0 {
		a.burst = DefaultActivationBurst
	}
	a.clock = c
	a.mu.tokens = a.burst
}

// allowActivation spends one token of the activation budget, if any is
// left.
func (a *admission) allowActivation() bool {
	if a.rate < 0 {
		return true // unlimited
	}
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.mu.last.IsZero() {
		if elapsed := now.Sub(a.mu.last); elapsed > 0 {
			a.mu.tokens = min(a.burst, a.mu.tokens+elapsed.Seconds()*a.rate)
		}
	}
	a.mu.last = now
	if a.mu.tokens < 1 {
		return false
	}
	a.mu.tokens--
	return true
}

// AdmitActivation implements delivery.ActivationLimiter: the host asks before
// it creates an activation for a request that came on this connection. A
// connection with Shares may have, with its client's other connections,
// only the client's share of the new activations under way while other
// clients are busy; the client counts its own, from here (or from the
// reader, which may have taken the share for req already) until req is
// answered, whether or not others are busy.
func (e *Endpoint) AdmitActivation(req *delivery.Request) error {
	reserved := req.Activating // the reader took the share already
	if e.party != nil && !reserved {
		n := e.party.activating.Add(1)
		if share := e.shares.activationShare(); share >= 0 && n > share {
			e.party.activating.Add(-1)
			e.rejected(rejectActivationShare)
			return overShare("new activations under way", share, e.shares.busy())
		}
	}
	if !e.admit.allowActivation() {
		if e.party != nil {
			e.party.activating.Add(-1)
			req.Activating = false
		}
		e.rejected(rejectActivationBudget)
		return fmt.Errorf("%w: this connection's budget of new activations is spent; retry later", proxy.ErrOverloaded)
	}
	req.Activating = e.party != nil
	return nil
}

// answered is called once req has been answered: it ends the new
// activation req was admitted for, if any.
func (e *Endpoint) answered(req *delivery.Request) {
	e.inFlight.Add(-1)
	if e.party != nil {
		e.party.inFlight.Add(-1)
		if req.Activating {
			e.party.activating.Add(-1)
		}
	}
}

// rejection kinds, counted and logged once per connection.
type rejection int

const (
	rejectInFlight rejection = iota
	rejectActivationBudget
	rejectBadRequest
	rejectUnknownGrainType
	rejectUnknownMethod
	rejectMalformedFrame
	rejectUnknownFrameKind
	rejectPermissionDenied
	rejectActivationShare
	numRejections
)

var rejectionNames = [numRejections]string{
	"too many calls in flight", "activation budget spent", "bad request", "unknown grain type", "unknown method",
	"malformed frame", "unknown frame kind", "permission denied", "share of new activations taken",
}

// overloadedInFlight is the error of a request over the in-flight limit.
func overloadedInFlight(limit int64) error {
	return fmt.Errorf("%w: %d calls in flight on this connection", proxy.ErrOverloaded, limit)
}

// Rejections counts what the endpoints sharing it refused of their peers,
// and logs it through one throttle. A silo gives one to all its endpoints,
// so that a peer opening connection after connection cannot flood the log
// (each endpoint still logs a kind at most once), and so that the counts
// outlive the connections. It is safe for concurrent use.
type Rejections struct {
	log    *ratelog.Logger
	counts [numRejections]atomic.Int64
}

// NewRejections returns Rejections that log through log; nil means a
// logger of its own on slog.Default and the real clock, with the
// transport's default burst and interval.
func NewRejections(log *ratelog.Logger) *Rejections {
	if log == nil {
		log = newRejectionLog(nil, nil)
	}
	return &Rejections{log: log}
}

// newRejectionLog is the throttle of an endpoint that was given no
// Rejections: the same shape as a listener's.
func newRejectionLog(log *slog.Logger, c clock.Clock) *ratelog.Logger {
	return ratelog.New(log, c, transport.DefaultLogBurst, transport.DefaultLogInterval)
}

// RejectionStats count requests and frames refused, over every endpoint
// that shares one Rejections, since it was made.
type RejectionStats struct {
	Overloaded       int64  // requests refused: too many calls in flight on their connection, or more than its share
	OverShare        int64  // requests refused: their new activation was over the client's share
	OverBudget       int64  // requests refused: their new activation was over the connection's budget
	BadRequests      int64  // requests whose contents could not be read (key, payload, budget, call id)
	UnknownGrainType int64  // requests for a grain type the silo does not host
	UnknownMethod    int64  // requests for a method the grain type does not have
	MalformedFrames  int64  // frames that could not be parsed; each closed its connection
	UnknownKinds     int64  // frames of a kind this end does not know; each closed its connection
	PermissionDenied int64  // requests for a method that needs a right their connection's credential lacks
	LogSuppressed    uint64 // log lines about the above dropped by the throttle
}

// Stats returns the counts.
func (r *Rejections) Stats() RejectionStats {
	c := &r.counts
	return RejectionStats{
		Overloaded: c[rejectInFlight].Load(), OverBudget: c[rejectActivationBudget].Load(),
		BadRequests: c[rejectBadRequest].Load(), UnknownGrainType: c[rejectUnknownGrainType].Load(),
		UnknownMethod: c[rejectUnknownMethod].Load(), MalformedFrames: c[rejectMalformedFrame].Load(),
		UnknownKinds: c[rejectUnknownFrameKind].Load(), PermissionDenied: c[rejectPermissionDenied].Load(),
		OverShare:     c[rejectActivationShare].Load(),
		LogSuppressed: r.log.Suppressed(),
	}
}

// rejectionOf tells which kind of rejection the error a request is
// answered with is, if any: only the slow path of a failed request asks.
func rejectionOf(err error) (rejection, bool) {
	switch {
	case errors.Is(err, proxy.ErrBadRequest):
		return rejectBadRequest, true
	case errors.Is(err, proxy.ErrUnknownGrainType):
		return rejectUnknownGrainType, true
	case errors.Is(err, proxy.ErrUnknownMethod):
		return rejectUnknownMethod, true
	case errors.Is(err, proxy.ErrPermissionDenied):
		// The gateway's own refusal, or a grain's that checked the
		// caller's identity (a limiter asked to change its options).
		return rejectPermissionDenied, true
	}
	return 0, false
}

// keyTooLong is the refusal of a request whose grain key is longer than
// the endpoint takes.
func keyTooLong(n, most int) error {
	return fmt.Errorf("%w: grain key of %d bytes, longer than the %d this silo takes", proxy.ErrBadRequest, n, most)
}
