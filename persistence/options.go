package persistence

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/granary-go/granary/clock"
)

// Defaults for FlusherOptions.
const (
	// DefaultPeriod is how often dirty state is written: a crash loses at
	// most this much.
	DefaultPeriod = 50 * time.Millisecond
	// DefaultWriteTimeout bounds one background store call.
	DefaultWriteTimeout = 5 * time.Second
	// DefaultWriters is how many background writes may be in flight at
	// once.
	DefaultWriters = 16
)

// FlusherOptions holds a Flusher's data settings. The zero value means "all
// defaults".
type FlusherOptions struct {
	// Period is the interval between background flushes. It bounds how much
	// a crash can lose. Zero means DefaultPeriod.
	Period time.Duration
	// WriteTimeout bounds each store call the flusher makes in the
	// background, so that a hung store cannot stall every other record
	// forever. Calls made by a Record's owner (Flush, Clear, Close) are bounded
	// by the owner's context instead. Zero means DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Writers is how many background writes (of different records) may be
	// in flight at once. A store across the network takes a round trip per
	// write, so one writer could not write thousands of dirty grains in a
	// period; 1 writes one record at a time. Zero means DefaultWriters.
	Writers int
}

// EnsureDefaults replaces every zero field with its default and returns o.
func (o *FlusherOptions) EnsureDefaults() *FlusherOptions {
	if o.Period == 0 {
		o.Period = DefaultPeriod
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.Writers == 0 {
		o.Writers = DefaultWriters
	}
	return o
}

// Validate reports every invalid field at once, joined into one error; it
// returns nil when all are valid. Call it after EnsureDefaults, as zero
// values are invalid until defaulted.
func (o *FlusherOptions) Validate() error {
	var errs []error
	if o.Period <= 0 {
		errs = append(errs, fmt.Errorf("persistence: FlusherOptions.Period must be positive, got %v", o.Period))
	}
	if o.WriteTimeout <= 0 {
		errs = append(errs, fmt.Errorf("persistence: FlusherOptions.WriteTimeout must be positive, got %v", o.WriteTimeout))
	}
	if o.Writers <= 0 {
		errs = append(errs, fmt.Errorf("persistence: FlusherOptions.Writers must be positive, got %d", o.Writers))
	}
	return errors.Join(errs...)
}

// Option injects a behaviour into a Flusher.
type Option func(*flusherDeps)

type flusherDeps struct {
	clock  clock.Clock
	logger *slog.Logger
}

// WithClock makes the flusher time its periods with c instead of the wall
// clock; tests pass a clock.Fake and advance it.
func WithClock(c clock.Clock) Option {
	return func(d *flusherDeps) {
		if c != nil {
			d.clock = c
		}
	}
}

// WithLogger makes the flusher log to l (failed background writes at warn,
// dropped records at debug) instead of discarding its logs.
func WithLogger(l *slog.Logger) Option {
	return func(d *flusherDeps) {
		if l != nil {
			d.logger = l
		}
	}
}
