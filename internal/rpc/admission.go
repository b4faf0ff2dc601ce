package rpc

import (
	"fmt"
	"sync"
	"time"

	"github.com/granary-go/granary/clock"
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
)

// admission bounds what one connection may ask of the silo: requests in
// flight, and new activations, by a token bucket on the endpoint's clock
// that is read only when a request would create an activation.
type admission struct {
	maxInFlight int64
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

// AllowActivation implements host.ActivationLimiter: the host asks before
// it creates an activation for a request that came on this connection.
func (e *Endpoint) AllowActivation() bool {
	if e.admit.allowActivation() {
		return true
	}
	e.rejected(rejectActivationBudget)
	return false
}

// rejection kinds, counted and logged once per connection.
type rejection int

const (
	rejectInFlight rejection = iota
	rejectActivationBudget
	rejectBadRequest
	numRejections
)

var rejectionNames = [numRejections]string{"too many calls in flight", "activation budget spent", "bad request"}

// overloadedInFlight is the error of a request over the in-flight limit.
func overloadedInFlight(limit int64) error {
	return fmt.Errorf("%w: %d calls in flight on this connection", proxy.ErrOverloaded, limit)
}
