package ratelimit

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"weak"

	"github.com/granary-go/granary/grains/ratelimit/internal/limitgrain"
	"github.com/granary-go/granary/internal/silohooks"
	"github.com/granary-go/granary/proxy"
)

// ErrRegistered is returned by Register when the grains are already
// registered on the registrar with other defaults.
var ErrRegistered = errors.New("ratelimit: already registered with other defaults")

// Register registers the four rate-limiting grain types on r, a silo,
// before it starts: concurrency, fixed window, sliding window and token
// bucket, one grain per key. defaults are the options of grains that were
// never configured; zero fields take the library defaults (see Defaults).
//
// On a silo with a meter provider (silo.WithMeterProvider), Register also
// reports the limiter instruments (docs/operations.md) beside the silo's
// own until the silo stops.
//
// Registering again on the same registrar with the same defaults does
// nothing and returns nil, so that every part of a program that needs the
// limiters may register them; other defaults fail with ErrRegistered.
func Register(r proxy.Registrar, defaults Defaults) error {
	defaults.EnsureDefaults()
	if err := defaults.Validate(); err != nil {
		return err
	}
	counters, err := registerGrains(r, defaults)
	if err != nil || counters == nil {
		return err
	}
	// Not under the registrations' lock: attaching waits for the meter
	// provider, whose collections may run a program's own callback that
	// reads SiloStats, which takes that lock.
	return attachMetrics(r, counters)
}

// registerGrains registers the grain types on r unless Register already
// did, and returns the counters of a new registration (nil for one that
// was already there).
func registerGrains(r proxy.Registrar, defaults Defaults) (*limitgrain.Counters, error) {
	key := registrarKey(r)
	registrations.Lock()
	defer registrations.Unlock()
	registrations.prune()
	if key != nil {
		if prev, ok := registrations.m[key]; ok {
			if prev.defaults != defaults {
				return nil, fmt.Errorf("%w: %+v, now %+v", ErrRegistered, prev.defaults, defaults)
			}
			return nil, nil
		}
	}
	counters := new(limitgrain.Counters)
	if err := limitgrain.Register(r, limitgrain.Defaults{
		Concurrency:   defaults.Concurrency,
		FixedWindow:   defaults.FixedWindow,
		SlidingWindow: defaults.SlidingWindow,
		TokenBucket:   defaults.TokenBucket,
	}, counters); err != nil {
		return nil, err
	}
	if err := requireAdminForChanges(r); err != nil {
		return nil, err
	}
	if key != nil {
		registrations.m[key] = registration{defaults: defaults, counters: counters}
	}
	return counters, nil
}

// attachMetrics reports the limiter instruments (docs/operations.md)
// through the meter provider of the silo r, if it has one, for as long as
// it runs. The silo registers them: this package links no metrics SDK,
// so that a program that only holds limiters links no server.
func attachMetrics(r proxy.Registrar, counters *limitgrain.Counters) error {
	s, ok := r.(silohooks.Silo)
	if !ok {
		return nil
	}
	_, err := silohooks.AttachAcquisitions(s, func() silohooks.Acquisitions {
		c := counters.Snapshot()
		return silohooks.Acquisitions{
			Granted: c.Granted, Rejected: c.Rejected, Expired: c.Expired, Cancelled: c.Cancelled,
			Queued: c.Queued, Waiting: c.Waiting,
		}
	})
	return err
}

// AcquisitionStats counts what the limiter grains of one silo answered to
// acquisitions since Register, for the silo's metrics. A concurrency
// acquire and its release count once; releases, statistics and
// configuration calls are not acquisitions.
type AcquisitionStats struct {
	// Granted counts acquisitions answered with an acquired lease, at once
	// or after a wait.
	Granted uint64
	// Rejected counts acquisitions answered with a rejected lease: the
	// limit was reached, the queue was full or disabled, a newer waiter
	// evicted them (NewestFirst), or the grain deactivated while they
	// waited.
	Rejected uint64
	// Queued counts acquisitions that had to wait, in the limiter's queue
	// or behind a configuration change; each also ends as granted,
	// rejected, expired or cancelled.
	Queued uint64
	// Expired counts acquisitions whose budget ran out while they waited
	// (the reason "Lease not acquired").
	Expired uint64
	// Cancelled counts acquisitions whose caller cancelled while they
	// waited.
	Cancelled uint64
	// Waiting is the queue depth now: the calls the silo's limiter grains
	// hold, queued acquisitions and configuration changes, resets and
	// deletes waiting their turn.
	Waiting int64
}

// SiloStats returns the acquisition counters of the limiter grains that
// Register registered on r, and false when Register never did. Reading
// them costs a few atomic loads; the grains pay one atomic add per
// outcome, so a metrics exporter may read them as often as it likes.
func SiloStats(r proxy.Registrar) (AcquisitionStats, bool) {
	key := registrarKey(r)
	if key == nil {
		return AcquisitionStats{}, false
	}
	registrations.Lock()
	reg, ok := registrations.m[key]
	registrations.Unlock()
	if !ok {
		return AcquisitionStats{}, false
	}
	s := reg.counters.Snapshot()
	return AcquisitionStats{
		Granted: s.Granted, Rejected: s.Rejected, Queued: s.Queued,
		Expired: s.Expired, Cancelled: s.Cancelled, Waiting: s.Waiting,
	}, true
}

// registrations remembers which registrars Register has served, so that
// it never registers twice. Registrars held by pointer (a *silo.Silo) are
// remembered by weak pointer, so that a stopped silo can be collected.
var registrations = registry{m: make(map[any]registration)}

type registry struct {
	sync.Mutex
	m map[any]registration
}

// registration is what Register did for one registrar.
type registration struct {
	defaults Defaults
	counters *limitgrain.Counters
}

// pointerKey is the key of a registrar held by pointer.
type pointerKey = weak.Pointer[byte]

// registrarKey returns the key r is remembered under, or nil for a
// registrar that cannot be told apart from others.
func registrarKey(r proxy.Registrar) any {
	v := reflect.ValueOf(r)
	switch {
	case !v.IsValid():
		return nil
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return weak.Make((*byte)(v.UnsafePointer()))
	case v.Comparable():
		return r
	}
	return nil
}

// prune forgets registrars that have been collected.
func (r *registry) prune() {
	for k := range r.m {
		if p, ok := k.(pointerKey); ok && p.Value() == nil {
			delete(r.m, k)
		}
	}
}
