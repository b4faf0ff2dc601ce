package ratelimit

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/granary-go/granary/grains/ratelimit/limiter"
	"github.com/granary-go/granary/proxy"
)

// The options of the four algorithms. They are the limiter package's
// types: every field is documented there, zero values are safe (automatic
// replenishment unless ManualReplenishment is set, OldestFirst), and
// Validate names every invalid field.
type (
	// ConcurrencyOptions configures a concurrency limiter: PermitLimit,
	// QueueLimit, QueueOrder.
	ConcurrencyOptions = limiter.ConcurrencyOptions
	// FixedWindowOptions configures a fixed window: PermitLimit,
	// QueueLimit, QueueOrder, Window, ManualReplenishment.
	FixedWindowOptions = limiter.FixedWindowOptions
	// SlidingWindowOptions configures a sliding window: the fixed-window
	// options and SegmentsPerWindow.
	SlidingWindowOptions = limiter.SlidingWindowOptions
	// TokenBucketOptions configures a token bucket: TokenLimit,
	// TokensPerPeriod, QueueLimit, QueueOrder, ReplenishmentPeriod,
	// ManualReplenishment.
	TokenBucketOptions = limiter.TokenBucketOptions
	// QueueOrder says which queued acquisition is served first.
	QueueOrder = limiter.QueueOrder
)

// Queue orders.
const (
	OldestFirst = limiter.OldestFirst
	NewestFirst = limiter.NewestFirst
)

// Options is satisfied by the options type of each of the four algorithms.
type Options interface {
	ConcurrencyOptions | FixedWindowOptions | SlidingWindowOptions | TokenBucketOptions
}

// Library defaults: what a silo's grains use until they are configured,
// for every field of Defaults left zero.
const (
	DefaultPermitLimit         = 10
	DefaultWindow              = time.Second
	DefaultSegmentsPerWindow   = 2
	DefaultTokenLimit          = 10
	DefaultTokensPerPeriod     = 2
	DefaultReplenishmentPeriod = time.Second
)

// Defaults are a silo's default options per algorithm: the options of a
// limiter grain that was never configured, or whose state was deleted.
// Fields left zero take the library defaults (10 permits or tokens, no
// queue, a 1 s window of 2 segments, 2 tokens per 1 s period, automatic
// replenishment); QueueLimit stays 0, which rejects at once when no
// permit is free.
type Defaults struct {
	Concurrency   ConcurrencyOptions   // of concurrency limiters
	FixedWindow   FixedWindowOptions   // of fixed-window limiters
	SlidingWindow SlidingWindowOptions // of sliding-window limiters
	TokenBucket   TokenBucketOptions   // of token buckets
}

// EnsureDefaults fills zero fields with the library defaults.
func (d *Defaults) EnsureDefaults() {
	orDefault(&d.Concurrency.PermitLimit, DefaultPermitLimit)
	orDefault(&d.FixedWindow.PermitLimit, DefaultPermitLimit)
	orDefault(&d.FixedWindow.Window, DefaultWindow)
	orDefault(&d.SlidingWindow.PermitLimit, DefaultPermitLimit)
	orDefault(&d.SlidingWindow.Window, DefaultWindow)
	orDefault(&d.SlidingWindow.SegmentsPerWindow, DefaultSegmentsPerWindow)
	orDefault(&d.TokenBucket.TokenLimit, DefaultTokenLimit)
	orDefault(&d.TokenBucket.TokensPerPeriod, DefaultTokensPerPeriod)
	orDefault(&d.TokenBucket.ReplenishmentPeriod, DefaultReplenishmentPeriod)
}

func orDefault[T int64 | time.Duration](field *T, value T) {
	if *field == 0 {
		*field = value
	}
}

// Validate reports every invalid field of every algorithm's defaults.
func (d Defaults) Validate() error {
	return errors.Join(
		prefixed("Concurrency", d.Concurrency.Validate()),
		prefixed("FixedWindow", d.FixedWindow.Validate()),
		prefixed("SlidingWindow", d.SlidingWindow.Validate()),
		prefixed("TokenBucket", d.TokenBucket.Validate()),
	)
}

func prefixed(field string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("ratelimit: Defaults.%s: %w", field, err)
}

// Errors of named configurations.
var (
	// ErrConfigNotFound is returned for a configuration name that is not
	// registered (for the algorithm asked for).
	ErrConfigNotFound = errors.New("ratelimit: configuration not found")
	// ErrAmbiguousConfig is returned by Configs.Limiter when a name is
	// registered for more than one algorithm.
	ErrAmbiguousConfig = errors.New("ratelimit: configuration name registered for several algorithms")
	// ErrInvalidConfig is wrapped by every problem NewConfigs reports.
	ErrInvalidConfig = errors.New("ratelimit: invalid configuration")
)

