package dashboard

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/granary-go/granary/grains/ratelimit"
)

// BenchmarkDashboardRefresh is what one refresh costs the silo: one
// snapshot built and encoded, for a silo with 100 active limiters. The
// public page reads the view, the activations and the instruments; the
// admin page also asks every limiter for its statistics and
// configuration. "scrape" is one gathering of the instruments alone.
func BenchmarkDashboardRefresh(b *testing.B) {
	s, reg := startSilo(b)
	for i := range 100 {
		acquire(b, ratelimit.FixedWindow(s.Caller(), fmt.Sprintf("user:%d", i)), 1)
	}
	// The yardstick: one gathering of the silo's instruments, which every
	// Prometheus scrape of /metrics does too.
	b.Run("scrape", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, keys := range []bool{false, true} {
		name := "public"
		if keys {
			name = "admin-100-keys"
		}
		b.Run(name, func(b *testing.B) {
			d, err := New(s, reg, Options{ShowKeys: keys})
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			d.now = func() time.Time { now = now.Add(time.Hour); return now } // every call builds anew
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.encoded(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
