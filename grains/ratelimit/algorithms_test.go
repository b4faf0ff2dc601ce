package ratelimit_test

import (
	"time"

	"github.com/granary-go/granary/grains/ratelimit"
	"github.com/granary-go/granary/proxy"
)

// algorithm lets one test body run against each of the four limiters.
type algorithm struct {
	name string
	// holder returns a holder for key bound to options with the given
	// permit limit and queue limit, replenished manually and only then
	// (so that nothing comes back while a test runs), or unbound when
	// bind is false.
	holder func(c proxy.Caller, key string, limit, queue int64, bind bool) ratelimit.Limiter
	// defaults are silo defaults with the same limits.
	defaults func(limit, queue int64) ratelimit.Defaults
	// releases says whether leases hold permits until released.
	releases bool
}

func fixedOptions(limit, queue int64) ratelimit.FixedWindowOptions {
	return ratelimit.FixedWindowOptions{PermitLimit: limit, QueueLimit: queue, Window: time.Hour, ManualReplenishment: true}
}

func slidingOptions(limit, queue int64) ratelimit.SlidingWindowOptions {
	return ratelimit.SlidingWindowOptions{PermitLimit: limit, QueueLimit: queue, Window: time.Hour, SegmentsPerWindow: 4, ManualReplenishment: true}
}

func tokenOptions(limit, queue int64) ratelimit.TokenBucketOptions {
	return ratelimit.TokenBucketOptions{TokenLimit: limit, QueueLimit: queue, TokensPerPeriod: 1, ReplenishmentPeriod: time.Hour, ManualReplenishment: true}
}

func concurrencyOptions(limit, queue int64) ratelimit.ConcurrencyOptions {
	return ratelimit.ConcurrencyOptions{PermitLimit: limit, QueueLimit: queue}
}

// bindIf returns o as the options to bind, or none.
func bindIf[O ratelimit.Options](bind bool, o O) []O {
	if bind {
		return []O{o}
	}
	return nil
}

var algorithms = []algorithm{
	{
		name: "concurrency",
		holder: func(c proxy.Caller, key string, limit, queue int64, bind bool) ratelimit.Limiter {
			return ratelimit.Concurrency(c, key, bindIf(bind, concurrencyOptions(limit, queue))...)
		},
		defaults: func(limit, queue int64) ratelimit.Defaults {
			return ratelimit.Defaults{Concurrency: concurrencyOptions(limit, queue)}
		},
		releases: true,
	},
	{
		name: "fixed-window",
		holder: func(c proxy.Caller, key string, limit, queue int64, bind bool) ratelimit.Limiter {
			return ratelimit.FixedWindow(c, key, bindIf(bind, fixedOptions(limit, queue))...)
		},
		defaults: func(limit, queue int64) ratelimit.Defaults {
			return ratelimit.Defaults{FixedWindow: fixedOptions(limit, queue)}
		},
	},
	{
		name: "sliding-window",
		holder: func(c proxy.Caller, key string, limit, queue int64, bind bool) ratelimit.Limiter {
			return ratelimit.SlidingWindow(c, key, bindIf(bind, slidingOptions(limit, queue))...)
		},
		defaults: func(limit, queue int64) ratelimit.Defaults {
			return ratelimit.Defaults{SlidingWindow: slidingOptions(limit, queue)}
		},
	},
	{
		name: "token-bucket",
		holder: func(c proxy.Caller, key string, limit, queue int64, bind bool) ratelimit.Limiter {
			return ratelimit.TokenBucket(c, key, bindIf(bind, tokenOptions(limit, queue))...)
		},
		defaults: func(limit, queue int64) ratelimit.Defaults {
			return ratelimit.Defaults{TokenBucket: tokenOptions(limit, queue)}
		},
	},
}

// allDefaults are silo defaults with the given limits for every algorithm.
func allDefaults(limit, queue int64) ratelimit.Defaults {
	return ratelimit.Defaults{
		Concurrency:   concurrencyOptions(limit, queue),
		FixedWindow:   fixedOptions(limit, queue),
		SlidingWindow: slidingOptions(limit, queue),
		TokenBucket:   tokenOptions(limit, queue),
	}
}

func algorithmNamed(name string) algorithm {
	for _, a := range algorithms {
		if a.name == name {
			return a
		}
	}
	panic("no algorithm " + name)
}