// Config is a named configuration: options of one algorithm that holders
// and middleware refer to by name. Make one with Named.
type Config struct {
	name    string
	options any           // one of the four options types
	lease   *LeaseOptions // the holders' leased quota, if any
}

// Named returns the configuration called name with options o.
func Named[O Options](name string, o O) Config { return Config{name: name, options: o} }

// Leased returns the configuration with leased quota: the holders that
// ByName and Configs.Limiter make for it are Leased with o (see
// Holder.Leased).
func (c Config) Leased(o LeaseOptions) Config {
	c.lease = &o
	return c
}

// Name returns the configuration's name as it was given.
func (c Config) Name() string { return c.name }

// Options returns the configuration's options: a ConcurrencyOptions,
// FixedWindowOptions, SlidingWindowOptions or TokenBucketOptions.
func (c Config) Options() any { return c.options }

func (c Config) validate() error {
	switch o := c.options.(type) {
	case ConcurrencyOptions:
		return o.Validate()
	case FixedWindowOptions:
		return o.Validate()
	case SlidingWindowOptions:
		return o.Validate()
	case TokenBucketOptions:
		return o.Validate()
	}
	return fmt.Errorf("options of type %T", c.options)
}

// Configs is an immutable set of named configurations. Names compare
// case-insensitively; one name may be registered once per algorithm. It is
// safe for concurrent use.
type Configs struct {
	byName map[string][]Config
}

// NewConfigs checks configs and returns them as a set. It reports every
// problem at once: a blank name, invalid options, a name registered twice
// for one algorithm.
func NewConfigs(configs ...Config) (*Configs, error) {
	set := &Configs{byName: make(map[string][]Config, len(configs))}
	var errs []error
	for _, c := range configs {
		if strings.TrimSpace(c.name) == "" {
			errs = append(errs, fmt.Errorf("%w: a configuration has a blank name", ErrInvalidConfig))
			continue
		}
		if err := c.validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w %q: %w", ErrInvalidConfig, c.name, err))
			continue
		}
		key := foldName(c.name)
		if slicesContainsKind(set.byName[key], c) {
			errs = append(errs, fmt.Errorf("%w: %q is registered twice for %T", ErrInvalidConfig, c.name, c.options))
			continue
		}
		set.byName[key] = append(set.byName[key], c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return set, nil
}

func foldName(name string) string { return strings.ToLower(name) }

func slicesContainsKind(configs []Config, c Config) bool {
	for _, other := range configs {
		if reflect.TypeOf(other.options) == reflect.TypeOf(c.options) {
			return true
		}
	}
	return false
}

// Lookup returns the options of the configuration called name for the
// algorithm of O.
func Lookup[O Options](set *Configs, name string) (O, bool) {
	if set != nil {
		for _, c := range set.byName[foldName(name)] {
			if o, ok := c.options.(O); ok {
				return o, true
			}
		}
	}
	var zero O
	return zero, false
}

// ByName returns a holder for key bound to the options of the
// configuration called name for the algorithm of O, or an error wrapping
// ErrConfigNotFound.
func ByName[O Options](set *Configs, c proxy.Caller, name, key string) (*Holder[O], error) {
	o, ok := Lookup[O](set, name)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrConfigNotFound, name)
	}
	h := holderFor(c, key, o)
	for _, found := range set.byName[foldName(name)] {
		if _, mine := found.options.(O); mine && found.lease != nil {
			return h.Leased(*found.lease), nil
		}
	}
	return h, nil
}

// Limiter returns a holder for key bound to the configuration called name,
// whatever its algorithm. It fails with ErrConfigNotFound for an unknown
// name and ErrAmbiguousConfig for a name registered for several
// algorithms (use ByName to choose one).
func (s *Configs) Limiter(c proxy.Caller, name, key string) (Limiter, error) {
	var found []Config
	if s != nil {
		found = s.byName[foldName(name)]
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("%w: %q", ErrConfigNotFound, name)
	case 1:
	default:
		return nil, fmt.Errorf("%w: %q", ErrAmbiguousConfig, name)
	}
	lease := found[0].lease
	switch o := found[0].options.(type) {
	case ConcurrencyOptions:
		return Concurrency(c, key, o), nil
	case FixedWindowOptions:
		return leasedIf(FixedWindow(c, key, o), lease), nil
	case SlidingWindowOptions:
		return leasedIf(SlidingWindow(c, key, o), lease), nil
	default:
		return leasedIf(TokenBucket(c, key, o.(TokenBucketOptions)), lease), nil
	}
}

// leasedIf returns h Leased with o, or h when o is nil.
func leasedIf[O Options](h *Holder[O], o *LeaseOptions) *Holder[O] {
	if o == nil {
		return h
	}
	return h.Leased(*o)
}
