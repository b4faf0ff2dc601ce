package limiter

import (
	"math"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// Run with: go test -run '^$' -bench . -benchmem ./grains/ratelimit/limiter/
//
// The limits are large enough that nothing is rejected during measurement,
// except in the Rejected benchmarks, which measure the immediate failure.
// golang.org/x/time/rate is measured beside them as the floor for an
// in-process limiter.

func benchCores() []struct {
	name string
	core Core
} {
	huge := int64(math.MaxInt64)
	c, _ := NewConcurrency(ConcurrencyOptions{PermitLimit: huge}, t0)
	fw, _ := NewFixedWindow(FixedWindowOptions{PermitLimit: huge, Window: time.Second}, t0)
	sw, _ := NewSlidingWindow(SlidingWindowOptions{PermitLimit: huge, SegmentsPerWindow: 4, Window: time.Second}, t0)
	tb, _ := NewTokenBucket(TokenBucketOptions{TokenLimit: huge, TokensPerPeriod: 1, ReplenishmentPeriod: time.Second}, t0)
	return []struct {
		name string
		core Core
	}{{"Concurrency", c}, {"FixedWindow", fw}, {"SlidingWindow", sw}, {"TokenBucket", tb}}
}

func BenchmarkAttemptAcquire(b *testing.B) {
	for _, bc := range benchCores() {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			now := t0
			for b.Loop() {
				if l, _ := bc.core.AttemptAcquire(now, 1); !l.Acquired() {
					b.Fatal("rejected")
				}
			}
		})
	}
	b.Run("xrate/AllowN", func(b *testing.B) {
		b.ReportAllocs()
		lim := rate.NewLimiter(rate.Every(time.Nanosecond), math.MaxInt)
		now := t0
		for b.Loop() {
			if !lim.AllowN(now, 1) {
				b.Fatal("rejected")
			}
		}
	})
	b.Run("xrate/Allow", func(b *testing.B) {
		b.ReportAllocs()
		lim := rate.NewLimiter(rate.Every(time.Nanosecond), math.MaxInt)
		for b.Loop() {
			if !lim.Allow() {
				b.Fatal("rejected")
			}
		}
	})
}

func BenchmarkAttemptAcquireRejected(b *testing.B) {
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			core := k.make(b, spec{limit: 1})
			_, _ = core.AttemptAcquire(t0, 1)
			b.ReportAllocs()
			for b.Loop() {
				if l, _ := core.AttemptAcquire(t0, 1); l.Acquired() {
					b.Fatal("acquired")
				}
			}
		})
	}
	b.Run("xrate/AllowN", func(b *testing.B) {
		b.ReportAllocs()
		lim := rate.NewLimiter(rate.Every(time.Hour), 1)
		lim.AllowN(t0, 1)
		for b.Loop() {
			if lim.AllowN(t0, 1) {
				b.Fatal("allowed")
			}
		}
	})
}

// BenchmarkConcurrencyAcquireRelease is the concurrency limiter's steady
// state: take a permit and give it back.
func BenchmarkConcurrencyAcquireRelease(b *testing.B) {
	c, _ := NewConcurrency(ConcurrencyOptions{PermitLimit: 1}, t0)
	b.ReportAllocs()
	for b.Loop() {
		l, _ := c.AttemptAcquire(t0, 1)
		_ = c.Release(t0, l.Permits())
	}
}

// BenchmarkLimiterAttemptAcquire measures the concurrent wrapper (mutex and
// clock read) on one goroutine.
func BenchmarkLimiterAttemptAcquire(b *testing.B) {
	for _, bc := range benchCores() {
		if bc.name == "Concurrency" {
			continue // the wrapper tracks each lease for Release; see below
		}
		b.Run(bc.name, func(b *testing.B) {
			// A fresh core per run: -count runs this function again, and
			// the previous run closed its limiter.
			var core Core
			for _, fresh := range benchCores() {
				if fresh.name == bc.name {
					core = fresh.core
				}
			}
			l := New(core)
			defer l.Close()
			b.ReportAllocs()
			for b.Loop() {
				if lease, _ := l.AttemptAcquire(1); !lease.Acquired() {
					b.Fatal("rejected")
				}
			}
		})
	}
	b.Run("Concurrency/AcquireRelease", func(b *testing.B) {
		c, _ := NewConcurrency(ConcurrencyOptions{PermitLimit: 1}, t0)
		l := New(c)
		defer l.Close()
		b.ReportAllocs()
		for b.Loop() {
			lease, _ := l.AttemptAcquire(1)
			l.Release(lease)
		}
	})
}
