package ratelimit

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"weak"

	"github.com/granary-go/granary/grains/ratelimit/internal/limitgrain"
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
// Registering again on the same registrar with the same defaults does
// nothing and returns nil, so that every part of a program that needs the
// limiters may register them; other defaults fail with ErrRegistered.
func Register(r proxy.Registrar, defaults Defaults) error {
	defaults.EnsureDefaults()
	if err := defaults.Validate(); err != nil {
		return err
	}
	key := registrarKey(r)
	registrations.Lock()
	defer registrations.Unlock()
	registrations.prune()
	if key != nil {
		if prev, ok := registrations.m[key]; ok {
			if prev != defaults {
				return fmt.Errorf("%w: %+v, now %+v", ErrRegistered, prev, defaults)
			}
			return nil
		}
	}
	if err := limitgrain.Register(r, limitgrain.Defaults{
		Concurrency:   defaults.Concurrency,
		FixedWindow:   defaults.FixedWindow,
		SlidingWindow: defaults.SlidingWindow,
		TokenBucket:   defaults.TokenBucket,
	}); err != nil {
		return err
	}
	if key != nil {
		registrations.m[key] = defaults
	}
	return nil
}

// registrations remembers which registrars Register has served, so that
// it never registers twice. Registrars held by pointer (a *silo.Silo) are
// remembered by weak pointer, so that a stopped silo can be collected.
var registrations = registry{m: make(map[any]Defaults)}

type registry struct {
	sync.Mutex
	m map[any]Defaults
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
